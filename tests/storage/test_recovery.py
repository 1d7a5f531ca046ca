"""Crash recovery: reopening a damaged log loses only the damaged tail, never an earlier batch,
and never raises.

A log of several segments is built from known batches, then left as a crash leaves it (file
descriptors dropped, pending index entries lost) or closed, and reopened with a recovery point
low enough that the damaged segments are scanned, after one of:
  (a) the last or second-to-last `.log` cut at a random byte,
  (b) one random bit flipped in one of the last two `.log` files (in the bytes a batch's CRC,
      magic or length protects),
  (c) random garbage appended to the active segment.
Each reopen must keep every batch wholly before the damage byte for byte, end the log right
after the last intact batch (later batches in the same and later segments are gone), cut the
leader-epoch cache and high watermark to match, and accept appends at the new log end.

Also: missing or torn `.index`/`.timeindex` files are rebuilt and lookups still match a scan;
a clean reopen scans nothing; the recovery point bounds what a crash reopen scans.
"""

from __future__ import annotations

import os
import random
import struct

import pytest
from storage_helpers import (
    Stored,
    append,
    check_reads,
    check_timestamps,
    crash,
    fill,
    log_config,
    open_log,
    producer_batch,
    read_all,
    segment_files,
)

CASES = range(40)  # per damage kind: 120 random reopenings in all


class Built:
    """A log built from known batches and then abandoned; where each batch lies on disk."""

    def __init__(self, path, rng: random.Random) -> None:
        self.path = path
        self.config = log_config(
            segment_bytes=rng.choice([1024, 2048]), index_interval_bytes=rng.choice([0, 300])
        )
        log = open_log(path, self.config)
        self.model: list[Stored] = fill(log, rng, rng.randint(25, 45), epochs=True, ts_spread=1000)
        log.update_high_watermark(log.log_end_offset)
        assert len(log.segments) >= 4
        self.bases = [s.base_offset for s in log.segments]
        self.files = segment_files(log)
        if rng.random() < 0.5:
            crash(log)
        else:
            log.close()
        # (segment index, file position) of every batch
        self.where: list[tuple[int, int]] = []
        for stored in self.model:
            seg = max(i for i, b in enumerate(self.bases) if b <= stored.base)
            in_seg = [s for s in self.model if self.segment_of(s) == seg and s.base < stored.base]
            self.where.append((seg, sum(len(s.raw) for s in in_seg)))

    def segment_of(self, stored: Stored) -> int:
        return max(i for i, b in enumerate(self.bases) if b <= stored.base)

    def batches_in(self, seg: int) -> list[int]:
        return [i for i, (s, _) in enumerate(self.where) if s == seg]

    def reopen(self, rng: random.Random):
        # Low enough that the last two segments are scanned; sometimes all of them.
        recovery_point = rng.choice([0, rng.randrange(0, self.bases[-1])])
        return open_log(
            self.path,
            self.config,
            recovery_point=recovery_point,
            high_watermark=self.model[-1].next,
        )


def epoch_of(raw: bytes) -> int:
    return struct.unpack_from(">i", raw, 12)[0]


def check_survivors(log, built: Built, survivors: int, context: str) -> None:
    kept = built.model[:survivors]
    assert read_all(log) == [s.raw for s in kept], f"{context}: surviving batches differ"
    leo = kept[-1].next if kept else 0
    assert log.log_end_offset == leo, context
    assert log.high_watermark <= leo and log.recovery_point == leo, context
    # Leader-epoch cache: exactly the epoch starts among the surviving batches.
    starts: list[tuple[int, int]] = []
    for stored in kept:
        if not starts or epoch_of(stored.raw) > starts[-1][0]:
            starts.append((epoch_of(stored.raw), stored.base))
    assert log.leader_epochs.entries == starts, context
    # Still appendable at the new log end, and readable there.
    new = append(log, producer_batch(3), epoch=log.leader_epochs.latest_epoch() + 1)
    assert new.base == leo, context
    assert log.read(leo, 1) == new.raw, context
    log.close()


def rewrite(path: str, edit) -> None:
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data = edit(data)
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("case", CASES)
def test_cut_at_a_random_byte(tmp_path, case):
    rng = random.Random(f"cut-{case}")
    built = Built(tmp_path, rng)
    seg = rng.choice([-1, -2]) % len(built.bases)
    size = os.path.getsize(built.files[seg])
    starts = {built.where[i][1] for i in built.batches_in(seg)}
    # A cut exactly between two batches of an older segment is the separate test below.
    choices = [p for p in range(size) if seg == len(built.bases) - 1 or p not in starts]
    cut = rng.choice(choices)
    os.truncate(built.files[seg], cut)
    survivors = sum(
        1
        for i, (s, pos) in enumerate(built.where)
        if s < seg or (s == seg and pos + len(built.model[i].raw) <= cut)
    )
    context = f"case={case} segment={seg} cut={cut}"
    log = built.reopen(rng)
    if cut not in starts:
        assert log.load_info.truncated_bytes > 0, context
    check_survivors(log, built, survivors, context)


