"""Records waiting to be sent, batched per partition (Kafka's RecordAccumulator).

`send()` appends from the caller's thread; the sender drains from the I/O loop; one lock
guards both. Per partition, batches leave in order: the open batch fills until it reaches
`batch.size` bytes or has waited `linger.ms`, then closes behind any batches waiting to be
retried. The sender says how many more batches of a partition it may send now (its
in-flight limit); a batch sent again goes back in the order it was first sent.

Records held until their batch is answered count against `buffer.memory`; `send()` blocks
while it is full, up to `max.block.ms`, as Kafka's producer does. Besides bounding memory,
blocking lets the I/O thread run: a caller's loop of sends otherwise keeps the GIL and the
sender gets it only every switch interval.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from strom.errors import KafkaTimeoutError
from strom.record_future import BatchResult, FutureRecordMetadata
from strom_api.records import append_record

TopicPartition = tuple[str, int]
RECORD_OVERHEAD = 24  # bytes a record adds besides key, value and headers (varints, deltas)
BATCH_OVERHEAD = 61


@dataclass(eq=False, slots=True)
class ProducerBatch:
    topic: str
    partition: int
    created: float
    # The records section, each record encoded as it is appended (Kafka's
    # MemoryRecordsBuilder): sending frames it, no per-record work left for the I/O thread.
    body: bytearray = field(default_factory=bytearray)
    count: int = 0
    base_timestamp: int = -1
    max_timestamp: int = -1
    result: BatchResult = field(default_factory=BatchResult)  # every record's future waits on it
    size: int = BATCH_OVERHEAD
    closed: bool = False
    attempts: int = 0
    retry_at: float = 0.0
    # attempts, epoch, sequence, order, fate_unknown and last_error are written by
    # strom/producer_sequencing.py only. The producer epoch and first sequence it carries:
    epoch: int = -1
    sequence: int = -1
    encoded: bytes | None = None
    released: bool = False  # its bytes no longer count against buffer.memory
    order: int = -1  # its place among the partition's batches, from its first drain
    fate_unknown: bool = False  # sent, and no answer came back (written or not: unknown)
    last_error: Exception | None = None  # the retriable error of its last attempt

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    # What strom/producer_sequencing.py reads besides the fields above.
    @property
    def record_count(self) -> int:
        return self.count

    @property
    def created_ms(self) -> float:
        return self.created * 1000


class RecordAccumulator:
    def __init__(
        self,
        batch_size: int,
        linger_ms: int,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: int = 60_000,
    ) -> None:
        self.batch_size = max(batch_size, 1)
        self.linger_s = linger_ms / 1000
        self.buffer_memory = buffer_memory
        self.max_block_s = max_block_ms / 1000
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._held = 0  # bytes of records not answered yet
        self._open: dict[TopicPartition, ProducerBatch] = {}
        self._waiting: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._count = 0  # batches held (open or waiting)
        # No batch held was created before this (expire() skips its scan until then).
        self._oldest_created = float("-inf")
        self.flushing = False

    def append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...],
    ) -> tuple[FutureRecordMetadata, bool, int, bool]:
        """Adds a record; returns its future, whether the sender should look now (a batch
        filled, or a new one started its linger clock), the bytes it adds, and whether the
        partition's last batch is full (the partitioner may switch without leaving a batch
        half filled)."""
        size = RECORD_OVERHEAD + len(key or b"") + len(value or b"")
        if headers:
            size += sum(len(k) + len(v or b"") + 8 for k, v in headers)
        tp = (topic, partition)
        with self._lock:
            if self._held and self._held + size > self.buffer_memory:
                self._wait_for_space(size)
            batch = self._open.get(tp)
            wake = False
            if batch is not None and batch.count and batch.size + size > self.batch_size:
                self._close(batch)
                batch = None
                wake = True
            if batch is None:
                batch = self._open[tp] = ProducerBatch(topic, partition, time.monotonic())
                self._count += 1
                wake = True
            index = batch.count
            if not index:
                batch.base_timestamp = timestamp
            append_record(batch.body, index, timestamp - batch.base_timestamp, key, value, headers)
            batch.count = index + 1
            if timestamp > batch.max_timestamp:
                batch.max_timestamp = timestamp
            batch.size += size
            self._held += size
            if batch.size >= self.batch_size:
                self._close(batch)
                wake = True
        future = FutureRecordMetadata(
            batch.result,
            index,
            topic,
            partition,
            timestamp,
            len(key) if key is not None else -1,
            len(value) if value is not None else -1,
        )
        return future, wake, size, batch.closed

    def _wait_for_space(self, size: int) -> None:
        deadline = time.monotonic() + self.max_block_s
        while self._held and self._held + size > self.buffer_memory:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"Failed to allocate {size} bytes within the configured max blocking time "
                    f"{self.max_block_s * 1000:g} ms (buffer.memory {self.buffer_memory} bytes "
                    f"full of records not answered yet)."
                )
            self._space.wait(remaining)

    def has_room(self, size: int) -> bool:
        """Whether `size` more bytes fit in buffer.memory now (read without the lock: a
        hint for strom.aio, which then either sends at once or from a worker thread)."""
        return self._held + size <= self.buffer_memory

    def release(self, *batches: ProducerBatch) -> None:
        """The batches are answered for good: their bytes leave buffer.memory.

        Only the I/O thread releases, so a batch seen released needs no lock. A request's
        batches are released together: send() holds the lock for every record, and taken
        per batch it kept the I/O thread queued behind the caller's thread (which holds the
        GIL too) 25 times per request (py-spy: waits on this lock were 19% of the I/O
        thread's samples)."""
        todo = [batch for batch in batches if not batch.released]
        if not todo:
            return
        with self._lock:
            for batch in todo:
                batch.released = True
                self._held -= batch.size - BATCH_OVERHEAD
            self._space.notify_all()

    def _close(self, batch: ProducerBatch) -> None:
        batch.closed = True
        del self._open[batch.tp]
        self._waiting.setdefault(batch.tp, deque()).append(batch)

    def drain(
        self,
        now: float,
        room: Callable[[TopicPartition], int],
        only: Callable[[ProducerBatch], bool] | None = None,
        in_flight: Callable[[TopicPartition], bool] = lambda tp: False,
    ) -> tuple[list[ProducerBatch], float | None, dict[TopicPartition, int]]:
        """Per partition, up to `room(tp)` batches in order: waiting ones (each once its
        retry backoff passed), then the open one if full, lingered, or flushing. Returns
        them, when to look again (None: nothing pending) and how many batches each partition
        held before (its queue size, for the partitioner). With `only`, a partition's
        waiting batches leave only while they satisfy it, and no open batch leaves.

        A partition with batches in flight (`in_flight`) sends only when its room takes
        every batch it has ready: the answers it waits for wake the sender, and its ready
        batches then leave together in one request rather than one per answer (a leader's
        cost is per request; see strom/produce_requests.py)."""
        out: list[ProducerBatch] = []
        wake_at: float | None = None
        queued: dict[TopicPartition, int] = {}
        with self._lock:
            for tp in list(self._waiting.keys() | self._open.keys()):
                queue = self._waiting.get(tp)
                open_batch = self._open.get(tp)
                queued[tp] = (len(queue) if queue else 0) + (open_batch is not None)
                free = room(tp)
                if free <= 0:
                    continue
                # Counting one past the room tells whether every ready batch fits.
                ready, due = self._ready(queue, open_batch, now, only, free + 1)
                if due is not None:
                    wake_at = due if wake_at is None else min(wake_at, due)
                if ready == 0 or (ready > free and in_flight(tp)):
                    continue
                take = min(ready, free)
                while take and queue:
                    out.append(queue.popleft())
                    take -= 1
                if take and open_batch is not None:
                    self._close(open_batch)
                    self._waiting[tp].popleft()
                    out.append(open_batch)
            self._count -= len(out)
        return out, wake_at, queued

    def _ready(
        self,
        queue: deque[ProducerBatch] | None,
        open_batch: ProducerBatch | None,
        now: float,
        only: Callable[[ProducerBatch], bool] | None,
        limit: int,
    ) -> tuple[int, float | None]:
        """How many of a partition's batches may leave now, from the head of its queue
        (counted up to `limit`), and when the next one may (a retry's backoff or the open
        batch's linger.ms)."""
        ready = 0
        for batch in queue or ():
            if ready >= limit:
                return ready, None
            if only is not None and not only(batch):
                return ready, None
            if batch.retry_at > now:
                return ready, batch.retry_at
            ready += 1
        if open_batch is None or only is not None:
            return ready, None
        due = open_batch.created + self.linger_s
        if self.flushing or due <= now:
            return ready + 1, None
        return ready, due

    def requeue(self, batch: ProducerBatch, retry_at: float) -> None:
        """A batch to send again, in its first-sent order among the partition's batches to
        resend, ahead of those never sent (answers of pipelined requests come in any order)."""
        batch.retry_at = retry_at
        # On the I/O thread, as expire(): the bound it reads without the lock stays true.
        self._oldest_created = min(self._oldest_created, batch.created)
        with self._lock:
            queue = self._waiting.setdefault(batch.tp, deque())
            at = 0
            while at < len(queue) and 0 <= queue[at].order < batch.order:
                at += 1
            queue.insert(at, batch)
            self._count += 1

    def any_waiting(self, predicate: Callable[[ProducerBatch], bool]) -> bool:
        with self._lock:
            return any(predicate(b) for queue in self._waiting.values() for b in queue)

    def waiting_before(self, batch: ProducerBatch) -> bool:
        """Whether a batch of the same partition first sent before `batch` waits to be sent
        again."""
        with self._lock:
            queue = self._waiting.get(batch.tp, ())
            return any(0 <= b.order < batch.order for b in queue)

    def expire(
        self, now: float, timeout_s: float, busy: set[TopicPartition]
    ) -> list[ProducerBatch]:
        """Batches that waited longer than delivery.timeout.ms (never in flight now).

        The sender asks at every look; without the lock it learns that none can have: no
        batch held was created before `_oldest_created` (the oldest left by the last scan,
        or put back since; batches created since are younger than the scan)."""
        if now - self._oldest_created <= timeout_s:
            return []
        expired = []
        oldest = float("inf")
        with self._lock:
            for tp, queue in self._waiting.items():
                if tp not in busy:
                    while queue and now - queue[0].created > timeout_s:
                        expired.append(queue.popleft())
                for batch in queue:
                    oldest = min(oldest, batch.created)
            for tp, batch in list(self._open.items()):
                if tp not in busy and now - batch.created > timeout_s:
                    del self._open[tp]
                    expired.append(batch)
                else:
                    oldest = min(oldest, batch.created)
            self._count -= len(expired)
            # Batches created from here on are younger than now (append() stamps them under
            # this lock).
            self._oldest_created = min(oldest, time.monotonic())
        return expired

    def take_all(self, busy: set[TopicPartition]) -> list[ProducerBatch]:
        """Every batch waiting or open, except those of partitions in flight (`busy`)."""
        return self.expire(float("inf"), 0.0, busy)

    def pending(self) -> int:
        return self._count  # one read of an int: no lock needed to see a whole value
