"""strom/accumulator.py: records encoded into their batch as they are appended, and the
drain: what leaves per partition, and the queue sizes it reports."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from strom.accumulator import RecordAccumulator
from strom_api import compression
from strom_api.records import Record, decode_batch, encode_batch, framed_batch

_headers = st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2)
_records = st.lists(
    st.tuples(
        st.integers(0, 2**41),
        st.none() | st.binary(max_size=300),
        st.none() | st.binary(max_size=3000),
        _headers,
    ),
    min_size=1,
    max_size=40,
)


@given(_records)
def test_a_batch_encoded_as_records_arrive_is_the_batch_encode_batch_builds(records):
    accumulator = RecordAccumulator(batch_size=1 << 30, linger_ms=0)
    for timestamp, key, value, headers in records:
        accumulator.append("t", 0, timestamp, key, value, tuple(headers))
    [batch], _, _ = accumulator.drain(time.monotonic(), lambda tp: 1)
    framed = framed_batch(
        batch.body,
        batch.count,
        compression_codec=compression.ZSTD,
        base_timestamp=batch.base_timestamp,
        max_timestamp=batch.max_timestamp,
        producer_id=7,
        producer_epoch=1,
        base_sequence=42,
    )
    expected = [Record(i, t, k, v, tuple(h)) for i, (t, k, v, h) in enumerate(records)]
    assert framed == encode_batch(
        expected,
        compression_codec=compression.ZSTD,
        producer_id=7,
        producer_epoch=1,
        base_sequence=42,
    )
    header, decoded = decode_batch(framed)
    assert decoded == expected and header.base_sequence == 42


def filled(batches: int, partition: int = 0, accumulator: RecordAccumulator | None = None):
    """An accumulator whose partition holds `batches` full batches of one 100-byte record."""
    accumulator = accumulator or RecordAccumulator(batch_size=100, linger_ms=1000)
    for _ in range(batches):
        accumulator.append("t", partition, 0, None, b"x" * 100, ())
    return accumulator


def test_a_partition_with_batches_in_flight_waits_until_all_its_ready_batches_fit():
    accumulator = filled(3)
    now = time.monotonic()
    # Two answers short of room for all three: nothing leaves one batch per answer...
    out, _, queued = accumulator.drain(now, lambda tp: 2, in_flight=lambda tp: True)
    assert out == [] and queued == {("t", 0): 3}
    # ...until the room takes every ready batch: they leave together, in one request.
    out, _, _ = accumulator.drain(now, lambda tp: 3, in_flight=lambda tp: True)
    assert len(out) == 3


def test_with_nothing_in_flight_a_partition_sends_what_its_room_allows():
    accumulator = filled(7)
    out, _, _ = accumulator.drain(time.monotonic(), lambda tp: 5)
    assert len(out) == 5
    out, _, queued = accumulator.drain(time.monotonic(), lambda tp: 5)
    assert len(out) == 2 and queued == {("t", 0): 2}


def test_an_open_batch_leaves_after_linger_and_counts_in_the_queue_size():
    accumulator = RecordAccumulator(batch_size=1000, linger_ms=50)
    accumulator.append("t", 1, 0, None, b"x", ())
    now = time.monotonic()
    out, wake_at, queued = accumulator.drain(now, lambda tp: 5)
    assert out == [] and queued == {("t", 1): 1}
    assert wake_at is not None and now < wake_at <= now + 0.05
    out, _, _ = accumulator.drain(now + 0.06, lambda tp: 5)
    assert len(out) == 1


def test_expire_finds_every_batch_past_the_timeout_after_scans_that_found_none():
    # expire() skips its scan while no batch held can be old enough (a bound it keeps
    # without the lock): batches created after an empty scan, and batches put back after
    # a send, are still found once they are.
    accumulator = RecordAccumulator(batch_size=100, linger_ms=1000)
    now = time.monotonic()
    assert accumulator.expire(now, 10.0, set()) == []  # nothing held: the bound is now
    filled(2, accumulator=accumulator)
    assert accumulator.expire(now + 5, 10.0, set()) == []
    assert len(accumulator.expire(time.monotonic() + 11, 10.0, set())) == 2
    filled(1, accumulator=accumulator)
    [sent], _, _ = accumulator.drain(time.monotonic(), lambda tp: 1)
    filled(1, partition=1, accumulator=accumulator)
    assert accumulator.expire(time.monotonic(), 10.0, set()) == []  # the bound: now
    sent.created -= 60  # as if sent long ago, and put back after its answer failed
    accumulator.requeue(sent, 0.0)
    assert accumulator.expire(time.monotonic(), 10.0, set()) == [sent]
    assert accumulator.pending() == 1
