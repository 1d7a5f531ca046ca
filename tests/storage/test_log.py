"""Log: appending as leader and follower, validation errors, rolling, truncation,
DeleteRecords, flushing, and the error family.

Proves that a leader append assigns contiguous offsets and stamps its epoch without breaking
the CRC; a follower append stores the bytes untouched and feeds the leader-epoch cache;
bad input is refused with the Kafka error each case calls for; segments roll on
segment.bytes, on segment.ms (Kafka's rule: the incoming batch's timestamp against the first
batch's), and on a full index; truncation and DeleteRecords keep log start <= high watermark
<= LEO and the epoch cache consistent; flush moves the recovery point.
"""

from __future__ import annotations

import gc
import os
import random

import pytest
from storage_helpers import (
    BASE_TS,
    append,
    fill,
    log_config,
    open_log,
    producer_batch,
    read_all,
    split,
    stamped,
)

from storage import errors
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from strom_api.record_batch import parse_header, validate_batch
from strom_api.records import Record, decode_batch, encode_batch

# --- leader appends --------------------------------------------------------------------------


def test_leader_append_assigns_contiguous_offsets_and_stamps_the_epoch(tmp_path):
    log = open_log(tmp_path)
    first = log.append(producer_batch(3), leader_epoch=4)
    assert (first.first_offset, first.last_offset, first.batches) == (0, 2, 1)
    # Several batches in one append: offsets run on across them.
    two = producer_batch(2) + producer_batch(5)
    info = log.append(two, leader_epoch=6)
    assert (info.first_offset, info.last_offset, info.batches) == (3, 9, 2)
    assert info.bytes == len(two)
    assert log.log_end_offset == 10
    stored = split(log.read(0, 1 << 20))
    assert [parse_header(b).base_offset for b in stored] == [0, 3, 5]
    assert [parse_header(b).partition_leader_epoch for b in stored] == [4, 6, 6]
    for raw in stored:
        validate_batch(raw)  # the CRC still holds after stamping
    assert stored[1] == stamped(producer_batch(2), 3, 6)
    assert [r.offset for _, rs in map(decode_batch, stored) for r in rs] == list(range(10))
    assert log.leader_epochs.entries == [(4, 0), (6, 3)]


def test_follower_append_keeps_offsets_and_bytes(tmp_path):
    log = open_log(tmp_path)
    batches = [
        stamped(producer_batch(2), 0, 1),
        stamped(producer_batch(3), 2, 1),
        stamped(producer_batch(1), 9, 3),  # a gap, as a compacted leader log may have
    ]
    info = log.append_as_follower(b"".join(batches))
    assert (info.first_offset, info.last_offset) == (0, 9)
    assert read_all(log) == batches
    assert log.log_end_offset == 10
    assert log.leader_epochs.entries == [(1, 0), (3, 9)]