def protected_positions(built: Built, seg: int) -> list[int]:
    """Bytes of a segment that the CRC, magic or length check covers: all but baseOffset
    (bytes 0-7) and partitionLeaderEpoch (12-15) of each batch."""
    out = []
    for i in built.batches_in(seg):
        pos = built.where[i][1]
        size = len(built.model[i].raw)
        out += [pos + k for k in range(size) if not (k < 8 or 12 <= k < 16)]
    return out


@pytest.mark.parametrize("case", CASES)
def test_single_bit_flip(tmp_path, case):
    rng = random.Random(f"flip-{case}")
    built = Built(tmp_path, rng)
    seg = rng.choice([-1, -2]) % len(built.bases)
    byte = rng.choice(protected_positions(built, seg))
    bit = rng.randrange(8)

    def flip(data):
        data[byte] ^= 1 << bit
        return data

    rewrite(built.files[seg], flip)
    damaged = next(
        i
        for i in built.batches_in(seg)
        if built.where[i][1] <= byte < built.where[i][1] + len(built.model[i].raw)
    )
    context = f"case={case} segment={seg} byte={byte} bit={bit} batch={damaged}"
    log = built.reopen(rng)
    assert log.load_info.truncated_bytes > 0, context
    check_survivors(log, built, damaged, context)


@pytest.mark.parametrize("case", CASES)
def test_garbage_after_the_last_batch(tmp_path, case):
    rng = random.Random(f"garbage-{case}")
    built = Built(tmp_path, rng)
    garbage = rng.choice([rng.randbytes(rng.randint(1, 300)), bytes(rng.randint(1, 5000))])
    rewrite(built.files[-1], lambda data: data + garbage)
    context = f"case={case} garbage={len(garbage)} bytes"
    log = built.reopen(rng)
    assert log.load_info.truncated_bytes == len(garbage), context
    check_survivors(log, built, len(built.model), context)


@pytest.mark.parametrize("at", ["start", "middle"])
def test_cut_between_batches_of_an_older_segment_drops_the_later_segments(tmp_path, at):
    """An older segment that lost its tail at a batch boundary (unsynced pages are lost
    whole; roll() does not fsync the segment it closes) must not be followed by the newer
    segments: that would leave a hole of missing offsets in the middle of the log, which a
    follower would never fetch again."""
    rng = random.Random(f"boundary-{at}")
    built = Built(tmp_path, rng)
    seg = len(built.bases) - 2
    in_seg = built.batches_in(seg)
    assert len(in_seg) >= 2
    keep = 0 if at == "start" else len(in_seg) // 2
    cut = built.where[in_seg[keep]][1]
    os.truncate(built.files[seg], cut)
    log = built.reopen(rng)
    check_survivors(log, built, in_seg[keep], f"cut at byte {cut} of segment {seg}")


@pytest.mark.parametrize("case", range(30))
def test_flip_in_the_fields_outside_the_crc_never_raises(tmp_path, case):
    """baseOffset and partitionLeaderEpoch are not covered by the CRC, so a flipped bit there
    may go unnoticed; reopening must still not raise, must keep every earlier batch, and the
    log must stay appendable. (Kafka's recovery also rejects a batch whose offsets do not
    fit the segment's 32-bit relative offsets.)"""
    rng = random.Random(f"uncovered-{case}")
    built = Built(tmp_path, rng)
    seg = rng.choice([-1, -2]) % len(built.bases)
    index = rng.choice(built.batches_in(seg))
    pos = built.where[index][1]
    byte = pos + rng.choice([*range(0, 8), *range(12, 16)])
    bit = rng.randrange(8)

    def flip(data):
        data[byte] ^= 1 << bit
        return data

    rewrite(built.files[seg], flip)
    context = f"case={case} segment={seg} batch={index} byte={byte - pos} bit={bit}"
    log = built.reopen(rng)
    kept = read_all(log)
    assert kept[:index] == [s.raw for s in built.model[:index]], context
    leo = log.log_end_offset
    new = append(log, producer_batch(1), epoch=max(0, log.leader_epochs.latest_epoch()))
    assert new.base == leo and log.read(leo, 1) == new.raw, context
    log.close()


# --- indexes ---------------------------------------------------------------------------------


def built_and_closed(tmp_path, seed=0):
    rng = random.Random(seed)
    config = log_config(segment_bytes=2048, index_interval_bytes=100)
    log = open_log(tmp_path, config)
    model = fill(log, rng, 60, ts_spread=5000)
    entries = [(len(s.index), len(s.time_index)) for s in log.segments]
    leo = log.log_end_offset
    log.close()
    return rng, config, model, entries, leo


