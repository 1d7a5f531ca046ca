"""The partitions this broker holds, and the requests that touch them (after Kafka's
ReplicaManager): produce with acks 0/1/all, consumer and follower fetches with long polls,
and the ISR changes leaders propose to the controller.

Everything here runs on the node's event loop. Waiting is decided in the purgatory
(broker/purgatory.py: an acks=all produce until the high watermark passes it, a follower's
or a consumer's fetch until min_bytes are there, each up to its deadline); this class pumps
it: a partition's `on_change` reaches it on the next turn of the loop, one timer wakes it at
its next deadline, and a future per parked request resumes the request when the purgatory is
done with it or says to read again. A consumer's fetch reserves memory in the pool
(queued.max.request.bytes) only to read; while parked it holds none.

Metadata deltas arrive in log order (server/node.py): first `detach` (stop serving what is
deleted or moved away, before its files go), then the disk work off the loop (create and
delete logs), then `attach` (roles from the new image).

The reads themselves are elsewhere: a consumer's in broker/consumer_reads.py, a follower's
in broker/follower_reads.py.

A failed log directory (storage.log_dir_failures): `stop_serving_dir` takes its partitions
out of service, as Kafka's handleLogDirFailure does; they answer KAFKA_STORAGE_ERROR to
every request from then on, and produces waiting on them fail so.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from broker.alter_partition_sender import AlterPartitionSender
from broker.consumer_reads import (
    FetchItem,
    FetchResult,
    counted,
    read_for_consumers,
    without_records,
)
from broker.fetch_sessions import FetchSessionCache
from broker.follower_fetch import FetchRequest, FetchResponse
from broker.follower_reads import (
    NEW_REPLICA_KEY,
    FollowerAnswer,
    read_follower_fetch,
    read_summary,
)
from broker.isr_proposals import ISR_RETRY_BACKOFF_S, Outcome
from broker.loop_slices import LoopSlices
from broker.memory_pool import MemoryPool
from broker.partition import LeaderAppend, Partition, storage_error
from broker.partition_leader import IsrChange
from broker.produce_checks import PreparedBatches, few_plain_records, producer_batches
from broker.producer_expiration import run_producer_expiration
from broker.purgatory import (
    DelayedFetch,
    DelayedOperation,
    FetchReadSummary,
    Purgatory,
)
from broker.replica_config import ReplicaConfig
from broker.replica_counts import ReplicaCounts
from broker.replica_sessions import FollowerSessions
from broker.replica_stats import ReplicaStats, count
from broker.replication_settings import ReplicationSettings
from broker.topic_settings import TopicSettings, topic_settings
from metadata.delta import MetadataDelta
from metadata.errors import ApiError, kept
from metadata.image import MetadataImage, PartitionRegistration
from storage.errors import StorageError
from storage.log_manager import LogManager
from strom_api.error_codes import ErrorCode
from strom_api.v1 import common_pb2
from strom_api.v1 import metadata_pb2 as pb

log = logging.getLogger("strom.replicas")

TopicPartition = tuple[str, int]
ControllerCall = Callable[[str, Any], Awaitable[Any | None]]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def session_clock_ms() -> int:
    """The fetch session cache's clock (monotonic), as the Kafka listener's Fetch uses it."""
    return int(time.monotonic() * 1000)


# A produced batch at least this large is validated in a worker thread (_validate_large);
# smaller ones cost less than the hop (about 0.5 us a record on the loop). Where the
# topic's compression.type recompresses, from a quarter of that: compressing costs as much
# again or more (gzip about 0.1 ms for 16 KiB, 0.5 ms for 64 KiB). Uncompressed batches of
# at most VALIDATE_ON_LOOP_RECORDS records in all stay on the loop whatever their size
# (about 0.13 ms): the hop (the executor's queue, a thread waking, the GIL passed back and
# forth) cost more than that; validating 64-record 1 KiB batches on the loop moved acks=all
# RF 3 from 77-80 to 82-86 MiB/s and from 25 to 23-24 ms of CPU per MiB. Up to
# VALIDATE_ON_LOOP_MAX_BYTES only: the CRC-32C of a 100 MiB request would hold the loop 10 ms.
VALIDATE_OFF_LOOP_BYTES = 64 * 1024
VALIDATE_ON_LOOP_RECORDS = 256
VALIDATE_ON_LOOP_MAX_BYTES = 1024 * 1024
RECOMPRESS_OFF_LOOP_BYTES = 16 * 1024
# Replicas a metadata delta gives their roles between two turns of the event loop (a
# new replica costs about 0.1 ms: opening its producer state, electing, the fetchers),
# and the longest a step may take: a replica that becomes leader writes its leader epoch
# checkpoint with two fsyncs (milliseconds each on a busy disk), so after a broker's
# failover a step of 200 new leaders held the loop past Raft's election timeout.
ATTACH_STEP = 200
ATTACH_STEP_S = 0.05


@dataclass(slots=True)
class ProduceResult:
    append: LeaderAppend | None = None
    error: ApiError | None = None


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        config: ReplicaConfig,
        static_config: dict[str, str],
        controller_call: ControllerCall,
        broker_epoch: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.config = config
        self.static_config = static_config
        self.controller_call = controller_call
        self.broker_epoch = broker_epoch
        self.image = MetadataImage()
        self.partitions: dict[TopicPartition, Partition] = {}
        self.by_id: dict[tuple[bytes, int], Partition] = {}
        self.stats = ReplicaStats()
        # The aggregate gauges, kept by the partitions as they change (no scrape walks them).
        self.counts = ReplicaCounts()
        # Called with a partition whose role or leader changed (the fetchers re-plan).
        self.on_role_change: Callable[[Partition], None] = lambda p: None
        self.on_removed: Callable[[Partition], None] = lambda p: None
        # Fetches and acks=all produces wait in the purgatory (broker/purgatory.py), which
        # this class pumps: the partitions that changed on the next turn of the loop (True:
        # the broker no longer holds it), its deadlines on one timer.
        self.purgatory = Purgatory()
        # The broker's one fetch session cache (KIP-227), Kafka's FetchManager's: the
        # Kafka listener's Fetch uses it (server/kafka/fetch_api.py).
        self.fetch_sessions = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots,
            config.min_incremental_fetch_session_eviction_ms,
            random.Random(),
        )
        # Follower fetches keep their sessions there too (broker/replica_sessions.py).
        self.follower_sessions = FollowerSessions(self.fetch_sessions)
        self._parked: dict[DelayedOperation, asyncio.Future[None]] = {}
        self._changed: dict[TopicPartition, bool] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._settings: dict[str, TopicSettings] = {}
        self._isr_task: asyncio.Task[None] | None = None
        self._producer_expiration: asyncio.Task[None] | None = None
        # queued.max.request.bytes: produce bodies and consumer fetch responses held at once.
        self.memory = MemoryPool(config.queued_max_request_bytes)
        self.isr_sender = AlterPartitionSender(
            broker_id, broker_epoch, controller_call, self._isr_answered
        )
        # Dynamic replication settings and the replication quotas (the leader's is applied
        # here, the follower's by the replica fetchers, which share this object).
        self.replication = ReplicationSettings(broker_id, config)

    def start(self) -> None:
        self._isr_task = asyncio.create_task(self._isr_expiration())
        self._producer_expiration = asyncio.create_task(
            run_producer_expiration(
                self.partitions.values,
                self.config.producer_id_expiration_check_interval_ms,
                self.config.producer_id_expiration_ms,
            )
        )

    async def stop(self) -> None:
        for task in (self._isr_task, self._producer_expiration):
            if task is not None:
                task.cancel()
        await self.isr_sender.stop()
        for op in self.purgatory.parked():
            for key in op.keys:
                self._wake_key(key)

    # --- metadata ---------------------------------------------------------------------------

    def detach(self, delta: MetadataDelta) -> list[TopicPartition]:
        """Stops serving partitions whose logs this delta deletes (topic deleted, replica
        moved away); returns them, for the disk work to delete."""
        doomed: list[TopicPartition] = []
        for topic in delta.topics.deleted.values():
            doomed += [(topic.name, p) for p in topic.partitions]
        for change in delta.topics.changed.values():
            for index, registration in change.partitions.items():
                if self.broker_id not in registration.replicas:
                    doomed.append((change.name, index))
        for key in doomed:
            partition = self.partitions.pop(key, None)
            if partition is not None:
                self.by_id.pop((partition.topic_id, partition.index), None)
                partition.stop_leading()  # waiting produces fail with NOT_LEADER_OR_FOLLOWER
                self.on_removed(partition)
                self._fire(partition, gone=True)
        return doomed

    def create_logs(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """The disk work of a delta before `attach` (in a worker thread: server/node.py):
        the logs of this broker's new replicas. A new replica this broker leads also gets
        its first leader epoch here, written and fsynced off the event loop; on the loop,
        for a topic of thousands of partitions, that was seconds of fsyncs in one go
        (Partition._make_leader then finds it recorded). Nothing serves a new log yet, so
        nothing else touches it. A log that cannot be created is logged and left out."""
        dirs: set[str] = set()
        for change in delta.topics.changed.values():
            settings = None
            for index, registration in change.partitions.items():
                if self.broker_id not in registration.replicas:
                    continue
                if self.log_manager.get_log(change.name, index) is not None:
                    continue
                settings = settings or self.settings_for(image, change.name)
                try:
                    created = self.log_manager.get_or_create_log(
                        change.name, index, settings.log, sync_dir=False
                    )
                    dirs.add(created.log_dir)
                    if registration.leader == self.broker_id:
                        with created.io_guard("leader epoch checkpoint"):
                            created.leader_epochs.assign(
                                registration.leader_epoch, created.log_end_offset
                            )
                except StorageError as exc:  # its log directory failed: the rest goes on
                    log.error("could not create the log of %s-%d: %s", change.name, index, exc)
        # The new logs' names made durable with one fsync per log directory, not one per log.
        self.log_manager.sync_dirs(dirs)

    def settings_for(self, image: MetadataImage, topic: str) -> TopicSettings:
        return topic_settings(image, topic, self.static_config, self.broker_id)

    def attach(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """Acts on the new image: every replica of this broker that the delta touched
        becomes leader or follower as its registration says. The logs exist by now."""
        for _ in self.attach_in_steps(delta, image):
            pass

    def attach_in_steps(self, delta: MetadataDelta, image: MetadataImage) -> Iterator[None]:
        """`attach`, pausing after every ATTACH_STEP replicas or ATTACH_STEP_S seconds: the
        node's pump lets the event loop run between steps (server/node.py), so a delta that
        creates or moves thousands of replicas does not hold Raft, heartbeats and requests
        up for seconds. A replica not
        reached yet acts on its previous registration meanwhile, as if the delta came later."""
        self.image = image
        now = now_ms()
        if delta.configs.changed:
            self.replication.update(image)
            self._update_settings(self._reconfigured_topics(delta))
        in_step = 0
        step_start = time.monotonic()
        for change in delta.topics.changed.values():
            for index, registration in change.partitions.items():
                if self.broker_id in registration.replicas:
                    elapsed = time.monotonic() - step_start
                    if in_step and (in_step >= ATTACH_STEP or elapsed >= ATTACH_STEP_S):
                        yield
                        now = now_ms()
                        in_step, step_start = 0, time.monotonic()
                    self._apply(change.name, change.topic_id, index, registration, now)
                    in_step += 1

    def _reconfigured_topics(self, delta: MetadataDelta) -> set[str] | None:
        """The topics whose effective configs the delta may have changed; None for every
        topic (a cluster-wide or this broker's dynamic config changed, which topics inherit)."""
        topics = set()
        for kind, name in delta.configs.changed:
            if kind == pb.BROKER and name in ("", str(self.broker_id)):
                return None
            if kind == pb.TOPIC:
                topics.add(name)
        return topics

    def _update_settings(self, topics: set[str] | None) -> None:
        """New settings for the partitions of `topics` (None: all), from self.image: a
        topic's config change touches that topic's partitions only."""
        if topics is None:
            self._settings.clear()
            partitions: list[Partition] = list(self.partitions.values())
        else:
            partitions = []
            for topic in topics:
                self._settings.pop(topic, None)
                held = self.image.topics.by_name.get(topic)
                for index in held.partitions if held is not None else ():
                    partition = self.partitions.get((topic, index))
                    if partition is not None:
                        partitions.append(partition)
        for partition in partitions:
            partition.update_settings(self._settings_of(partition.topic))

    def _settings_of(self, topic: str) -> TopicSettings:
        settings = self._settings.get(topic)
        if settings is None:
            settings = self._settings[topic] = self.settings_for(self.image, topic)
        return settings

    def _apply(
        self,
        topic: str,
        topic_id: bytes,
        index: int,
        registration: PartitionRegistration,
        now: int,
    ) -> None:
        key = (topic, index)
        partition = self.partitions.get(key)
        settings = self._settings_of(topic)
        try:
            if partition is None:
                local_log = self.log_manager.get_log(topic, index)
                if local_log is None:
                    log.error("no local log for %s-%d; not serving it", topic, index)
                    return
                local_log.adopt_config(settings.log)  # opened at start-up with the defaults
                partition = Partition(
                    topic,
                    index,
                    topic_id,
                    local_log,
                    self.broker_id,
                    settings,
                    self.config.replica_lag_time_max_ms,
                )
                partition.on_change = lambda: self._fire(partition)
                partition.counts = self.counts
                self.partitions[key] = partition
                self.by_id[(topic_id, index)] = partition
                # Follower fetches that named it before this broker held it wait for it.
                self._wake_key(NEW_REPLICA_KEY)
            if partition.apply_registration(registration, now, settings):
                self.on_role_change(partition)
        except (ApiError, StorageError) as exc:
            # A replica in a failed log directory: it stays out of service (requests for it
            # are answered KAFKA_STORAGE_ERROR), and the rest of the delta still applies.
            log.warning("not serving %s-%d: %s", topic, index, exc)

    def stop_serving_dir(self, log_dir: str) -> list[Partition]:
        """The log directory failed: its partitions lead and follow nothing from now on
        (Kafka's handleLogDirFailure). Returns them, for the fetchers to drop."""
        stopped = [p for p in self.partitions.values() if p.log.log_dir == log_dir]
        for partition in stopped:
            partition.stop_leading()
            self.on_removed(partition)
            self._fire(partition)  # waiting produces and fetches
        return stopped

    def offline_replicas(self) -> list[tuple[bytes, int]]:
        """(topic id, partition) of every replica whose log directory failed. Asked at every
        heartbeat: with every directory online (the usual case) no replica is looked at."""
        if not self.log_manager.failures.offline_dirs:
            return []
        return [(p.topic_id, p.index) for p in self.partitions.values() if p.offline]

    def _offline_error(self, topic: str, index: int) -> ApiError | None:
        """KAFKA_STORAGE_ERROR for a replica of ours whose log directory is offline."""
        partition = self.partitions.get((topic, index))
        if partition is not None:
            return partition.offline_error() if partition.offline else None
        local_log = self.log_manager.get_log(topic, index)
        if local_log is not None and local_log.offline:
            return storage_error(local_log.offline_error())
        return None

    def eligible(self, broker_id: int) -> bool:
        """May join an ISR: registered, unfenced, not shutting down (KIP-841)."""
        broker = self.image.cluster.brokers.get(broker_id)
        return broker is not None and not broker.fenced and not broker.in_controlled_shutdown

    # --- waiting ----------------------------------------------------------------------------

    def _fire(self, partition: Partition, gone: bool = False) -> None:
        """The partition changed; `gone`: this broker no longer holds it. Follower fetch
        sessions holding it hear of it first (they wait on their own keys)."""
        for session_key in self.follower_sessions.changed(partition):
            self._wake_key(session_key)
        self._wake_key((partition.topic, partition.index), gone)

    def _wake_key(self, key: TopicPartition, gone: bool = False) -> None:
        if self.purgatory.watched(key):
            # Looked at on the next turn of the loop, as a woken waiter would: the
            # partition may be in the middle of a change now.
            if not self._changed:
                asyncio.get_running_loop().call_soon(self._drain_changes)
            self._changed[key] = gone or self._changed.get(key, False)

    @staticmethod
    def _clock_ms() -> int:
        """The purgatory's clock: the loop's (monotonic), in whole milliseconds."""
        return int(asyncio.get_running_loop().time() * 1000)

    def _drain_changes(self) -> None:
        changed, self._changed = self._changed, {}
        now = self._clock_ms()
        for key, gone in changed.items():
            self._wake(self.purgatory.changed(key, now, gone))
        self._arm()

    def _expire(self) -> None:
        self._timer = self._timer_at = None
        self._wake(self.purgatory.expire(self._clock_ms()))
        self._arm()

    def _wake(self, ops: list[DelayedOperation]) -> None:
        for op in ops:
            future = self._parked.pop(op, None)
            if future is not None and not future.done():
                future.set_result(None)

    def _arm(self) -> None:
        """One timer, at the purgatory's next deadline."""
        at = self.purgatory.next_wake_ms()
        if at == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = self._timer_at = None
        if at is not None:
            delay_s = max(at - self._clock_ms(), 0) / 1000
            self._timer = asyncio.get_running_loop().call_later(delay_s, self._expire)
            self._timer_at = at

    async def _until_woken(self, op: DelayedOperation) -> None:
        """Waits until the purgatory decides the parked operation or says to look again;
        a caller that goes away takes its operation out."""
        future = self._parked[op] = asyncio.get_running_loop().create_future()
        self._arm()
        try:
            await future
        finally:
            if self._parked.pop(op, None) is not None:
                self.purgatory.cancel(op)
                self._arm()

    # --- lookups ----------------------------------------------------------------------------

    def leader_partition(self, topic: str, index: int) -> Partition:
        """The partition if this broker leads it, else the error a client should see."""
        partition = self.partitions.get((topic, index))
        if partition is not None and partition.is_leader:
            return partition
        offline = self._offline_error(topic, index)
        if offline is not None:
            raise offline
        registration = self.image.topics.partition(topic, index)
        if registration is None:
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"This server does not host this topic-partition: {topic}-{index}.",
            )
        if not registration.has_leader:
            raise ApiError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{index} has no leader right now."
            )
        raise ApiError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"Broker {self.broker_id} is not the leader of {topic}-{index}; broker "
            f"{registration.leader} is (leader epoch {registration.leader_epoch}).",
        )

    def local_partition(self, topic: str, index: int) -> Partition:
        """The replica this broker holds, leader or follower."""
        offline = self._offline_error(topic, index)
        if offline is not None:
            raise offline
        partition = self.partitions.get((topic, index))
        if partition is not None:
            return partition
        if self.image.topics.partition(topic, index) is None:
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"This server does not host this topic-partition: {topic}-{index}.",
            )
        raise ApiError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"Broker {self.broker_id} holds no replica of {topic}-{index}.",
        )

    def current_leader(self, topic: str, index: int) -> tuple[int, int]:
        registration = self.image.topics.partition(topic, index)
        if registration is None:
            return -1, -1
        return registration.leader, registration.leader_epoch

    # --- produce ----------------------------------------------------------------------------

    async def produce(
        self,
        acks: int,
        timeout_ms: int,
        batches: Sequence[tuple[str, int, bytes]],
        appended: Callable[[], None] | None = None,
    ) -> dict[TopicPartition, ProduceResult]:
        """Appends each batch to its partition's leader log, then (acks=all) waits for the
        ISR. `appended` is told once every batch is appended (or refused) and only the
        replication wait is left: a front end that pipelines a connection's requests
        (server/kafka/connection.py) may start the next request's appends from then on,
        and the appends of one connection keep its order."""
        if acks not in (0, 1, -1):
            error = ApiError(
                ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1 (all), not {acks}."
            )
            return {(t, p): ProduceResult(error=error) for t, p, _ in batches}
        results: dict[TopicPartition, ProduceResult] = {}
        waiting: list[tuple[TopicPartition, Partition, LeaderAppend]] = []
        now = now_ms()
        prepared = await self._validate_large(batches, now, results)
        slices = LoopSlices()  # a request may name 100,000 partitions: others run meanwhile
        for topic, index, records in batches:
            await slices.step()
            key = (topic, index)
            if key in results:
                continue  # refused while validated off the loop
            try:
                partition = self.leader_partition(topic, index)
                append = partition.append_as_leader(records, acks, now, prepared.get(key))
            except ApiError as exc:
                results[key] = ProduceResult(error=kept(exc))
                continue
            results[key] = ProduceResult(append)
            if not append.duplicate:
                count(self.stats.bytes_in, topic, len(records))
                count(self.stats.messages_in, topic, append.next_offset - append.base_offset)
            if acks == -1:
                waiting.append((key, partition, append))
        if appended is not None:
            appended()
        if waiting:
            await self._await_replication(waiting, results, timeout_ms)
        for (topic, _), result in results.items():
            count(self.stats.produce_requests, topic)
            if result.error is not None:
                count(self.stats.failed_produce_requests, topic)
        return results

    async def _validate_large(
        self,
        batches: Sequence[tuple[str, int, bytes]],
        now: int,
        results: dict[TopicPartition, ProduceResult],
    ) -> dict[TopicPartition, PreparedBatches]:
        """Validates the records of large batches in a worker thread. Validation walks every
        record (log_validator), and a request may carry megabytes of them (a compressed
        batch of 1 MiB can hold millions); on the loop that would stall Raft, heartbeats and
        every other request of the node; recompressing them for compression.type more so.
        In a thread the loop keeps getting the GIL every switch interval. Refusals go into
        `results`."""
        prepared: dict[TopicPartition, PreparedBatches] = {}
        for topic, index, records in batches:
            if len(records) < RECOMPRESS_OFF_LOOP_BYTES:
                continue
            key = (topic, index)
            try:
                settings = self.leader_partition(topic, index).settings
                if settings.compression is None and (
                    len(records) < VALIDATE_OFF_LOOP_BYTES
                    or (
                        len(records) <= VALIDATE_ON_LOOP_MAX_BYTES
                        and few_plain_records(records, VALIDATE_ON_LOOP_RECORDS)
                    )
                ):
                    continue
                prepared[key] = await asyncio.to_thread(producer_batches, records, settings, now)
            except ApiError as exc:
                results[key] = ProduceResult(error=kept(exc))
        return prepared

    async def _await_replication(
        self,
        waiting: list[tuple[TopicPartition, Partition, LeaderAppend]],
        results: dict[TopicPartition, ProduceResult],
        timeout_ms: int,
    ) -> None:
        """acks=all: until every partition's high watermark passes its batches (Kafka's
        DelayedProduce, decided by broker/purgatory.py)."""
        op = self.purgatory.produce(waiting, timeout_ms, self._clock_ms())
        count = len(waiting)
        self.stats.produce_waiting += count
        try:
            while not op.done:
                await self._until_woken(op)
        finally:
            self.stats.produce_waiting -= count
        for key, error in op.results.items():
            if error is not None:
                results[key] = ProduceResult(error=error)

    # --- consumer fetch ---------------------------------------------------------------------

    async def fetch(
        self,
        items: Sequence[FetchItem],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        any_replica: bool = False,
    ) -> dict[TopicPartition, FetchResult]:
        """Consumers' fetch from the leaders; with `any_replica` (Kafka's debugging consumer)
        from whichever replica this broker holds. A fetch naming no partition is answered
        at once, as Kafka's ReplicaManager does ("does not require any data").

        At most fetch.max.bytes are read (KIP-74: the first batch may pass it), and only once
        the memory pool grants them; the bytes returned stay reserved in `self.memory` until
        the caller releases them (the response was handed over). When the pool stays full
        for the whole wait, the answer carries no records. Between reads the fetch waits in
        the purgatory (Kafka's DelayedFetch) holding no memory: each read reserves anew."""
        fetch = self.purgatory.consumer_fetch(max_wait_ms, min_bytes, self._clock_ms())
        # Never below 0: a negative max_bytes (a fuzzer sent -2^31) must not reserve a
        # negative amount, which the caller's release would then leak from the pool.
        budget = max(min(max_bytes, self.config.fetch_response_limit), 0)
        held = 0  # reserved here; released here on any way out but a normal return
        try:
            while True:
                wait_s = max(fetch.deadline_ms - self._clock_ms(), 0) / 1000
                if not await self.memory.reserve(budget, wait_s):
                    return await counted(
                        self.stats, await without_records(self, items, any_replica)
                    )
                held = budget
                results, read = await read_for_consumers(self, items, budget, any_replica)
                self.memory.adjust(budget, read.record_bytes)
                held = read.record_bytes
                if self.purgatory.consumer_read(fetch, read, self._clock_ms()):
                    held = 0  # the caller's to release now
                    return await counted(self.stats, results)
                self.memory.release(held)  # parked: it holds no memory while it waits
                held = 0
                self.stats.fetch_waiting += 1
                try:
                    await self._until_woken(fetch)
                finally:
                    self.stats.fetch_waiting -= 1
        finally:
            self.memory.release(held)

    # --- follower fetch (leader side) -------------------------------------------------------

    async def replica_fetch(
        self, request: FetchRequest, waiting: Callable[[DelayedFetch], None] | None = None
    ) -> FetchResponse:
        """Serves one follower fetch (the servicer's conversion of a ReplicaFetchRequest)
        under its fetch session's rules (broker/replica_sessions.py), after waiting up to
        max_wait_ms for min_bytes. `waiting` is given the long poll, which `hurry` ends."""
        sessions = self.follower_sessions
        fetch = sessions.begin(request, session_clock_ms(), now_ms())
        if fetch.error is not None:
            return sessions.finish(fetch, [], session_clock_ms())
        op = self.purgatory.follower_fetch(request.max_wait_ms, request.min_bytes, self._clock_ms())
        if waiting is not None:
            waiting(op)
        while True:
            answers, throttled = self._read_for_follower(sessions.to_read(fetch))
            read = self._follower_read(answers, throttled)
            if fetch.wait_keys:
                read = dataclasses.replace(read, keys=read.keys + fetch.wait_keys)
            if self.purgatory.fetch_read(op, read, self._clock_ms()):
                return sessions.finish(fetch, answers, session_clock_ms())
            await self._until_woken(op)

    def hurry(self, op: DelayedFetch) -> None:
        """The follower's hurry (ReplicaFetchRequest.hurry): its fetch is answered now."""
        self._wake(self.purgatory.hurry(op, self._clock_ms()))
        self._arm()

    def _follower_read(self, answers: list[FollowerAnswer], throttled: bool) -> FetchReadSummary:
        return read_summary(answers, self.replication.leader, throttled)

    def _read_for_follower(self, request: FetchRequest) -> tuple[list[FollowerAnswer], bool]:
        """broker/follower_reads.py's read of the fetch. Followers are few (one stream per
        follower broker and fetcher), so their answers are not held to the memory pool, only
        to fetch.max.bytes."""
        budget = min(
            request.max_bytes if request.max_bytes > 0 else self.config.fetch_response_max_bytes,
            self.config.fetch_response_limit,
        )
        now = now_ms()
        return read_follower_fetch(
            request,
            lambda topic_id, index: self.by_id.get((topic_id, index)),
            budget,
            self.replication.leader,
            now,
            self.broker_id,
            lambda partition: self._maybe_change_isr(partition, now),
        )

    # --- ISR changes ------------------------------------------------------------------------

    def _maybe_change_isr(self, partition: Partition, now: int) -> None:
        change = partition.isr_change_needed(now, self.eligible)
        if change is not None:
            self.isr_sender.submit(partition, change)

    def _isr_answered(self, partition: Partition, change: IsrChange, answer: Any | None) -> None:
        """The controller's answer to one proposed ISR change, applied by IsrProposals'
        rules (broker/isr_proposals.py); this pump logs it and schedules the resend."""
        proposals = self.isr_sender.proposals
        if answer is not None and answer.error.code == 0:
            proposals.answered(partition, change, None, answer.isr, answer.partition_epoch)
            log.info(
                "ISR of %s is now %s (partition epoch %d)",
                partition.name,
                list(answer.isr),
                answer.partition_epoch,
            )
            return
        name = "NO_ANSWER" if answer is None else common_pb2.ErrorCode.Name(answer.error.code)
        why = "no controller answered" if answer is None else answer.error.message
        outcome = proposals.answered(partition, change, name)
        log.info(
            "ISR change of %s to %s not accepted (%s): %s; %s",
            partition.name,
            list(change.isr),
            name,
            why,
            outcome.value,
        )
        if outcome is Outcome.RETRY:
            loop = asyncio.get_running_loop()
            loop.call_later(ISR_RETRY_BACKOFF_S, self._resend_isr_change, partition, change)

    def _resend_isr_change(self, partition: Partition, change: IsrChange) -> None:
        # This very replica still served (not one deleted, nor one created again since):
        # a lookup, not a scan of every replica for each of thousands of resends.
        served = self.partitions.get((partition.topic, partition.index)) is partition
        if self.isr_sender.proposals.resend(partition, change, served):
            self.isr_sender.wake()

    async def _isr_expiration(self) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2, every led
        partition drops followers that have not caught up within replica.lag.time.max.ms.
        Only the partitions this broker leads are visited (the counts keep them), and a
        follower at the leader's log end is caught up without a look at the clock."""
        interval = max(self.config.replica_lag_time_max_ms / 2000, 0.05)
        while True:
            await asyncio.sleep(interval)
            self.expire_isr(now_ms())

    def expire_isr(self, now: int) -> None:
        for partition in list(self.counts.led):
            self._maybe_change_isr(partition, now)