def test_follower_append_below_the_log_end_is_refused(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(stamped(producer_batch(3), 0, 1))
    with pytest.raises(InvalidRecordError):
        log.append_as_follower(stamped(producer_batch(1), 2, 1))
    with pytest.raises(InvalidRecordError):  # backwards inside one append
        log.append_as_follower(stamped(producer_batch(2), 5, 1) + stamped(producer_batch(1), 5, 1))
    assert log.log_end_offset == 3


def corruptions():
    good = producer_batch(3)
    flipped = bytearray(good)
    flipped[40] ^= 0x10
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    return {
        "flipped bit": bytes(flipped),
        "bad magic": bytes(bad_magic),
        "truncated": good[:-1],
        "short header": good[:30],
        "trailing bytes": good + b"\x00" * 5,
    }


@pytest.mark.parametrize("name", list(corruptions()))
@pytest.mark.parametrize("as_leader", [True, False])
def test_corrupt_input_raises_corrupt_record(tmp_path, name, as_leader):
    log = open_log(tmp_path)
    data = corruptions()[name]
    with pytest.raises(CorruptRecordError) as caught:
        log.append(data, 0) if as_leader else log.append_as_follower(data)
    assert caught.value.error_name == "CORRUPT_MESSAGE"
    assert log.log_end_offset == 0 and log.size == 0


def test_empty_append_is_invalid(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(InvalidRecordError):
        log.append(b"", 0)


def test_leader_refuses_a_batch_with_missing_offsets(tmp_path):
    # lastOffsetDelta 4 but 2 records: a producer never sends that.
    batch = encode_batch([Record(0, BASE_TS, b"a", b"1"), Record(4, BASE_TS, b"b", b"2")])
    log = open_log(tmp_path)
    with pytest.raises(InvalidRecordError):
        log.append(batch, 0)
    log.append_as_follower(batch)  # a follower copies a compacted leader's batch as it is
    assert log.log_end_offset == 5


def test_batch_above_max_message_bytes(tmp_path):
    batch = producer_batch(1, value_size=500)
    log = open_log(tmp_path, log_config(max_message_bytes=len(batch) - 1))
    with pytest.raises(RecordTooLargeError, match="max.message.bytes") as caught:
        log.append(batch, 0)
    assert caught.value.error_name == "MESSAGE_TOO_LARGE"
    assert log.log_end_offset == 0
    ok = open_log(tmp_path / "ok", log_config(max_message_bytes=len(batch)))
    assert ok.append(batch, 0).last_offset == 0


def test_batch_above_segment_bytes(tmp_path):
    batch = producer_batch(1, value_size=500)
    log = open_log(tmp_path, log_config(segment_bytes=len(batch) - 1))
    with pytest.raises(RecordTooLargeError, match="segment.bytes"):
        log.append(batch, 0)
    with pytest.raises(RecordTooLargeError, match="segment.bytes"):
        log.append_as_follower(stamped(batch, 0, 0))


# --- rolling ---------------------------------------------------------------------------------


def test_roll_on_segment_bytes(tmp_path):
    rng = random.Random(1)
    segment_bytes = 1500
    log = open_log(tmp_path, log_config(segment_bytes=segment_bytes))
    model = fill(log, rng, 60)
    # Replay Kafka's rule: roll when size + incoming > segment.bytes.
    expected_bases, size = [0], 0
    for stored in model:
        if size and size + len(stored.raw) > segment_bytes:
            expected_bases.append(stored.base)
            size = 0
        size += len(stored.raw)
    assert [s.base_offset for s in log.segments] == expected_bases
    assert all(s.size <= segment_bytes for s in log.segments)
    names = sorted(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    assert names == [f"{b:020d}.log" for b in expected_bases]


def test_roll_on_segment_ms_compares_batch_timestamps(tmp_path, clock):
    log = open_log(tmp_path, log_config(segment_ms=1000), clock=clock)
    t0 = BASE_TS - 10**9  # far from the wall clock: only batch timestamps matter
    log.append(producer_batch(1, timestamps=t0), 0)
    log.append(producer_batch(1, timestamps=t0 + 1000), 0)  # waited == segment.ms: no roll
    clock.advance(10**8)
    log.append(producer_batch(1, timestamps=t0 + 500), 0)  # wall clock moved: still no roll
    assert len(log.segments) == 1
    log.append(producer_batch(1, timestamps=t0 + 1001), 0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    # The new segment's clock starts at its own first batch.
    log.append(producer_batch(1, timestamps=t0 + 2001), 0)
    assert len(log.segments) == 2
    log.append(producer_batch(1, timestamps=t0 + 2002), 0)
    assert [s.base_offset for s in log.segments] == [0, 3, 5]


def test_roll_on_segment_ms_uses_the_largest_timestamp_of_the_append(tmp_path, clock):
    """Kafka rolls when max(timestamps of the appended batches) - first batch's timestamp
    exceeds segment.ms, whichever batch of the append holds that maximum."""
    log = open_log(tmp_path, log_config(segment_ms=1000), clock=clock)
    log.append(producer_batch(1, timestamps=BASE_TS), 0)
    late_then_early = producer_batch(1, timestamps=BASE_TS + 5000) + producer_batch(
        1, timestamps=BASE_TS
    )
    log.append(late_then_early, 0)
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_roll_on_segment_ms_without_timestamps_uses_the_clock(tmp_path, clock):
    log = open_log(tmp_path, log_config(segment_ms=1000), clock=clock)
    log.append(producer_batch(1, timestamps=-1), 0)
    clock.advance(1000)
    log.append(producer_batch(1, timestamps=-1), 0)
    assert len(log.segments) == 1
    clock.advance(1)
    log.append(producer_batch(1, timestamps=-1), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_on_a_full_index(tmp_path):
    # segment.index.bytes=16: 2 offset-index entries of 8 bytes, 1 time-index entry of 12
    # (Kafka sizes both files by it). An entry goes in for every batch after the first of a
    # segment, so the time index fills after the second batch and the segment rolls.
    log = open_log(tmp_path, log_config(segment_index_bytes=16, index_interval_bytes=0))
    for _ in range(12):
        log.append(producer_batch(1), 0)
    assert all(len(s.index) <= 2 and len(s.time_index) <= 1 for s in log.segments[:-1])
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6, 8, 10]
    assert read_all(log) == [stamped(producer_batch(1), o, 0) for o in range(12)]


def test_roll_does_nothing_on_an_empty_active_segment(tmp_path):
    log = open_log(tmp_path)
    assert log.roll() is log.active_segment
    log.append(producer_batch(2), 0)
    log.roll()
    assert log.roll() is log.active_segment
    assert [s.base_offset for s in log.segments] == [0, 2]


# --- truncation ------------------------------------------------------------------------------


def epochs_log(tmp_path):
    """Six segments of three batches; epoch 1 from offset 0, 2 from 9, 3 from 21."""
    log = open_log(tmp_path, log_config(segment_bytes=3 * len(producer_batch(2))))
    model = []
    for i in range(18):
        model.append(append(log, producer_batch(2), epoch=1 if i < 3 else 2 if i < 10 else 3))
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18, 24, 30]
    assert log.leader_epochs.entries == [(1, 0), (2, 6), (3, 20)]
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    return log, model


def test_truncate_inside_a_segment(tmp_path):
    log, model = epochs_log(tmp_path)
    log.truncate_to(21)  # inside the batch [20, 21]: the whole batch goes
    assert log.log_end_offset == 20
    assert read_all(log) == [s.raw for s in model[:10]]
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18]
    assert not os.path.exists(tmp_path / f"{24:020d}.log")
    assert log.leader_epochs.entries == [(1, 0), (2, 6)]
    assert log.high_watermark == log.recovery_point == 20
    nxt = append(log, producer_batch(1), epoch=4)
    assert nxt.base == 20 and log.read(20, 1) == nxt.raw


def test_truncate_at_a_segment_boundary(tmp_path):
    log, model = epochs_log(tmp_path)
    log.truncate_to(18)
    assert log.log_end_offset == 18
    assert read_all(log) == [s.raw for s in model[:9]]
    assert log.active_segment.base_offset == 18 and log.active_segment.size == 0
    assert log.leader_epochs.entries == [(1, 0), (2, 6)]
    append(log, producer_batch(1), epoch=2)
    assert log.log_end_offset == 19


def test_truncate_below_the_first_segment(tmp_path):
    log, model = epochs_log(tmp_path)
    log.update_high_watermark(30)
    log.delete_records_before(12)
    assert log.log_start_offset == 12 and log.segments[0].base_offset == 12
    log.truncate_to(5)
    assert (log.log_start_offset, log.log_end_offset) == (5, 5)
    assert [s.base_offset for s in log.segments] == [5]
    assert log.leader_epochs.entries == []
    assert log.high_watermark == 5
    assert append(log, producer_batch(1), epoch=7).base == 5


def test_truncate_fully_and_start_at_keeps_the_offset_invariants(tmp_path):
    """log start <= high watermark <= LEO (storage/log.py docstring); Kafka's
    truncateFullyAndStartAt sets the high watermark to the new offset."""
    log, model = epochs_log(tmp_path)
    log.update_high_watermark(10)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert log.leader_epochs.entries == []
    assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
    assert [n for n in os.listdir(tmp_path) if n.endswith(".log")] == [f"{1000:020d}.log"]


def test_truncate_at_or_past_the_end_does_nothing(tmp_path):
    log, model = epochs_log(tmp_path)
    log.truncate_to(log.log_end_offset)
    log.truncate_to(log.log_end_offset + 100)
    assert read_all(log) == [s.raw for s in model]


# --- DeleteRecords ---------------------------------------------------------------------------


def test_delete_records_beyond_the_high_watermark(tmp_path):
    log, _ = epochs_log(tmp_path)
    log.update_high_watermark(20)
    with pytest.raises(OffsetOutOfRangeError) as caught:
        log.delete_records_before(21)
    assert caught.value.error_name == "OFFSET_OUT_OF_RANGE"
    assert log.log_start_offset == 0


def test_delete_records_moves_log_start_and_deletes_whole_segments(tmp_path):
    log, model = epochs_log(tmp_path)
    log.update_high_watermark(20)
    assert log.delete_records_before(13) == 13
    # Segment [0, 6) and [6, 12) lie wholly below 13; [12, 18) holds 13 and stays.
    assert [s.base_offset for s in log.segments] == [12, 18, 24, 30]
    assert not os.path.exists(tmp_path / f"{0:020d}.log")
    assert log.read(13, 1) == model[6].raw  # the batch [12, 13]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(12, 1)
    assert log.leader_epochs.entries == [(2, 13), (3, 20)]
    assert log.delete_records_before(5) == 13  # never moves backwards
    assert log.delete_records_before(20) == 20
    assert [s.base_offset for s in log.segments] == [18, 24, 30]


def test_log_start_survives_reopen_through_the_caller(tmp_path):
    log, model = epochs_log(tmp_path)
    log.update_high_watermark(20)
    log.delete_records_before(13)
    log.close()
    log = open_log(
        tmp_path,
        log.config,
        log_start_offset=13,
        clean_shutdown=True,
        recovery_point=36,
        high_watermark=20,
    )
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (13, 20, 36)
    assert read_all(log) == [s.raw for s in model[6:]]


def test_a_crash_before_the_log_start_checkpoint_keeps_deleted_records_deleted(tmp_path):
    """DeleteRecords persists the truncated epoch cache at once; the caller's log start
    checkpoint comes later. Reopened with the older checkpoint, the log starts where the
    cache says."""
    log, model = epochs_log(tmp_path)
    log.update_high_watermark(20)
    log.delete_records_before(13)
    log.close()
    log = open_log(tmp_path, log.config, log_start_offset=0, high_watermark=20)
    assert log.log_start_offset == 13
    assert log.leader_epochs.entries == [(2, 13), (3, 20)]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(12, 1)


# --- flushing --------------------------------------------------------------------------------


def test_flush_moves_the_recovery_point(tmp_path):
    log = open_log(tmp_path, log_config(segment_bytes=1500))
    fill(log, random.Random(3), 20)
    assert log.recovery_point == 0 and log.unflushed_messages > 0
    log.flush(7)
    assert log.recovery_point == 7
    log.flush(3)
    assert log.recovery_point == 7  # never backwards
    log.flush()
    assert log.recovery_point == log.log_end_offset and log.unflushed_messages == 0
    log.flush(log.log_end_offset + 50)
    assert log.recovery_point == log.log_end_offset


def test_flush_ms_flushes_once_unflushed_data_has_waited_that_long(tmp_path, clock):
    log = open_log(tmp_path, log_config(flush_ms=1000), clock=clock)
    assert not log.flush_if_due()  # nothing unflushed: nothing to do
    log.append(producer_batch(2), 0)
    clock.advance(999)
    assert not log.flush_if_due() and log.recovery_point == 0
    clock.advance(1)
    assert log.flush_if_due() and log.recovery_point == log.log_end_offset == 2
    assert not log.flush_if_due()


def test_one_append_of_more_batches_than_one_pwritev_takes(tmp_path):
    # Each leader batch is written as two pieces (new prefix + body); 700 batches are 1,400
    # pieces, past Linux's IOV_MAX of 1,024, so the write needs more than one pwritev.
    log = open_log(tmp_path, log_config(segment_bytes=1 << 24))
    batches = [producer_batch([bytes([i % 251]) * (i % 13)]) for i in range(700)]
    info = log.append(b"".join(batches), 0)
    assert (info.first_offset, info.last_offset, info.batches) == (0, 699, 700)
    assert read_all(log) == [stamped(b, o, 0) for o, b in enumerate(batches)]


def test_flush_messages_one_flushes_every_append(tmp_path):
    log = open_log(tmp_path, log_config(flush_messages=1))
    for n in (1, 3, 2):
        log.append(producer_batch(n), 0)
        assert log.recovery_point == log.log_end_offset


def test_flush_messages_counts_records(tmp_path):
    log = open_log(tmp_path, log_config(flush_messages=5))
    log.append(producer_batch(3), 0)
    assert log.recovery_point == 0
    log.append(producer_batch(2), 0)
    assert log.recovery_point == 5


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, name",
    [
        (errors.CorruptRecordError, "CORRUPT_MESSAGE"),
        (errors.InvalidRecordError, "INVALID_RECORD"),
        (errors.OffsetOutOfRangeError, "OFFSET_OUT_OF_RANGE"),
        (errors.RecordTooLargeError, "MESSAGE_TOO_LARGE"),
        (errors.InvalidConfigError, "INVALID_CONFIG"),
        (errors.LogDirError, "KAFKA_STORAGE_ERROR"),
        (errors.StorageError, "KAFKA_STORAGE_ERROR"),
    ],
)
def test_errors_carry_kafka_names(cls, name):
    assert issubclass(cls, StorageError)
    assert cls.error_name == name
    assert cls("x").error_name == name


def dir_fsyncs(monkeypatch) -> list[str]:
    """The directories fsynced from now on (storage.log's fsync_dir)."""
    import storage.log as log_module

    synced: list[str] = []
    real = log_module.fsync_dir

    def counting(path: str) -> None:
        synced.append(os.path.abspath(path))
        real(path)

    monkeypatch.setattr(log_module, "fsync_dir", counting)
    return synced


def test_opening_a_log_with_nothing_to_repair_fsyncs_no_directory(tmp_path, monkeypatch):
    log = open_log(tmp_path / "p")
    fill(log, random.Random(3), 5)
    log.flush()
    log.close()
    synced = dir_fsyncs(monkeypatch)
    open_log(tmp_path / "p", clean_shutdown=True).close()
    assert synced == []
    # A crash's leftover is removed, and that removal made durable.
    (tmp_path / "p" / "00000000000000000000.log.deleted").write_bytes(b"")
    open_log(tmp_path / "p", clean_shutdown=True).close()
    assert synced == [str(tmp_path / "p")]


def test_a_new_logs_directory_is_fsynced_by_its_first_flush(tmp_path, monkeypatch):
    synced = dir_fsyncs(monkeypatch)
    log = open_log(tmp_path / "new")
    assert synced == []  # creating it costs no fsync
    log.flush()
    assert synced == [str(tmp_path / "new")]  # the segment's name is durable from here on
    log.flush()
    assert synced == [str(tmp_path / "new")]


# --- file descriptors ------------------------------------------------------------------------


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_log_dropped_without_close_gives_its_descriptors_back(tmp_path):
    """A Log abandoned without close() (after an error, or by a test) once kept one
    descriptor per segment for the life of the process: a pytest worker that had run the
    storage and broker suites held over 1,000 and py4j's select() then refused them."""
    batch = producer_batch(1, value_size=100)
    before = open_descriptors()
    for i in range(5):
        log = open_log(tmp_path / f"t-{i}", log_config(segment_bytes=len(batch)))
        for _ in range(4):
            append(log, batch)  # a segment each
        assert len(log.segments) == 4
    del log
    gc.collect()
    assert open_descriptors() <= before


def test_a_closed_log_does_not_close_a_descriptor_twice(tmp_path):
    """The collector's close never hits a descriptor number that close() gave back and
    something else reuses since."""
    log = open_log(tmp_path / "t-0")
    append(log, producer_batch(1))
    log.close()
    reused = os.open(os.devnull, os.O_RDONLY)  # likely the same number the segment had
    try:
        del log
        gc.collect()
        os.fstat(reused)  # still open
    finally:
        os.close(reused)
