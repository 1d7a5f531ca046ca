"""The producer's I/O side (Kafka's Sender): drains ready batches, groups them by partition
leader into Produce requests (strom/produce_requests.py), at most
max.in.flight.requests.per.connection unanswered per broker, sent in order on the broker's
ProduceStream (strom/produce_stream.py), and settles each batch's result.

Runs on the client's event loop. The rules of what to send and when (in-flight limits per
partition, retries and their order, retry.backoff.ms, delivery.timeout.ms, idempotence's
producer id, epoch and sequences, and what each answer means) live in the sans-I/O
strom/producer_sequencing.py; this module only pumps them: it asks what may be sent, sends
it, and hands every answer (or the lack of one) back, then settles the futures and puts
batches back in the accumulator as told. It also owns what needs I/O: InitProducerId,
metadata refreshes and logging each retriable cause once.
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

from strom.accumulator import ProducerBatch, RecordAccumulator
from strom.cluster import Cluster
from strom.errors import AuthorizationError, ClientErrorName, StromError, from_pb
from strom.produce_requests import produce_requests
from strom.produce_stream import ProduceStreams
from strom.producer_sequencing import (
    STALE_METADATA,
    Fail,
    Outcome,
    ProducerSequencing,
    Retry,
    RetryReason,
    SendStep,
    SequencingConfig,
    Succeed,
)
from strom.repeated_errors import RepeatedErrors
from strom_api.error_codes import ErrorCode
from strom_api.records import framed_batch
from strom_api.v1 import client_pb2

log = logging.getLogger("strom.producer")

# Refusals that are about a batch's own records or size: when a request carried several
# batches of the partition, one of them may have caused it for all.
BATCH_CONTENT_ERRORS = frozenset(
    {
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_TIMESTAMP,
        ErrorCode.CORRUPT_MESSAGE,
    }
)


@dataclass(frozen=True)
class SenderConfig:
    acks: int  # 0, 1 or -1
    idempotent: bool
    retries: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    retry_backoff_ms: int
    compression: int
    # max.in.flight.requests.per.connection: requests unanswered per broker; a partition may
    # have 5 times as many batches unanswered (strom_api/idempotence.py).
    max_in_flight: int = 5
    max_request_size: int = 1024 * 1024
    # client.id: the producer's log lines say whose they are, as Kafka's do ("[Producer
    # clientId=...]"); Strom's Produce RPC carries no client id.
    client_id: str = "strom-producer"


class _ClientLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"[Producer clientId={self.extra['client_id']}] {msg}", kwargs  # type: ignore[index]


def _now_ms() -> float:
    return time.monotonic() * 1000


class Sender:
    def __init__(
        self, cluster: Cluster, accumulator: RecordAccumulator, config: SenderConfig
    ) -> None:
        self.cluster = cluster
        self.accumulator = accumulator
        self.config = config
        self.log = _ClientLog(log, {"client_id": config.client_id})
        self.rules: ProducerSequencing[ProducerBatch] = ProducerSequencing(
            SequencingConfig(
                idempotent=config.idempotent,
                retries=config.retries,
                delivery_timeout_ms=config.delivery_timeout_ms,
                retry_backoff_ms=config.retry_backoff_ms,
                max_in_flight=config.max_in_flight,
            )
        )
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[None]] = set()
        # Told after each drain: how many batches each partition holds (open or waiting,
        # before the drain) and which partitions sent some (the partitioner's load stats).
        self.on_drained: Callable[[dict[tuple[str, int], int], set[tuple[str, int]]], None] = (
            lambda queued, drained: None
        )
        self._requests_to: dict[int, int] = {}  # requests unanswered, per leader
        self._streams = ProduceStreams(cluster)  # every Produce goes on one, per broker
        self.requests_sent = 0
        # Retriable errors are logged once per cause per partition, not once per retry.
        self._reported = RepeatedErrors()

    @property
    def producer_id(self) -> int:
        return self.rules.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.rules.producer_epoch

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
            while self.accumulator.pending() or self.rules.any_in_flight():
                self._idle.clear()
                self._wake.set()
                await self._idle.wait()
        finally:
            self.accumulator.flushing = False

    async def close(self, timeout_s: float | None) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                await self.flush()
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
        await self._streams.close()
        now = time.monotonic()
        for batch in self.accumulator.expire(now + 10**9, 0, set()):
            self.rules.dropped(batch)
            self._fail(
                batch,
                StromError(
                    ClientErrorName.ILLEGAL_STATE,
                    "the producer was closed before the record was sent",
                ),
            )

    # --- the loop ---------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closing:
            try:
                wake_at = await self._once()
            except Exception:  # never let one bad batch stop every future send
                self.log.exception("producer sender step failed")
                wake_at = time.monotonic() + self.config.retry_backoff_ms / 1000
            if not self.accumulator.pending() and not self.rules.any_in_flight():
                self._idle.set()
            self._wake.clear()
            timeout = None if wake_at is None else max(wake_at - time.monotonic(), 0)
            if timeout is None or timeout > 0:
                try:
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
                except TimeoutError:
                    pass

    async def _once(self) -> float | None:
        now = time.monotonic()
        rules = self.rules
        for batch in self.accumulator.expire(
            now, self.config.delivery_timeout_ms / 1000, rules.busy_partitions()
        ):
            leader = self.cluster.leader(batch.topic, batch.partition)
            self._settle(rules.expired(batch, now * 1000, leader))
        step = rules.send_step()
        if step is SendStep.WAIT:
            return None
        if step is SendStep.INIT_PRODUCER_ID:
            try:
                producer_id, epoch = await self._init_producer_id()
            except AuthorizationError as exc:
                # Kafka's producer turns fatal here (ClusterAuthorizationException): no
                # producer id will come, so every batch fails now, not at delivery.timeout.ms.
                for batch in self.accumulator.take_all(rules.busy_partitions()):
                    rules.dropped(batch)
                    self._fail(batch, exc)
                return now + self.config.retry_backoff_ms / 1000
            except StromError as exc:
                # Unreachable brokers were warned about by the cluster (once per address);
                # any other cause once, however long it lasts.
                if exc.name != ErrorCode.NETWORK_EXCEPTION and self._reported.first_time(
                    "InitProducerId", exc.name
                ):
                    self.log.warning("InitProducerId failed, retrying: %s", exc)
                else:
                    self.log.debug("InitProducerId failed, retrying: %s", exc)
                return now + self.config.retry_backoff_ms / 1000
            self._reported.cleared("InitProducerId")
            rules.producer_id_granted(producer_id, epoch)
        only = rules.resolving if step is SendStep.RESOLVE_UNKNOWN else None
        batches, wake_at, queued = self.accumulator.drain(
            now, self._room, only, rules.has_in_flight
        )
        self.on_drained(queued, {b.tp for b in batches})
        by_leader: dict[int, list[ProducerBatch]] = {}
        for batch in batches:
            rules.drained(batch)
            leader = self.cluster.leader(batch.topic, batch.partition)
            if leader < 0 or leader not in self.cluster.brokers:
                self.cluster.mark_stale()
                retry_at = rules.put_back(batch, now * 1000) / 1000
                self.accumulator.requeue(batch, retry_at)
                wake_at = retry_at if wake_at is None else min(wake_at, retry_at)
                continue
            by_leader.setdefault(leader, []).append(batch)
        for leader, drained in by_leader.items():
            requests = produce_requests(drained, self.config.max_request_size)
            free = self.config.max_in_flight - self._requests_to.get(leader, 0)
            for group in requests[free:]:
                # More than the connection may have unanswered (max.request.size split
                # them): back at the head of their queues, to go when answers come.
                for batch in group:
                    rules.put_back(batch, now * 1000)
                    self.accumulator.requeue(batch, now)
            for group in requests[:free]:
                for batch in group:
                    rules.dispatched(batch)
                # Tasks start in creation order and number their batches before their first
                # await, so a partition's sequences follow the order its batches were drained.
                self._requests_to[leader] = self._requests_to.get(leader, 0) + 1
                task = asyncio.create_task(self._produce(leader, group))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)
        if self.cluster.needs_refresh() and (batches or self.accumulator.pending()):
            task = asyncio.create_task(self._refresh())
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
        return wake_at

    def _room(self, tp: tuple[str, int]) -> int:
        """Batches of `tp` that may leave now: the rules' room for the partition, none while
        its leader has max.in.flight.requests.per.connection requests unanswered."""
        leader = self.cluster.leader(*tp)
        if self._requests_to.get(leader, 0) >= self.config.max_in_flight:
            return 0
        return self.rules.room(tp)

    async def _refresh(self) -> None:
        try:
            await self.cluster.refresh()
        except StromError as exc:
            self.log.debug("metadata refresh failed: %s", exc)
        self._wake.set()

    async def _init_producer_id(self) -> tuple[int, int]:
        request = client_pb2.InitProducerIdRequest(
            producer_id=self.rules.producer_id, producer_epoch=self.rules.producer_epoch
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
            return response.producer_id, response.producer_epoch
        raise StromError(ErrorCode.NETWORK_EXCEPTION, "no broker answered InitProducerId", True)

    # --- one request ------------------------------------------------------------------

    def _encoded(self, batch: ProducerBatch) -> bytes:
        numbers = self.rules.sending(batch)
        if numbers.renumbered:
            batch.encoded = None
        if batch.encoded is None:
            batch.encoded = framed_batch(
                batch.body,
                batch.count,
                compression_codec=self.config.compression,
                base_timestamp=batch.base_timestamp,
                max_timestamp=batch.max_timestamp,
                producer_id=numbers.producer_id,
                producer_epoch=numbers.epoch,
                base_sequence=numbers.sequence,
            )
        return batch.encoded

    async def _produce(self, leader: int, batches: list[ProducerBatch]) -> None:
        try:
            await self._produce_once(leader, batches)
        finally:
            self._requests_to[leader] -= 1
            self.rules.request_ended(batches)
            self._wake.set()

    async def _produce_once(self, leader: int, batches: list[ProducerBatch]) -> None:
        # A partition's batches in a request are consecutive there (produce_requests), in
        # sequence order; the broker appends them together, at consecutive offsets.
        records: dict[tuple[str, int], list[bytes]] = {}
        for batch in batches:
            records.setdefault(batch.tp, []).append(self._encoded(batch))
        topics: dict[str, list[Any]] = {}
        for (topic, partition), encoded in records.items():
            topics.setdefault(topic, []).append(
                client_pb2.ProduceRequest.Partition(
                    partition=partition,
                    records=encoded[0] if len(encoded) == 1 else b"".join(encoded),
                )
            )
        request = client_pb2.ProduceRequest(
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            topics=[
                client_pb2.ProduceRequest.Topic(name=t, partitions=ps) for t, ps in topics.items()
            ],
        )
        self.requests_sent += 1
        try:
            response = await self._streams.produce(
                leader, request, self.config.request_timeout_ms / 1000 + 5
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
            error = StromError(ErrorCode.NETWORK_EXCEPTION, f"broker {leader}: {what}", True)
            for batch in batches:
                # A broker that cannot be reached is warned about once, by the cluster.
                self._settle(self.rules.no_answer(batch, error, _now_ms()), report=not unreachable)
            return
        self.cluster.rpc_answered(self.cluster.brokers.get(leader, ""))
        if self.config.acks == 0:
            self._settle_acknowledged([self.rules.acknowledged(b, -1, -1) for b in batches])
            return
        answers = {(t.name, p.partition): p for t in response.topics for p in t.partitions}
        acknowledged: list[Outcome[ProducerBatch]] = []
        # The offset the next batch of each partition starts at: its answer's base offset,
        # then after each batch before it in the request.
        next_offset: dict[tuple[str, int], int] = {}
        for batch in batches:
            answer = answers.get(batch.tp)
            if answer is None:
                missing = StromError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for the partition", True
                )
                self._settle(self.rules.no_answer(batch, missing, _now_ms()))
            elif answer.error.code == 0:
                base = next_offset.get(batch.tp, answer.base_offset)
                next_offset[batch.tp] = base + batch.record_count if base >= 0 else -1
                acknowledged.append(self.rules.acknowledged(batch, base, answer.log_append_time_ms))
            else:
                error = from_pb(answer.error)
                shared = sum(1 for b in batches if b.tp == batch.tp)
                if shared > 1 and error.name in BATCH_CONTENT_ERRORS and not error.retriable:
                    # The leader judged the partition's batches of this request together;
                    # Kafka judges each batch: each goes again alone, and only the one at
                    # fault fails with the error.
                    error = StromError(
                        error.name,
                        f"{error.message} (one of {shared} batches refused together; each "
                        "is sent again alone)",
                        retriable=True,
                    )
                outcome = self.rules.refused(batch, error, _now_ms())
                if not isinstance(outcome, Succeed) and error.name in STALE_METADATA:
                    self.cluster.mark_stale()
                self._settle(outcome, report=True)
        self._settle_acknowledged(acknowledged)

    # --- outcomes ---------------------------------------------------------------------

    def _settle_acknowledged(self, outcomes: list[Outcome[ProducerBatch]]) -> None:
        """A request's acknowledged batches: their bytes leave buffer.memory under one
        lock (RecordAccumulator.release), before any record's callback runs (a callback
        that sends finds the room), then each is settled."""
        self.accumulator.release(*(o.batch for o in outcomes if isinstance(o, Succeed)))
        for outcome in outcomes:
            self._settle(outcome)

    def _settle(self, outcome: Outcome[ProducerBatch], report: bool = False) -> None:
        """Does what the rules decided for a batch: settle its records or queue it again."""
        batch = outcome.batch
        if isinstance(outcome, Succeed):
            self._reported.cleared(batch.tp)
            self.accumulator.release(batch)
            batch.result.succeed(outcome.base_offset, outcome.append_time_ms)
        elif isinstance(outcome, Fail):
            self._fail(batch, outcome.error)
        else:
            self._report(outcome, report)
            self.accumulator.requeue(batch, outcome.at_ms / 1000)

    def _report(self, retry: Retry[ProducerBatch], report: bool) -> None:
        batch, error = retry.batch, retry.error
        if retry.reason is RetryReason.NEW_EPOCH:
            self.log.info(
                "%s-%d: %s; bumping the producer epoch", batch.topic, batch.partition, error
            )
        elif (
            retry.reason is RetryReason.BACKOFF
            and report
            and self._reported.first_time(batch.tp, error.name)
        ):
            # Kafka's Sender says this on every retry; once per cause is enough to see it.
            self.log.warning(
                "Got error produce response on topic-partition %s-%d, retrying (%d attempts "
                "left, until delivery.timeout.ms=%d). Error: %s",
                batch.topic,
                batch.partition,
                self.config.retries - batch.attempts,
                self.config.delivery_timeout_ms,
                error,
            )

    def _fail(self, batch: ProducerBatch, error: Exception) -> None:
        self.accumulator.release(batch)
        batch.result.fail(error)
