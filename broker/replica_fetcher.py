"""The follower side of replication (docs/architecture.md §6): one bidirectional gRPC stream per
(leader broker, fetcher index), at most `num.replica.fetchers` per leader, multiplexing
every partition this broker follows there (after Kafka's ReplicaFetcherManager and
ReplicaFetcherThread).

Each stream carries one fetch at a time: the request names, per partition, the follower's
log end (the fetch offset) and the epoch of its last batch; the leader answers with the
stored bytes, its high watermark and log start, or the epoch where the logs diverged. The
answer is applied only if the partition still follows the same leader epoch from the same
log end, so a reply that crossed a leader change or a truncation is dropped, not written.
A partition whose leader refused it (not leader any more, epoch unknown yet) rests for
`replica.fetch.backoff.ms` or until the metadata moves it. A partition that fails here (a
disk error on its log, KAFKA_STORAGE_ERROR, or any unexpected error) fails alone, as in
Kafka's markPartitionFailed: it leaves the stream, and every other partition of that leader
goes on being fetched; it comes back only when the metadata gives it a leader again.

The follower's replication throttle (broker/replication_quota.py, Kafka's
shouldFollowerThrottle): a partition in follower.replication.throttled.replicas that has not
caught up with the leader's high watermark is left out of the next fetch while the
follower's quota is exceeded, and the stream waits no longer than the quota's debt for the
others; the bytes fetched for throttled partitions are recorded against the quota.
replica.fetch.max.bytes and num.replica.fetchers are read from ReplicationSettings, so a
dynamic change applies to the next fetch, and resizes the pool (FetcherManager.resize).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from broker.partition import Partition
from broker.replication_settings import ReplicationSettings
from broker.server_config import ReplicaConfig
from metadata.errors import ApiError
from strom_api.sasl_client import stream_failed, stream_metadata
from strom_api.v1 import common_pb2, replica_pb2, replica_pb2_grpc

log = logging.getLogger("strom.fetcher")

Key = tuple[bytes, int]
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 128 * 1024 * 1024),
    ("grpc.max_send_message_length", 128 * 1024 * 1024),
]
# open_channel(address, options=...): a channel to a leader's inter-broker listener.
OpenChannel = Callable[..., grpc.aio.Channel]
OUT_OF_RANGE = common_pb2.ErrorCode.Value("OFFSET_OUT_OF_RANGE")


class ReplicaFetcher:
    """One stream to one leader broker."""

    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        address: str,
        config: ReplicaConfig,
        broker_epoch: Callable[[], int],
        replication: ReplicationSettings | None = None,
        open_channel: OpenChannel = grpc.aio.insecure_channel,
    ) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.open_channel = open_channel  # TLS when the inter-broker listener is SSL
        self.address = address
        self.config = config
        self.broker_epoch = broker_epoch
        self.replication = replication or ReplicationSettings(broker_id, config)
        self.partitions: dict[Key, Partition] = {}
        self.resting_until: dict[Key, float] = {}
        # How far each partition was behind the leader's high watermark after its last
        # answer (Kafka's PartitionFetchState.lag); none yet: not in sync.
        self.lag: dict[Key, int] = {}
        self.throttled_out = False  # the last plan left a throttled partition out
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._channel: grpc.aio.Channel | None = None
        self.fetches = 0
        self.failed = 0  # partitions marked failed (Kafka's FailedPartitionsCount)
        self.last_error = ""

    def add(self, partition: Partition) -> None:
        key = (partition.topic_id, partition.index)
        self.partitions[key] = partition
        self.resting_until.pop(key, None)
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    def remove(self, partition: Partition) -> None:
        key = (partition.topic_id, partition.index)
        if self.partitions.get(key) is partition:
            del self.partitions[key]
            self.resting_until.pop(key, None)
            self.lag.pop(key, None)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._channel is not None:
            await self._channel.close()

    # --- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = self.config.fetch_backoff_ms / 1000
        while True:
            call = None
            try:
                self._channel = self.open_channel(self.address, options=CHANNEL_OPTIONS)
                stub = replica_pb2_grpc.ReplicaServiceStub(self._channel)  # type: ignore[no-untyped-call]
                call = stub.Fetch(metadata=await stream_metadata(self._channel))
                while True:
                    plan = await self._ready_partitions()
                    request = self._request(plan)
                    await call.write(request)
                    timeout = self.config.fetch_wait_max_ms / 1000 + 30
                    response = await asyncio.wait_for(call.read(), timeout)
                    if response is grpc.aio.EOF:
                        raise ConnectionError("the leader closed the replication stream")
                    self.fetches += 1
                    self._apply(plan, response)
            except asyncio.CancelledError:
                if call is not None:
                    call.cancel()
                raise
            except grpc.aio.AioRpcError as exc:
                stream_failed(self._channel, exc)
                self.last_error = f"{exc.code().name}: {exc.details()}"
                log.info(
                    "replica fetcher to broker %d (%s): %s",
                    self.leader_id,
                    self.address,
                    self.last_error,
                )
            except (ConnectionError, TimeoutError, asyncio.InvalidStateError) as exc:
                # InvalidStateError: the leader's end of the stream went away (a process
                # killed or halted) between two fetches; as expected as a refused connect.
                self.last_error = str(exc) or type(exc).__name__
                log.info(
                    "replica fetcher to broker %d (%s): %s",
                    self.leader_id,
                    self.address,
                    self.last_error,
                )
            except Exception:  # a bug must not stop replication for good: log, back off
                log.exception("replica fetcher to broker %d failed", self.leader_id)
            finally:
                if call is not None:
                    call.cancel()
                if self._channel is not None:
                    await self._channel.close()
                    self._channel = None
            await asyncio.sleep(backoff)

    async def _ready_partitions(self) -> dict[Key, tuple[Partition, int, int]]:
        """The partitions to fetch now, with the leader epoch and log end each is asked at;
        waits while there are none."""
        while True:
            now = time.monotonic()
            plan = self.plan(now)
            if plan:
                return plan
            self._wake.clear()
            wake_at = min(self.resting_until.values(), default=now + 60)
            if self.throttled_out:
                wake_at = min(wake_at, now + self.replication.follower.delay_s())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(wake_at - now, 0.001))

    def plan(self, now: float) -> dict[Key, tuple[Partition, int, int]]:
        """The partitions not resting nor held back by the follower's quota."""
        quota = self.replication.follower
        self.throttled_out = False
        plan = {}
        for key, p in self.partitions.items():
            if self.resting_until.get(key, 0) > now:
                continue
            if quota.should_throttle(p.topic, p.index, self.lag.get(key, 1) <= 0):
                self.throttled_out = True
                continue
            plan[key] = (p, p.leader_epoch, p.log.log_end_offset)
        return plan

    def _request(self, plan: dict[Key, tuple[Partition, int, int]]) -> Any:
        config = self.config
        max_wait_ms = config.fetch_wait_max_ms
        if self.throttled_out:
            # The left-out partitions may go again once the quota has paid its debt: the
            # leader's long poll must not hold them back longer than that.
            delay_ms = int(self.replication.follower.delay_s() * 1000) + 1
            max_wait_ms = min(max_wait_ms, delay_ms)
        return replica_pb2.ReplicaFetchRequest(
            replica_id=self.broker_id,
            broker_epoch=self.broker_epoch(),
            max_wait_ms=max_wait_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_response_max_bytes,
            partitions=[
                replica_pb2.ReplicaFetchRequest.Partition(
                    topic_id=topic_id,
                    partition=index,
                    current_leader_epoch=epoch,
                    fetch_offset=end,
                    last_fetched_epoch=p.log.leader_epochs.latest_epoch(),
                    log_start_offset=p.log.log_start_offset,
                    partition_max_bytes=self.replication.fetch_max_bytes,
                )
                for (topic_id, index), (p, epoch, end) in plan.items()
            ],
        )

    def _apply(self, plan: dict[Key, tuple[Partition, int, int]], response: Any) -> None:
        if response.HasField("error") and response.error.code != 0:
            raise ConnectionError(
                f"{common_pb2.ErrorCode.Name(response.error.code)}: {response.error.message}"
            )
        for item in response.partitions:
            key = (item.topic_id, item.partition)
            planned = plan.get(key)
            if planned is None:
                continue
            partition, epoch, end = planned
            if (
                self.partitions.get(key) is not partition
                or partition.leader_epoch != epoch
                or partition.log.log_end_offset != end
            ):
                continue  # the partition moved on while the fetch was out
            try:
                self._apply_one(partition, item, end)
            except ApiError as exc:
                if exc.error_name == "KAFKA_STORAGE_ERROR":
                    self._fail(partition, str(exc))
                    continue
                log.warning(
                    "replica fetch of %s from broker %d: %s", partition.name, self.leader_id, exc
                )
                self._rest(key)
            except Exception:  # a bug in one partition must not stall the others
                log.exception(
                    "unexpected error applying the fetch of %s from broker %d",
                    partition.name,
                    self.leader_id,
                )
                self._fail(partition, "unexpected error")

    def _apply_one(self, partition: Partition, item: Any, fetch_offset: int) -> None:
        key = (item.topic_id, item.partition)
        if item.HasField("error") and item.error.code != 0:
            if item.error.code == OUT_OF_RANGE:
                self._out_of_range(partition, item, fetch_offset)
            else:
                log.debug(
                    "replica fetch of %s: %s",
                    partition.name,
                    common_pb2.ErrorCode.Name(item.error.code),
                )
                self._rest(key)
            return
        if item.HasField("diverging_epoch"):
            end = partition.truncate_on_divergence(
                item.diverging_epoch.epoch, item.diverging_epoch.end_offset
            )
            log.info(
                "%s diverged from leader %d at epoch %d: truncated to %d",
                partition.name,
                self.leader_id,
                item.diverging_epoch.epoch,
                end,
            )
            return
        partition.append_as_follower(item.records, item.high_watermark, item.log_start_offset)
        self.lag[key] = max(item.high_watermark - partition.log.log_end_offset, 0)
        quota = self.replication.follower
        if item.records and quota.is_throttled(partition.topic, partition.index):
            quota.record(len(item.records))

    def _out_of_range(self, partition: Partition, item: Any, fetch_offset: int) -> None:
        if fetch_offset < item.log_start_offset:
            log.info(
                "%s is behind the leader's log start %d: starting there",
                partition.name,
                item.log_start_offset,
            )
            partition.restart_at(item.log_start_offset)
        elif fetch_offset > item.log_end_offset:
            # Only reachable without epochs to compare (KIP-101's old path): cut to the
            # leader's end.
            partition.truncate_to(item.log_end_offset)
        else:
            self._rest((item.topic_id, item.partition))

    def _fail(self, partition: Partition, why: str) -> None:
        log.error(
            "replica fetcher to broker %d: %s is marked failed and no longer fetched: %s",
            self.leader_id,
            partition.name,
            why,
        )
        self.failed += 1
        self.remove(partition)

    def _rest(self, key: Key) -> None:
        self.resting_until[key] = time.monotonic() + self.config.fetch_backoff_ms / 1000