def reopen_clean(tmp_path, config, leo):
    return open_log(tmp_path, config, clean_shutdown=True, recovery_point=leo)


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize(
    "damage",
    ["deleted", "empty", "torn", "garbage"],
)
def test_damaged_index_is_rebuilt(tmp_path, suffix, damage):
    """An empty file is whole entries (none), so it passes a size check; it must still not
    make the segment look as if it held no timestamps or no index entries."""
    rng, config, model, entries, leo = built_and_closed(tmp_path)
    probe = reopen_clean(tmp_path, config, leo)
    paths = segment_files(probe, suffix)
    probe.close()
    for path in paths:
        size = os.path.getsize(path)
        if damage == "deleted":
            os.unlink(path)
        elif damage == "empty":
            open(path, "wb").close()
        elif damage == "torn":
            os.truncate(path, max(size - 3, 1))  # not a whole number of entries
        else:
            with open(path, "wb") as f:  # garbage whose size is not a multiple of 8 or 12
                f.write(rng.randbytes(size + 5 if size % 24 else size + 7))
    log = reopen_clean(tmp_path, config, leo)
    if damage != "empty":
        assert [(len(s.index), len(s.time_index)) for s in log.segments] == entries
    check_reads(log, model, rng, f"{damage} {suffix}")
    check_timestamps(log, model, f"{damage} {suffix}")
    log.close()


def test_offset_index_whose_positions_go_backwards_is_rebuilt(tmp_path):
    """indexes.py promises "Entries are strictly increasing in both fields" and
    OffsetIndex.load returns None for an index that "fails the sanity checks"; an index whose
    first two positions are swapped breaks that promise and must be rebuilt, not trusted
    (trusting it sends a lookup past the batch it wants)."""
    rng, config, model, entries, leo = built_and_closed(tmp_path)
    probe = reopen_clean(tmp_path, config, leo)
    paths = segment_files(probe, ".index")
    probe.close()
    swapped = 0
    for path in paths:
        with open(path, "rb") as f:
            data = bytearray(f.read())
        if len(data) >= 16:
            data[4:8], data[12:16] = data[12:16], data[4:8]
            swapped += 1
        with open(path, "wb") as f:
            f.write(data)
    assert swapped
    log = reopen_clean(tmp_path, config, leo)
    check_reads(log, model, rng, "positions swapped in .index")
    log.close()


def test_timeindex_of_whole_but_wrong_entries_is_not_trusted(tmp_path):
    """A `.timeindex` of the right size whose timestamps are wrong (here 1, 2, 3, ...,
    offsets untouched) must not become the segment's largest timestamp: that value answers
    ListOffsets and drives retention.ms, so trusting it deletes live segments."""
    rng, config, model, entries, leo = built_and_closed(tmp_path)
    probe = reopen_clean(tmp_path, config, leo)
    paths = segment_files(probe, ".timeindex")
    largest = [s.largest_timestamp for s in probe.segments]
    probe.close()
    for path in paths:
        with open(path, "rb") as f:
            data = bytearray(f.read())
        for k in range(len(data) // 12):
            struct.pack_into(">q", data, 12 * k, k + 1)
        with open(path, "wb") as f:
            f.write(data)
    log = reopen_clean(tmp_path, config, leo)
    assert [s.largest_timestamp for s in log.segments] == largest
    check_timestamps(log, model, "wrong .timeindex timestamps")
    log.update_high_watermark(leo)
    assert log.delete_old_segments() == 0  # every record is younger than retention.ms
    log.close()


def test_clean_reopen_scans_nothing(tmp_path):
    rng, config, model, _, leo = built_and_closed(tmp_path)
    log = reopen_clean(tmp_path, config, leo)
    assert log.load_info.recovered_segments == 0
    assert log.load_info.truncated_bytes == 0
    assert log.recovery_point == leo == log.log_end_offset
    assert read_all(log) == [s.raw for s in model]
    log.close()


def test_recovery_point_bounds_the_scan(tmp_path):
    _, config, model, _, leo = built_and_closed(tmp_path)
    probe = reopen_clean(tmp_path, config, leo)
    bases = [s.base_offset for s in probe.segments]
    probe.close()
    for k in range(1, len(bases)):
        # Segments below the one holding the recovery point are trusted; the rest scanned.
        log = open_log(tmp_path, config, recovery_point=bases[k])
        assert log.load_info.recovered_segments == len(bases) - k, f"recovery point {bases[k]}"
        assert read_all(log) == [s.raw for s in model]
        log.close()
    log = open_log(tmp_path, config, recovery_point=leo)
    assert log.load_info.recovered_segments == 1  # the active segment holds offset LEO
    log.close()
