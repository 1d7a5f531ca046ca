"""The producer's I/O side (Kafka's Sender): drains ready batches, groups them by partition
leader into one Produce request per broker, and settles each record's future.

Runs on the client's event loop. Up to `max.in.flight.requests.per.connection` requests per
partition are in flight (a request holds at most one batch of a partition, as Kafka's).
Retriable answers (a leader change, a broker gone, too few in-sync replicas) send the batch
again after `retry.backoff.ms` with fresh metadata, until `delivery.timeout.ms` from the
batch's creation; other errors fail the batch's records at once. After any error a
partition sends one batch at a time until one succeeds with nothing else in flight, and
batches sent again go in the order they were first sent (Kafka's producer does the same),
so with idempotence order holds across retries; without it, as in Kafka, a retry may land
after a later batch.

Idempotence (`enable.idempotence`): the producer gets an id and epoch (InitProducerId) and
numbers each partition's batches; a retry carries the same numbers, so a batch the broker
already wrote is answered with its original offsets, never written twice. A batch refused
outright never used its numbers (they are given back when no later batch was numbered,
else the epoch is bumped); OUT_OF_ORDER_SEQUENCE_NUMBER behind an earlier batch of the
partition that failed or is unanswered only means "after that one": the batch is sent
again behind it. When the broker lost track of the producer (UNKNOWN_PRODUCER_ID,
OUT_OF_ORDER_SEQUENCE_NUMBER otherwise) or a batch's fate is unknown (it timed out), the
epoch is bumped and numbering restarts (KIP-360); no batch of the new epoch is sent for a
partition while batches of the old one are in flight there.

A batch whose request got no answer is known to be written once a later batch of the same
partition and epoch is acknowledged: the leader takes sequence n+1 only after n. Such a
batch succeeds (offset unknown, -1, as Kafka's RecordMetadata without one) whatever its
retry is answered, rather than being renumbered under a new epoch and written twice (the
leader remembers only the last 5 batches, so an older retry is answered
OUT_OF_ORDER_SEQUENCE_NUMBER). Kafka's producer lets such a batch time out instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from strom.accumulator import ProducerBatch, RecordAccumulator, TopicPartition
from strom.cluster import Cluster
from strom.errors import AuthorizationError, KafkaTimeoutError, StromError, from_pb
from strom.repeated_errors import RepeatedErrors
from strom_api.records import encode_batch
from strom_api.v1 import client_pb2

log = logging.getLogger("strom.producer")

# Errors after which the producer asks for metadata again before retrying.
_STALE_METADATA = {
    "NOT_LEADER_OR_FOLLOWER",
    "LEADER_NOT_AVAILABLE",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "NETWORK_EXCEPTION",
    "BROKER_NOT_AVAILABLE",
}
_RESET_PRODUCER = {"UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER"}
# Answers for a batch the leader appended before the acks=all wait failed.
_APPENDED_ERRORS = {"REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"}
_SEQUENCES = 2**31  # sequence numbers wrap here


@dataclass(frozen=True)
class SenderConfig:
    acks: int  # 0, 1 or -1
    idempotent: bool
    retries: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    retry_backoff_ms: int
    compression: int
    max_in_flight: int = 5  # requests per partition


class Sender:
    def __init__(
        self, cluster: Cluster, accumulator: RecordAccumulator, config: SenderConfig
    ) -> None:
        self.cluster = cluster
        self.accumulator = accumulator
        self.config = config
        self.producer_id = -1
        self.producer_epoch = -1
        self._next_sequence: dict[TopicPartition, int] = {}
        # Per partition, the last sequence acknowledged: (producer id, epoch, sequence).
        self._acked_through: dict[TopicPartition, tuple[int, int, int]] = {}
        self._bump_needed = False
        # Batches in flight per partition, in the order they were sent.
        self._in_flight: dict[TopicPartition, list[ProducerBatch]] = {}
        self._recovering: set[TopicPartition] = set()  # one batch at a time after an error
        self._next_order: dict[TopicPartition, int] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[None]] = set()
        self.on_batch_sent: Callable[[ProducerBatch], None] = lambda batch: None
        self.requests_sent = 0
        # Retriable errors are logged once per cause per partition, not once per retry.
        self._reported = RepeatedErrors()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    # Set by the producer's thread when it schedules wake(), cleared by wake() before the
    # sender looks: one cross-thread call (a write to the loop's self-pipe) per look rather
    # than per batch opened or filled.
    wake_pending = False

    def wake(self) -> None:
        self.wake_pending = False
        self._wake.set()

    async def flush(self) -> None:
        """Until every record appended so far has its answer."""
        self.accumulator.flushing = True
        try:
            while self.accumulator.pending() or self._in_flight:
                self._idle.clear()
                self._wake.set()
                await self._idle.wait()
        finally:
            self.accumulator.flushing = False

    async def close(self, timeout_s: float | None) -> None:
        try:
            await asyncio.wait_for(self.flush(), timeout_s)
        except TimeoutError:
            pass
        self._closing = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for task in list(self._requests):
            task.cancel()
        await asyncio.gather(*self._requests, return_exceptions=True)
        now = time.monotonic()
        for batch in self.accumulator.expire(now + 10**9, 0, set()):
            self._fail(
                batch,
                StromError("ILLEGAL_STATE", "the producer was closed before the record was sent"),
            )

    # --- the loop ---------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closing:
            try:
                wake_at = await self._once()
            except Exception:  # never let one bad batch stop every future send
                log.exception("producer sender step failed")
                wake_at = time.monotonic() + self.config.retry_backoff_ms / 1000
            if not self.accumulator.pending() and not self._in_flight:
                self._idle.set()
            self._wake.clear()
            timeout = None if wake_at is None else max(wake_at - time.monotonic(), 0)
            if timeout is None or timeout > 0:
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout)
                except TimeoutError:
                    pass

    async def _once(self) -> float | None:
        now = time.monotonic()
        for batch in self.accumulator.expire(
            now, self.config.delivery_timeout_ms / 1000, set(self._in_flight)
        ):
            self._expired(batch)
        only = None
        if self.config.idempotent and (self.producer_id < 0 or self._bump_needed):
            if self._in_flight:
                # As Kafka's producer: the epoch changes once every request in flight was
                # answered, so each batch to resend is known to be unwritten or written.
                return None
            if self._bump_needed and self.accumulator.any_waiting(_fate_unknown):
                # A batch whose request got no answer may be written: renumbered under a new
                # epoch it would be written again (a duplicate, out of order). Resolve such
                # batches first, with their old numbers (the broker answers a written one as
                # a duplicate); the epoch changes once none is left (Kafka keeps unresolved
                # batches in flight for the same reason).
                only = _fate_unknown
        if only is None and self.config.idempotent and (self.producer_id < 0 or self._bump_needed):
            try:
                await self._init_producer_id()
            except AuthorizationError as exc:
                # Kafka's producer turns fatal here (ClusterAuthorizationException): no
                # producer id will come, so every batch fails now, not at delivery.timeout.ms.
                for batch in self.accumulator.take_all(set(self._in_flight)):
                    self._fail(batch, exc)
                return now + self.config.retry_backoff_ms / 1000
            except StromError as exc:
                # Unreachable brokers were warned about by the cluster (once per address);
                # any other cause once, however long it lasts.
                if exc.name != "NETWORK_EXCEPTION" and self._reported.first_time(
                    "InitProducerId", exc.name
                ):
                    log.warning("InitProducerId failed, retrying: %s", exc)
                else:
                    log.debug("InitProducerId failed, retrying: %s", exc)
                return now + self.config.retry_backoff_ms / 1000
            self._reported.cleared("InitProducerId")
            self._bump_needed = False
        batches, wake_at = self.accumulator.drain(now, self._room, only)
        # Per leader, requests in order, each with at most one batch of a partition: the
        # k-th batch drained of a partition goes in the leader's k-th request.
        by_leader: dict[int, list[list[ProducerBatch]]] = {}
        backoff = self.config.retry_backoff_ms / 1000
        for batch in batches:
            if batch.order < 0:
                batch.order = self._next_order.get(batch.tp, 0)
                self._next_order[batch.tp] = batch.order + 1
            leader = self.cluster.leader(batch.topic, batch.partition)
            if leader < 0 or leader not in self.cluster.brokers:
                self.cluster.mark_stale()
                self.accumulator.requeue(batch, now + backoff)
                wake_at = now + backoff if wake_at is None else min(wake_at, now + backoff)
                continue
            requests = by_leader.setdefault(leader, [])
            for group in requests:
                if all(b.tp != batch.tp for b in group):
                    group.append(batch)
                    break
            else:
                requests.append([batch])
        for leader, requests in by_leader.items():
            for group in requests:
                for batch in group:
                    self._in_flight.setdefault(batch.tp, []).append(batch)
                # Tasks start in creation order and number their batches before their first
                # await, so a partition's sequences follow the order its batches were drained.
                task = asyncio.create_task(self._produce(leader, group))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)
        if self.cluster.needs_refresh() and (batches or self.accumulator.pending()):
            task = asyncio.create_task(self._refresh())
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
        return wake_at

    def _room(self, tp: TopicPartition) -> int:
        """How many more batches of `tp` may be sent now."""
        flying = self._in_flight.get(tp, ())
        if flying and (
            tp in self._recovering
            or (self.config.idempotent and flying[-1].epoch != self.producer_epoch)
        ):
            return 0
        limit = 1 if tp in self._recovering else self.config.max_in_flight
        return limit - len(flying)

    def _earlier_unsettled(self, batch: ProducerBatch) -> bool:
        """A batch of the same partition sent before `batch` is unanswered or to be resent."""
        if any(b is not batch and b.order < batch.order for b in self._in_flight.get(batch.tp, ())):
            return True
        return self.accumulator.waiting_before(batch)

    async def _refresh(self) -> None:
        try:
            await self.cluster.refresh()
        except StromError as exc:
            log.debug("metadata refresh failed: %s", exc)
        self._wake.set()

    async def _init_producer_id(self) -> None:
        request = client_pb2.InitProducerIdRequest(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch
        )
        now = time.monotonic()
        addresses = list(dict.fromkeys([*self.cluster.brokers.values(), *self.cluster.bootstrap]))
        for address in addresses:
            if not self.cluster.connections.can_connect(address, now):
                continue  # backing off (reconnect.backoff.ms)
            try:
                response = await self.cluster.stub_for(address).InitProducerId(
                    request, timeout=self.config.request_timeout_ms / 1000
                )
            except grpc.aio.AioRpcError as exc:
                self.cluster.rpc_failed(address, exc)
                continue
            self.cluster.rpc_answered(address)
            if response.error.code != 0:
                raise from_pb(response.error)
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
            self._next_sequence.clear()
            return
        raise StromError("NETWORK_EXCEPTION", "no broker answered InitProducerId", True)

    # --- one request ------------------------------------------------------------------

    def _encoded(self, batch: ProducerBatch) -> bytes:
        if self.config.idempotent and batch.epoch != self.producer_epoch:
            batch.epoch = self.producer_epoch
            batch.sequence = self._next_sequence.get(batch.tp, 0)
            self._next_sequence[batch.tp] = (batch.sequence + len(batch.records)) % _SEQUENCES
            batch.encoded = None
        if batch.encoded is None:
            batch.encoded = encode_batch(
                batch.records,
                compression_codec=self.config.compression,
                producer_id=self.producer_id if self.config.idempotent else -1,
                producer_epoch=batch.epoch if self.config.idempotent else -1,
                base_sequence=batch.sequence if self.config.idempotent else -1,
            )
        return batch.encoded

    async def _produce(self, leader: int, batches: list[ProducerBatch]) -> None:
        try:
            await self._produce_once(leader, batches)
        finally:
            for batch in batches:
                flying = self._in_flight.get(batch.tp)
                if flying is not None:
                    flying[:] = [b for b in flying if b is not batch]
                    if not flying:
                        del self._in_flight[batch.tp]
            self._wake.set()

    async def _produce_once(self, leader: int, batches: list[ProducerBatch]) -> None:
        topics: dict[str, list[Any]] = {}
        for batch in batches:
            batch.attempts += 1
            topics.setdefault(batch.topic, []).append(
                client_pb2.ProduceRequest.Partition(
                    partition=batch.partition, records=self._encoded(batch)
                )
            )
            self.on_batch_sent(batch)
        request = client_pb2.ProduceRequest(
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            topics=[
                client_pb2.ProduceRequest.Topic(name=t, partitions=ps) for t, ps in topics.items()
            ],
        )
        self.requests_sent += 1
        try:
            stub = self.cluster.stub(leader)
            response = await stub.Produce(
                request, timeout=self.config.request_timeout_ms / 1000 + 5
            )
        except (grpc.aio.AioRpcError, StromError) as exc:
            unreachable = False
            if isinstance(exc, grpc.aio.AioRpcError):
                what = f"{exc.code().name}: {exc.details()}"
                unreachable = exc.code() == grpc.StatusCode.UNAVAILABLE
                self.cluster.rpc_failed(self.cluster.brokers.get(leader, ""), exc)
            else:
                what = str(exc)
            self.cluster.mark_stale()
            error = StromError("NETWORK_EXCEPTION", f"broker {leader}: {what}", True)
            for batch in batches:
                batch.fate_unknown = True
                # A broker that cannot be reached is warned about once, by the cluster.
                self._retry_or_fail(batch, error, report=not unreachable)
            return
        self.cluster.rpc_answered(self.cluster.brokers.get(leader, ""))
        if self.config.acks == 0:
            for batch in batches:
                self._succeed(batch, -1, -1)
            return
        answers = {(t.name, p.partition): p for t in response.topics for p in t.partitions}
        for batch in batches:
            answer = answers.get(batch.tp)
            if answer is None:
                batch.fate_unknown = True
                self._retry_or_fail(
                    batch, StromError("UNKNOWN_SERVER_ERROR", "no answer for the partition", True)
                )
            elif answer.error.code == 0:
                self._succeed(batch, answer.base_offset, answer.log_append_time_ms)
            else:
                self._answered_error(batch, from_pb(answer.error))

    # --- outcomes ---------------------------------------------------------------------

    def _known_written(self, batch: ProducerBatch) -> bool:
        """A later batch of its partition and epoch was acknowledged (see the module doc)."""
        acked = self._acked_through.get(batch.tp)
        if not self.config.idempotent or batch.epoch < 0 or acked is None:
            return False
        producer_id, epoch, through = acked
        return (producer_id, epoch) == (self.producer_id, batch.epoch) and _after(
            through, _last_sequence(batch)
        )

    def _succeed(self, batch: ProducerBatch, base_offset: int, append_time: int) -> None:
        if self.config.idempotent and batch.epoch >= 0:
            last = _last_sequence(batch)
            acked = self._acked_through.get(batch.tp)
            if (
                acked is None
                or acked[:2] != (self.producer_id, batch.epoch)
                or _after(last, acked[2])
            ):
                self._acked_through[batch.tp] = (self.producer_id, batch.epoch, last)
        batch.fate_unknown = False
        if batch.tp in self._recovering and all(
            b is batch for b in self._in_flight.get(batch.tp, ())
        ):
            self._recovering.discard(batch.tp)
        self._reported.cleared(batch.tp)
        self.accumulator.release(batch)
        batch.result.succeed(base_offset, append_time)

    def _fail(self, batch: ProducerBatch, error: Exception) -> None:
        self.accumulator.release(batch)
        batch.result.fail(error)

    def _answered_error(self, batch: ProducerBatch, error: StromError) -> None:
        if self._known_written(batch):
            self._succeed(batch, -1, -1)
            return
        # Appended but not replicated in time: written on the leader, maybe kept. Any other
        # error: refused, not written.
        batch.fate_unknown = error.name in _APPENDED_ERRORS
        if error.name in _STALE_METADATA:
            self.cluster.mark_stale()
        self._recovering.add(batch.tp)
        if (
            self.config.idempotent
            and error.name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
            and self._earlier_unsettled(batch)
        ):
            # Refused because an earlier batch of the partition is not written (yet): it
            # goes again right behind that one, numbers unchanged.
            self.accumulator.requeue(batch, time.monotonic())
            return
        if self.config.idempotent and error.name in _RESET_PRODUCER:
            # The broker lost this producer's state for the partition: a new epoch starts
            # the numbering again (the batch was not written).
            log.info("%s-%d: %s; bumping the producer epoch", batch.topic, batch.partition, error)
            self.producer_id_needs_bump()
            self.accumulator.requeue(batch, time.monotonic())
            return
        if error.retriable:
            self._retry_or_fail(batch, error, report=True)
            return
        if self.config.idempotent and batch.epoch == self.producer_epoch:
            end = (batch.sequence + len(batch.records)) % _SEQUENCES
            if self._next_sequence.get(batch.tp) == end:
                # Refused before anything was written and nothing numbered after it: its
                # numbers are free again.
                self._next_sequence[batch.tp] = batch.sequence
            else:
                # Later batches carry numbers after the gap it leaves: start again.
                self.producer_id_needs_bump()
        self._fail(batch, error)

    def producer_id_needs_bump(self) -> None:
        """The next step asks for a new epoch (InitProducerId with this id and epoch, KIP-360)
        before sending anything, and every partition's numbering restarts at 0."""
        self._bump_needed = True

    def _retry_or_fail(self, batch: ProducerBatch, error: StromError, report: bool = False) -> None:
        if self._known_written(batch):
            self._succeed(batch, -1, -1)
            return
        self._recovering.add(batch.tp)
        batch.last_error = error
        now = time.monotonic()
        waited = now - batch.created
        if batch.attempts > self.config.retries or waited > self.config.delivery_timeout_ms / 1000:
            if self.config.idempotent:
                # Written or not, nobody knows: numbering cannot go on from here.
                self.producer_id_needs_bump()
            failure: StromError = error
            if waited > self.config.delivery_timeout_ms / 1000:
                failure = KafkaTimeoutError(
                    f"{batch.topic}-{batch.partition}: not delivered after {batch.attempts} "
                    f"attempt(s) in {waited * 1000:.0f} ms; last error {error}"
                )
                failure.__cause__ = error
            self._fail(batch, failure)
            return
        if report and self._reported.first_time(batch.tp, error.name):
            # Kafka's Sender says this on every retry; once per cause is enough to see it.
            log.warning(
                "Got error produce response on topic-partition %s-%d, retrying (%d attempts "
                "left, until delivery.timeout.ms=%d). Error: %s",
                batch.topic,
                batch.partition,
                self.config.retries - batch.attempts,
                self.config.delivery_timeout_ms,
                error,
            )
        self.accumulator.requeue(batch, now + self.config.retry_backoff_ms / 1000)

    def _expired(self, batch: ProducerBatch) -> None:
        if self._known_written(batch):
            self._succeed(batch, -1, -1)
            return
        if self.config.idempotent and batch.epoch >= 0:
            self.producer_id_needs_bump()
        if batch.last_error is not None:
            # Waiting to be sent again: the error it kept getting is why it expired.
            why = f"; last error {batch.last_error}"
        else:
            why = (
                f" without being sent (leader {self.cluster.leader(batch.topic, batch.partition)})"
            )
        error = KafkaTimeoutError(
            f"{batch.topic}-{batch.partition}: {len(batch.records)} record(s) expired after "
            f"delivery.timeout.ms={self.config.delivery_timeout_ms}{why}"
        )
        error.__cause__ = batch.last_error
        self._fail(batch, error)


def _last_sequence(batch: ProducerBatch) -> int:
    return (batch.sequence + len(batch.records) - 1) % _SEQUENCES


def _after(a: int, b: int) -> bool:
    """Sequence a comes after b (they wrap at 2**31)."""
    return 0 < (a - b) % _SEQUENCES < _SEQUENCES // 2


def _fate_unknown(batch: ProducerBatch) -> bool:
    return batch.fate_unknown