class FetcherManager:
    """Which fetcher follows which partition: (leader, hash of the partition mod
    num.replica.fetchers), so a broker follows through at most that many streams per
    leader. A dynamic change of num.replica.fetchers re-hashes every partition and stops
    the fetchers left without one (Kafka's resizeThreadPool)."""

    def __init__(
        self,
        broker_id: int,
        config: ReplicaConfig,
        broker_epoch: Callable[[], int],
        leader_address: Callable[[int], str | None],
        replication: ReplicationSettings | None = None,
        open_channel: OpenChannel = grpc.aio.insecure_channel,
    ) -> None:
        self.broker_id = broker_id
        self.open_channel = open_channel
        self.config = config
        self.broker_epoch = broker_epoch
        self.leader_address = leader_address
        self.replication = replication or ReplicationSettings(broker_id, config)
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._of: dict[Key, ReplicaFetcher] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self.size = self.replication.num_fetchers
        self.replication.on_change.append(self.resize)

    def resize(self) -> None:
        """Applies the current num.replica.fetchers (replica.fetch.max.bytes needs nothing:
        every fetch reads it)."""
        size = self.replication.num_fetchers
        if size == self.size:
            return
        log.info("Resizing fetcher thread pool size from %d to %d", self.size, size)
        self.size = size
        followed = [f.partitions[k] for k, f in self._of.items() if k in f.partitions]
        for partition in followed:
            self.follow(partition)
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[key]
                self._stop_later(fetcher)

    def _stop_later(self, fetcher: ReplicaFetcher) -> None:
        task = asyncio.create_task(fetcher.stop())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    def follow(self, partition: Partition) -> None:
        """Puts the partition on the fetcher of its current leader (or on none, when this
        broker leads it or it has no leader)."""
        self.unfollow(partition)
        leader = partition.leader_id
        if partition.is_leader or leader < 0 or leader == self.broker_id or partition.offline:
            return
        address = self.leader_address(leader)
        if address is None:
            log.warning("no address for leader %d of %s", leader, partition.name)
            return
        index = zlib.crc32(f"{partition.topic}-{partition.index}".encode()) % max(self.size, 1)
        fetcher = self.fetchers.get((leader, index))
        if fetcher is None or fetcher.address != address:
            old = fetcher
            fetcher = self.fetchers[(leader, index)] = ReplicaFetcher(
                self.broker_id,
                leader,
                address,
                self.config,
                self.broker_epoch,
                self.replication,
                self.open_channel,
            )
            if old is not None:  # the leader came back on another address
                for moved in list(old.partitions.values()):
                    fetcher.add(moved)
                    self._of[(moved.topic_id, moved.index)] = fetcher
                self._stop_later(old)
        fetcher.add(partition)
        self._of[(partition.topic_id, partition.index)] = fetcher

    def unfollow(self, partition: Partition) -> None:
        fetcher = self._of.pop((partition.topic_id, partition.index), None)
        if fetcher is not None:
            fetcher.remove(partition)

    async def stop(self) -> None:
        await asyncio.gather(*(f.stop() for f in self.fetchers.values()), *list(self._stopping))
        self.fetchers.clear()
