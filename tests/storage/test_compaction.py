"""Compaction: what remains is exactly what Kafka's rules keep.

A brute-force model decides, for a compacted log (cleanup.policy=compact), which records the
cleaner keeps. Within the cleanable range (the leading closed segments whose next segment
starts at or below the high watermark and whose newest record is older than
min.compaction.lag.ms) only the last record of each key stays, at its original offset with
its original timestamp, value and headers; keyless records go; a tombstone that is the latest
for its key stays while its segment's newest timestamp is within delete.retention.ms of now.
Everything outside the range, and every batch that keeps all its records, is byte-identical;
a thinned batch keeps its base/last offset, leader epoch and producer fields. Reads and time
lookups work at every offset afterwards, after a clean reopen and after a crash reopen. A crash
at each step of the segment swap is finished or undone on reopen without losing a record.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest
from storage_helpers import (
    BASE_TS,
    Stored,
    check_reads,
    check_timestamps,
    crash,
    log_config,
    open_log,
    read_all,
    stamped,
)

from storage.cleaner import clean
from strom_api.record_batch import parse_header
from strom_api.records import Record, decode_batch, encode_batch

KEYS = [b"k%d" % i for i in range(6)]


def random_records(rng: random.Random, n: int, ts: int) -> list[Record]:
    out = []
    for i in range(n):
        key = None if rng.random() < 0.1 else rng.choice(KEYS)
        value = None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 60))
        headers = (("h", rng.randbytes(3)),) if rng.random() < 0.3 else ()
        out.append(Record(i, ts + rng.randint(0, 50), key, value, headers))
    return out


def build(path, rng, clock, **config):
    """A compacted log of closed segments (explicit rolls) plus an active one."""
    log = open_log(path, log_config(cleanup_policy="compact", **config), clock=clock)
    model: list[Stored] = []
    ts = BASE_TS
    for segment in range(rng.randint(3, 7)):
        if segment:
            log.roll()
        for _ in range(rng.randint(1, 4)):
            records = random_records(rng, rng.randint(1, 5), ts)
            ts += 100
            batch = encode_batch(
                records,
                compression_codec=rng.choice([0, 0, 1, 2, 3, 4]),
                producer_id=rng.choice([-1, 77]),
                producer_epoch=rng.choice([-1, 3]),
                base_sequence=rng.choice([-1, 5]),
            )
            epoch = segment // 2
            info = log.append(batch, epoch)
            raw = stamped(batch, info.first_offset, epoch)
            model.append(
                Stored(info.first_offset, info.last_offset, raw, tuple(decode_batch(raw)[1]))
            )
    return log, model


def expected_after_clean(log, model, now, *, lag_ms, delete_retention_ms):
    """The model: which records and which original batches remain."""
    bases = [s.base_offset for s in log.segments]
    seg_of = {s.base: max(i for i, b in enumerate(bases) if b <= s.base) for s in model}
    largest = {}
    for stored in model:
        i = seg_of[stored.base]
        largest[i] = max(largest.get(i, -1), max(r.timestamp for r in stored.records))
    cleanable = set()
    for i in range(len(bases) - 1):
        if bases[i + 1] > log.high_watermark:
            break
        if lag_ms > 0 and largest.get(i, -1) > now - lag_ms:
            break
        cleanable.add(i)
    latest = {}
    for stored in model:
        if seg_of[stored.base] in cleanable:
            for r in stored.records:
                if r.key is not None:
                    latest[r.key] = r.offset
    kept_records, kept_batches = [], []
    for stored in model:
        i = seg_of[stored.base]
        if i not in cleanable:
            kept = list(stored.records)
        else:
            expired = largest[i] < now - delete_retention_ms
            kept = [
                r
                for r in stored.records
                if r.key is not None
                and latest[r.key] == r.offset
                and not (r.value is None and expired)
            ]
        kept_records += kept
        if kept:
            kept_batches.append((stored, len(kept) == len(stored.records)))
    return kept_records, kept_batches, cleanable


def records_of(batches: list[bytes]) -> list[Record]:
    return [r for raw in batches for r in decode_batch(raw)[1]]


def check_cleaned(log, model, kept_records, kept_batches, rng, context):
    everything = after = read_all(log)
    assert records_of(after) == kept_records, context
    originals = {(s.base, s.last) for s in model}
    for raw in after:  # a batch emptied by cleaning may stay as a header (Kafka keeps some)
        header = parse_header(raw)
        assert (header.base_offset, header.last_offset) in originals, context
    after = [raw for raw in after if parse_header(raw).record_count]
    assert len(after) == len(kept_batches), context
    for raw, (stored, whole) in zip(after, kept_batches, strict=True):
        if whole:
            assert raw == stored.raw, f"{context}: a batch keeping every record was rewritten"
        header, original = parse_header(raw), parse_header(stored.raw)
        assert (header.base_offset, header.last_offset) == (
            original.base_offset,
            original.last_offset,
        ), context
        assert header.partition_leader_epoch == original.partition_leader_epoch, context
        assert (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.compression,
        ) == (
            original.producer_id,
            original.producer_epoch,
            original.base_sequence,
            original.compression,
        ), context
    remaining = [
        Stored(
            parse_header(raw).base_offset,
            parse_header(raw).last_offset,
            raw,
            tuple(decode_batch(raw)[1]),
        )
        for raw in everything
    ]
    check_reads(log, remaining, rng, context)
    if kept_records:
        check_timestamps(log, remaining, context)


@pytest.mark.parametrize("seed", range(25))
def test_compaction_keeps_what_kafka_keeps(tmp_path, clock, seed):
    rng = random.Random(seed)
    lag_ms = rng.choice([0, 0, 200, 100_000])
    delete_retention_ms = rng.choice([0, 300, 10_000])
    log, model = build(
        tmp_path, rng, clock, min_compaction_lag_ms=lag_ms, delete_retention_ms=delete_retention_ms
    )
    leo = log.log_end_offset
    bases = [s.base_offset for s in log.segments]
    log.update_high_watermark(rng.choice([leo, rng.choice(bases), rng.randrange(leo + 1)]))
    clock.advance(rng.choice([0, 500, 2000, 20_000]))
    now = clock.time_ms()
    active_path = tmp_path / f"{log.active_segment.base_offset:020d}.log"
    active_before = active_path.read_bytes()
    kept_records, kept_batches, cleanable = expected_after_clean(
        log, model, now, lag_ms=lag_ms, delete_retention_ms=delete_retention_ms
    )
    context = f"seed={seed} lag={lag_ms} dr={delete_retention_ms} cleanable={sorted(cleanable)}"

    result = clean(log)
    assert result.segments_before == len(cleanable), context
    assert result.records_removed == sum(len(s.records) for s in model) - len(kept_records)
    assert log.log_end_offset == leo and log.log_start_offset == 0, context
    assert active_path.read_bytes() == active_before, f"{context}: active segment touched"
    check_cleaned(log, model, kept_records, kept_batches, rng, context)

    # Cleaning again at the same instant changes nothing.
    again = clean(log)
    assert again.records_removed == 0, context
    assert records_of(read_all(log)) == kept_records, context

    # The result is what a reopen finds, clean or after a crash.
    log.close()
    log = open_log(tmp_path, log.config, clock=clock, clean_shutdown=True, recovery_point=leo)
    check_cleaned(log, model, kept_records, kept_batches, rng, context + " clean reopen")
    crash(log)
    log = open_log(tmp_path, log.config, clock=clock, recovery_point=0)
    assert log.load_info.truncated_bytes == 0 and log.load_info.deleted_segments == 0, context
    check_cleaned(log, model, kept_records, kept_batches, rng, context + " crash reopen")
    log.close()


def tombstone_log(tmp_path, clock, delete_retention_ms):
    log = open_log(
        tmp_path,
        log_config(cleanup_policy="compact", delete_retention_ms=delete_retention_ms),
        clock=clock,
    )
    log.append(encode_batch([Record(0, BASE_TS, b"a", b"1"), Record(1, BASE_TS, b"b", b"2")]), 0)
    log.append(encode_batch([Record(0, BASE_TS + 10, b"a", None)]), 0)  # tombstone for a
    log.roll()
    log.append(encode_batch([Record(0, BASE_TS + 20, b"c", b"3")]), 0)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_tombstone_kept_within_delete_retention_then_removed(tmp_path, clock):
    log = tombstone_log(tmp_path, clock, delete_retention_ms=1000)
    clock.now_ms = BASE_TS + 10 + 1000  # newest record of the segment is exactly 1000 ms old
    clean(log)
    assert [(r.offset, r.key, r.value) for r in records_of(read_all(log))] == [
        (1, b"b", b"2"),
        (2, b"a", None),
        (3, b"c", b"3"),
    ]
    clock.advance(1)
    clean(log)
    assert [(r.offset, r.key, r.value) for r in records_of(read_all(log))] == [
        (1, b"b", b"2"),
        (3, b"c", b"3"),
    ]
    assert log.read(0, 1) == log.read(1, 1)  # offset 0 is gone: a read lands on the next


def test_active_segment_and_records_past_the_high_watermark_are_never_cleaned(tmp_path, clock):
    log = tombstone_log(tmp_path, clock, delete_retention_ms=0)
    log.update_high_watermark(2)  # the closed segment [0, 3) reaches past the high watermark
    clock.advance(10_000)
    before = read_all(log)
    assert clean(log).records_removed == 0
    assert read_all(log) == before


def test_compaction_needs_the_compact_policy(tmp_path, clock):
    log = open_log(tmp_path, log_config(cleanup_policy="delete"), clock=clock)
    log.append(encode_batch([Record(0, BASE_TS, b"a", b"1")]), 0)
    log.append(encode_batch([Record(0, BASE_TS, b"a", b"2")]), 0)
    log.roll()
    log.append(encode_batch([Record(0, BASE_TS, b"a", b"3")]), 0)
    log.update_high_watermark(3)
    before = read_all(log)
    assert clean(log).records_removed == 0
    assert read_all(log) == before


# --- a crash in the middle of the swap -----------------------------------------------------


def prepared(tmp_path, clock, keyless_tail=False):
    """Two copies of one compacted log: `before` untouched, `after` cleaned. Returns both
    directories, the cleaned segment's base, and the base offsets it replaced. With
    `keyless_tail`, the last closed segment holds only keyless records (all cleaned away)."""
    rng = random.Random(99)
    before_dir, after_dir = tmp_path / "before", tmp_path / "after"
    log, _ = build(before_dir, rng, clock, segment_bytes=1 << 20)
    if keyless_tail:
        log.roll()
        log.append(
            encode_batch([Record(0, BASE_TS, None, b"no key"), Record(1, BASE_TS, None, b"none")]),
            0,
        )
        log.roll()
        log.append(encode_batch([Record(0, BASE_TS, b"k0", b"active")]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.close()
    shutil.copytree(before_dir, after_dir)
    config = log.config
    leo = log.log_end_offset
    log = open_log(
        after_dir, config, clock=clock, clean_shutdown=True, recovery_point=leo, high_watermark=leo
    )
    old_bases = [s.base_offset for s in log.segments[:-1]]
    result = clean(log)
    assert result.segments_before == len(old_bases) and result.segments_after == 1
    assert result.records_removed > 0
    log.close()
    return before_dir, after_dir, old_bases[0], old_bases, config


def contents(directory, config, clock):
    log = open_log(directory, config, clock=clock, recovery_point=0)
    out = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records_of(read_all(log))]
    leo = log.log_end_offset
    log.close()
    return out, leo


STEPS = [
    "cleaned files written",
    "timeindex renamed to swap",
    "index renamed to swap",
    "all renamed to swap",
    "first old segment deleted",
    "all old segments deleted",
    "log renamed to final name",
]


@pytest.mark.parametrize("keyless_tail", [False, True], ids=["", "emptied-last-segment"])
@pytest.mark.parametrize("step", range(len(STEPS)), ids=STEPS)
def test_crash_during_the_swap_is_finished_or_undone(tmp_path, clock, step, keyless_tail):
    """Replays Log.replace_segments file by file up to `step` and reopens. With
    `keyless_tail` the cleaned segment ends before the last segment it replaces begins."""
    before_dir, after_dir, base, old_bases, config = prepared(tmp_path, clock, keyless_tail)
    crashed = tmp_path / "crashed"
    shutil.copytree(before_dir, crashed)
    name = f"{base:020d}"
    new = {s: (after_dir / f"{name}{s}").read_bytes() for s in (".log", ".index", ".timeindex")}
    names = {s: f"{name}{s}.cleaned" for s in new}
    for suffix, data in new.items():
        (crashed / names[suffix]).write_bytes(data)
    for s in [".timeindex", ".index", ".log"][: min(step, 3)]:
        os.replace(crashed / names[s], crashed / f"{name}{s}.swap")
        names[s] = f"{name}{s}.swap"
    if step >= 4:
        for old in old_bases[: 1 if step == 4 else len(old_bases)]:
            for s in new:
                path = crashed / f"{old:020d}{s}"
                if path.exists():
                    path.unlink()
    if step >= 6:
        os.replace(crashed / names[".log"], crashed / f"{name}.log")

    undone, finished = contents(before_dir, config, clock), contents(after_dir, config, clock)
    assert undone != finished
    got = contents(crashed, config, clock)
    assert got == (finished if step >= 3 else undone), STEPS[step]
    assert not [n for n in os.listdir(crashed) if n.endswith((".cleaned", ".swap"))]
    assert contents(crashed, config, clock) == got  # a second open is stable


def test_compacted_segments_survive_a_crash_reopen_after_the_policy_becomes_delete(tmp_path, clock):
    """When a cleaned group's last records all go (here: keyless), the cleaner keeps their
    batch empty so the segment still ends at the next segment's base. If the topic later
    switches cleanup.policy to delete, a crash reopen that scans those segments (recovery
    point 0) finds no hole in the offsets and deletes nothing."""
    config = log_config(cleanup_policy="compact")
    log = open_log(tmp_path, config, clock=clock)
    log.append(encode_batch([Record(0, BASE_TS, b"a", b"1")]), 0)
    log.roll()
    log.append(encode_batch([Record(0, BASE_TS, b"b", b"2")]), 0)
    log.append(encode_batch([Record(0, BASE_TS, None, b"keyless")]), 0)
    log.roll()
    log.append(encode_batch([Record(0, BASE_TS, b"c", b"3")]), 0)
    log.update_high_watermark(log.log_end_offset)
    assert clean(log).records_removed == 1
    assert log.segments[0].next_offset == 3 == log.segments[1].base_offset
    kept = read_all(log)
    crash(log)
    log = open_log(tmp_path, log_config(cleanup_policy="delete"), clock=clock, recovery_point=0)
    assert read_all(log) == kept
    assert log.log_end_offset == 4
