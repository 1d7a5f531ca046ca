"""The futures `Producer.send` returns, shaped as Kafka's producer has them: one result per
batch (Kafka's ProduceRequestResult) that the I/O thread settles once, and per record a small
FutureRecordMetadata pointing at it with the record's index.

A concurrent.futures.Future per record cost more than encoding the record (a Condition and a
lock each, then a set_result under them): a third of the producer's time on small records.
Here a record's future is a few slots; a waiter creates the batch's Event only when it has to
block; callbacks are kept per batch, added without a lock, and run on the I/O thread when
it settles, in the order they were added. The API is concurrent.futures' (result,
exception, done, add_done_callback) plus kafka-python's (get, add_callback, add_errback,
succeeded, failed); like kafka-python's futures these are not concurrent.futures.Future
objects (concurrent.futures.wait does not take them).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from strom.errors import KafkaTimeoutError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record was written (kafka-python's RecordMetadata, its main fields)."""

    topic: str
    partition: int
    offset: int  # -1 with acks=0
    timestamp: int  # the broker's append time on a LogAppendTime topic, else the record's
    serialized_key_size: int = -1
    serialized_value_size: int = -1


class BatchResult:
    """The outcome of one batch, settled once (later settlements are ignored).

    Callbacks wait in a deque, added without a lock (one add per record sent with a
    callback, on the caller's thread): deque.append and popleft are atomic, and each
    callback runs in whichever thread pops it, so exactly once. The settling thread sets
    `done` and then pops every callback; one added after `done` was set is popped by its
    adder (or by the settler, if it is still popping), never lost: an add checks `done`
    after appending."""

    __slots__ = ("_lock", "_event", "_callbacks", "done", "base_offset", "append_time", "error")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # settling against a waiter creating the Event
        self._event: threading.Event | None = None
        self._callbacks: deque[tuple[Callable[[Any], Any], FutureRecordMetadata]] = deque()
        self.done = False
        self.base_offset = -1
        self.append_time = -1
        self.error: BaseException | None = None

    def succeed(self, base_offset: int, append_time: int) -> None:
        self._settle(base_offset, append_time, None)

    def fail(self, error: BaseException) -> None:
        self._settle(-1, -1, error)

    def _settle(self, base_offset: int, append_time: int, error: BaseException | None) -> None:
        with self._lock:
            if self.done:
                return
            self.base_offset, self.append_time, self.error = base_offset, append_time, error
            self.done = True
            event = self._event
        if event is not None:
            event.set()
        self._run_callbacks()

    def _run_callbacks(self) -> None:
        callbacks = self._callbacks
        while True:
            try:
                fn, future = callbacks.popleft()
            except IndexError:
                return
            _call(fn, future)

    def wait(self, timeout: float | None) -> bool:
        if self.done:
            return True
        with self._lock:
            if self.done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def add_callback(self, fn: Callable[[Any], Any], future: FutureRecordMetadata) -> bool:
        """Keeps `fn` for when the batch settles; False when it already had (the caller
        runs it)."""
        if self.done:
            return False
        self._callbacks.append((fn, future))
        if self.done:
            # Settled between the check and the append: the settler may have emptied the
            # deque before this append. What is left runs here.
            self._run_callbacks()
        return True


def _call(fn: Callable[[Any], Any], future: FutureRecordMetadata) -> None:
    try:
        fn(future)
    except Exception:  # as concurrent.futures: a failing callback must not stop the others
        log.exception("exception calling callback for %r", future)


class FutureRecordMetadata:
    """A future of one record's RecordMetadata."""

    __slots__ = ("_batch", "_index", "topic", "partition", "_timestamp", "_key_size", "_value_size")

    def __init__(
        self,
        batch: BatchResult,
        index: int,
        topic: str,
        partition: int,
        timestamp: int,
        key_size: int,
        value_size: int,
    ) -> None:
        self._batch = batch
        self._index = index
        self.topic = topic
        self.partition = partition
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    @property
    def timestamp_ms(self) -> int:
        """The record's own timestamp, as sent (its CreateTime); RecordMetadata.timestamp
        is the broker's append time instead on a LogAppendTime topic."""
        return self._timestamp

    # --- concurrent.futures' shape ---------------------------------------------------------

    def done(self) -> bool:
        return self._batch.done

    def running(self) -> bool:
        return not self._batch.done

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        """A record handed to the producer cannot be taken back (as in Kafka)."""
        return False

    def result(self, timeout: float | None = None) -> RecordMetadata:
        if not self._batch.wait(timeout):
            raise concurrent.futures.TimeoutError()
        batch = self._batch
        if batch.error is not None:
            raise batch.error
        return RecordMetadata(
            self.topic,
            self.partition,
            batch.base_offset + self._index if batch.base_offset >= 0 else -1,
            batch.append_time if batch.append_time >= 0 else self._timestamp,
            self._key_size,
            self._value_size,
        )

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._batch.wait(timeout):
            raise concurrent.futures.TimeoutError()
        return self._batch.error

    def add_done_callback(self, fn: Callable[[FutureRecordMetadata], Any]) -> None:
        """`fn(future)` once the record is answered: on the I/O thread, or at once in this
        thread when it already is."""
        if not self._batch.add_callback(fn, self):
            _call(fn, self)

    # --- kafka-python's shape ----------------------------------------------------------------

    def get(self, timeout: float | None = None) -> RecordMetadata:
        try:
            return self.result(timeout)
        except concurrent.futures.TimeoutError:
            raise KafkaTimeoutError(f"no answer for the record within {timeout} s") from None

    def add_callback(self, fn: Callable[..., Any], *args: Any) -> FutureRecordMetadata:
        def call(future: FutureRecordMetadata) -> None:
            if future.exception() is None:
                fn(*args, future.result())

        self.add_done_callback(call)
        return self

    def add_errback(self, fn: Callable[..., Any], *args: Any) -> FutureRecordMetadata:
        def call(future: FutureRecordMetadata) -> None:
            error = future.exception()
            if error is not None:
                fn(*args, error)

        self.add_done_callback(call)
        return self

    def succeeded(self) -> bool:
        return self.done() and self._batch.error is None

    def failed(self) -> bool:
        return self.done() and self._batch.error is not None

    def __repr__(self) -> str:
        state = "pending" if not self.done() else ("failed" if self.failed() else "done")
        return f"<FutureRecordMetadata {self.topic}-{self.partition} #{self._index} {state}>"
