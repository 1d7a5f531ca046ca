"""The producer's record futures (strom.record_future) and buffer.memory (strom.accumulator),
without a cluster: the futures settle once per batch, callbacks run in order (at once when
added late), waits time out, and a full buffer blocks send() up to max.block.ms."""

from __future__ import annotations

import concurrent.futures
import sys
import threading
import time

import pytest

from strom.accumulator import RecordAccumulator
from strom.errors import KafkaTimeoutError, StromError
from strom.record_future import BatchResult, FutureRecordMetadata, RecordMetadata


def futures_of(batch: BatchResult, n: int) -> list[FutureRecordMetadata]:
    return [FutureRecordMetadata(batch, i, "t", 2, 1000 + i, -1, 3) for i in range(n)]


def test_every_record_of_a_batch_settles_with_its_own_offset():
    batch = BatchResult()
    futures = futures_of(batch, 3)
    assert not any(f.done() for f in futures)
    with pytest.raises(concurrent.futures.TimeoutError):
        futures[0].result(timeout=0.01)
    with pytest.raises(KafkaTimeoutError):
        futures[0].get(timeout=0.01)
    batch.succeed(40, -1)
    batch.fail(StromError("NOT_LEADER_OR_FOLLOWER", "late"))  # ignored: settled once
    assert [f.get() for f in futures] == [
        RecordMetadata("t", 2, 40 + i, 1000 + i, -1, 3) for i in range(3)
    ]
    assert all(f.succeeded() and not f.failed() for f in futures)


def test_log_append_time_and_acks_0_answers():
    batch = BatchResult()
    (future,) = futures_of(batch, 1)
    batch.succeed(-1, 777)
    assert future.result() == RecordMetadata("t", 2, -1, 777, -1, 3)


def test_a_future_keeps_the_records_own_timestamp_after_a_log_append_time_answer():
    # What producer-perf-test measures each record's latency from.
    batch = BatchResult()
    (future,) = futures_of(batch, 1)
    assert future.timestamp_ms == 1000
    batch.succeed(5, 777)
    assert future.timestamp_ms == 1000 and future.result().timestamp == 777


def test_callbacks_run_in_order_once_and_at_once_when_added_late():
    batch = BatchResult()
    futures = futures_of(batch, 2)
    seen: list[object] = []
    futures[1].add_done_callback(lambda f: seen.append(("done", f)))
    futures[0].add_callback(lambda md: seen.append(("ok", md.offset)))
    futures[0].add_errback(lambda e: seen.append(("error", e)))
    futures[0].add_done_callback(lambda f: 1 / 0)  # logged, does not stop the rest
    futures[1].add_callback(lambda md: seen.append(("ok", md.offset)))
    batch.succeed(10, -1)
    assert seen == [("done", futures[1]), ("ok", 10), ("ok", 11)]
    futures[0].add_callback(lambda md: seen.append(("late", md.offset)))
    assert seen[-1] == ("late", 10)


def test_callbacks_added_while_the_batch_settles_run_exactly_once():
    """Callbacks are added without a lock: one added as another thread settles the batch
    must run once, by one of the two threads, never be lost or run twice."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch all the time: the race windows open
    try:
        settle_while_adding()
    finally:
        sys.setswitchinterval(switch)


def settle_while_adding() -> None:
    for _ in range(200):
        batch = BatchResult()
        [future] = futures_of(batch, 1)
        ran: list[int] = []
        started = threading.Event()

        def add_many(
            future: FutureRecordMetadata = future,
            ran: list[int] = ran,
            started: threading.Event = started,
        ) -> None:
            started.set()
            for i in range(2000):
                future.add_done_callback(lambda f, i=i: ran.append(i))

        adder = threading.Thread(target=add_many)
        adder.start()
        started.wait()
        batch.succeed(0, -1)
        adder.join()
        assert sorted(ran) == list(range(2000))


def test_a_failed_batch_fails_every_record_and_wakes_waiters():
    batch = BatchResult()
    futures = futures_of(batch, 2)
    error = StromError("MESSAGE_TOO_LARGE", "too big")
    got: list[BaseException | None] = []
    waiter = threading.Thread(target=lambda: got.append(futures[1].exception(timeout=5)))
    waiter.start()
    time.sleep(0.05)
    batch.fail(error)
    waiter.join(5)
    assert got == [error]
    with pytest.raises(StromError, match="MESSAGE_TOO_LARGE"):
        futures[0].get()
    assert futures[0].failed() and not futures[0].cancel()


def test_a_full_buffer_blocks_send_until_a_batch_is_answered():
    accumulator = RecordAccumulator(
        batch_size=200, linger_ms=0, buffer_memory=500, max_block_ms=100
    )
    value = b"x" * 100
    for _ in range(4):  # 4 batches of one record: 4 x (100 + 24) bytes held
        accumulator.append("t", 0, 0, None, value, ())
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="max blocking time"):
        accumulator.append("t", 0, 0, None, value, ())
    assert time.monotonic() - started >= 0.09
    batches, _, _ = accumulator.drain(time.monotonic() + 1, lambda tp: 1)
    released = threading.Timer(0.05, accumulator.release, args=(batches[0],))
    released.start()
    future, *_ = accumulator.append("t", 0, 0, None, value, ())  # waits for the release
    assert not future.done()
    accumulator.release(batches[0])  # twice: counted once
    assert accumulator._held == 4 * 124  # one batch of one record left, one record came


def test_batches_sent_again_go_out_in_their_first_sent_order():
    """Answers of pipelined requests come back in any order; the partition's batches to
    resend must leave in the order they were first sent, before batches never sent."""
    accumulator = RecordAccumulator(batch_size=100, linger_ms=0)
    for i in range(6):  # one record a batch
        accumulator.append("t", 0, 0, None, b"%d" % i * 80, ())
    first, _, _ = accumulator.drain(time.monotonic() + 1, lambda tp: 4)
    assert len(first) == 4
    for order, batch in enumerate(first):
        batch.order = order
    for batch in (first[2], first[0], first[3]):  # answers in this order, all retriable
        accumulator.requeue(batch, 0)
    assert accumulator.waiting_before(first[3]) and not accumulator.waiting_before(first[0])
    again, _, _ = accumulator.drain(time.monotonic() + 1, lambda tp: 5)
    assert [b.order for b in again[:3]] == [0, 2, 3]
    # Each holds one record: its 80-byte value, then the header count (one byte).
    assert [bytes(b.body[-81:-1]) for b in again[3:]] == [b"4" * 80, b"5" * 80]
