"""The active controller: operations on the metadata log, run one at a time on the node's
event loop (after Kafka's QuorumController).

Every controller node runs one, over its Raft driver and its MetadataLoader; only the one
on the Raft leader is active, and an operation reaching another is refused with
NOT_CONTROLLER naming the leader. An operation reads the current image, computes records
(the pure functions of metadata/), appends them through Raft and returns once they are
committed, and so replayed into the image by the loader: the next operation sees its
effect. A controller becomes active once its image holds the first entry of its own epoch
(everything the previous leaders committed is in it); it then re-seeds the heartbeat
tracker, so brokers that died meanwhile are still fenced a session later, and runs the
periodic session check. Standby controllers replay the same log and take over without a
reload.

The first active controller of an empty metadata log appends its bootstrap records (the
--add-scram users of `strom storage format`, broker/bootstrap_checkpoint.py) in the same batch as
whatever it writes first, or on its own at the next periodic turn. Once any metadata record
is committed the log is not empty, so the next controller (which replayed that batch
before it became active) does not write its own copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from google.protobuf.message import Message

from metadata.acl_control import (
    AclBindingFilter,
    DeleteAclsResult,
    create_acls,
    delete_acls,
    describe_acls,
)
from metadata.alter_partition import (
    IsrProposal,
    IsrResult,
    allocate_producer_ids,
    alter_partition,
)
from metadata.authorizer import StandardAcl
from metadata.broker_lifecycle import (
    BrokerRegistrationRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatTracker,
    fence_broker,
    heartbeat,
    register_broker,
    restarted_uncleanly,
)
from metadata.config_control import ConfigOp, LocalConfig, incremental_alter_configs
from metadata.errors import ApiError
from metadata.image import ConfigResource, MetadataImage
from metadata.leader_election import elect_leaders, rebalance_leaders
from metadata.loader import MetadataLoader
from metadata.partition_change import Election
from metadata.reassignment import (
    OngoingReassignment,
    alter_partition_reassignments,
    complete_reassignments,
    list_partition_reassignments,
)
from metadata.records import encode
from metadata.scram_control import (
    ScramCredentialInfo,
    ScramDeletion,
    ScramUpsertion,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from metadata.topic_control import (
    CreateTopicResult,
    NewTopic,
    PartitionLimits,
    TopicDefaults,
    create_partitions,
    create_topics,
    delete_topics,
)
from raft.core import NotLeaderError
from raft.driver import RaftDriver
from raft.roles import Role
from strom_api.v1 import metadata_pb2 as pb

log = logging.getLogger("strom.controller")


@dataclass(frozen=True)
class ControllerConfig:
    """Kafka's names: broker.heartbeat.interval.ms, broker.session.timeout.ms,
    num.partitions, default.replication.factor,
    metadata.log.max.record.bytes.between.snapshots."""

    heartbeat_interval_ms: int = 2000
    session_timeout_ms: int = 9000
    num_partitions: int = 1
    default_replication_factor: int = 1
    max_bytes_between_snapshots: int = 20 * 1024 * 1024
    # auto.leader.rebalance.enable, leader.imbalance.per.broker.percentage,
    # leader.imbalance.check.interval.seconds (in ms here)
    auto_leader_rebalance: bool = True
    leader_imbalance_percentage: int = 10
    leader_imbalance_check_interval_ms: int = 300_000
    # KIP-578: max.partitions, max.broker.partitions (metadata/topic_control.py)
    max_partitions: int = PartitionLimits.max_partitions
    max_broker_partitions: int = PartitionLimits.max_broker_partitions

    @property
    def partition_limits(self) -> PartitionLimits:
        return PartitionLimits(self.max_partitions, self.max_broker_partitions)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class QuorumController:
    def __init__(
        self,
        driver: RaftDriver,
        loader: MetadataLoader,
        config: ControllerConfig | None = None,
        rng: random.Random | None = None,
        *,
        node_id: int | None = None,
        static_config: Mapping[str, str] | None = None,
        bootstrap_records: Sequence[Message] = (),
    ) -> None:
        """`node_id` and `static_config` (the node's server.properties): where a topic's
        min.insync.replicas and unclean.leader.election.enable come from when neither the
        topic nor a dynamic broker config sets them, as on the brokers (Kafka's
        ConfigurationControlManager reads the controller's own static config the same
        way; in a combined node and in deploy/k8s it is the brokers' file).
        `bootstrap_records`: this node's bootstrap checkpoint, for an empty log."""
        self.driver = driver
        self.loader = loader
        self.config = config or ControllerConfig()
        self.local = LocalConfig(node_id, dict(static_config or {}))
        self.rng = rng or random.Random()
        self.tracker = HeartbeatTracker(self.config.session_timeout_ms)
        self._lock = asyncio.Lock()  # one operation at a time
        self._active_epoch = -1  # the Raft epoch we last became active in
        self._task: asyncio.Task[None] | None = None
        self.unclean_elections = 0  # leaders this controller chose from outside the ISR
        self.bootstrap_records = list(bootstrap_records)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._periodic())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    def is_active(self) -> bool:
        """Leader, and the image holds its epoch's first entry (all before it, too)."""
        core = self.driver.core
        if core is None or core.role is not Role.LEADER:
            return False
        if self.loader.image.epoch != core.epoch:
            return False
        if self._active_epoch != core.epoch:
            # Newly active: heartbeats seen by an earlier controller are unknown here.
            self._active_epoch = core.epoch
            self.tracker.reseed(self.loader.image, _now_ms())
        return True

    def _require_active(self) -> None:
        if not self.is_active():
            leader = self.driver.core.leader_id if self.driver.core is not None else -1
            raise ApiError(
                "NOT_CONTROLLER",
                f"This node is not the active controller; the Raft leader is {leader}.",
            )

    def _bootstrap_due(self) -> list[Message]:
        """The bootstrap records, while the log (as far as committed) holds no metadata
        record; called with the lock held by the active controller, whose image holds
        everything earlier leaders committed."""
        return self.bootstrap_records if self.loader.log_empty else []

    async def _commit(self, records: Sequence[Message]) -> int:
        """Appends and waits for commit (and so for the loader's replay); returns the
        offset of the first record. The bootstrap records, when due, go first in the same
        batch."""
        batch = [*self._bootstrap_due(), *records]
        if not batch:
            return self.loader.image.offset
        try:
            last = await self.driver.append([encode(r) for r in batch])
        except NotLeaderError as exc:
            raise ApiError(
                "NOT_CONTROLLER",
                f"Leadership moved to {exc.leader.leader_id} before the change committed.",
            ) from None
        self.unclean_elections += sum(
            1
            for r in records
            if isinstance(r, pb.PartitionChangeRecord)
            and r.HasField("leader_recovery_state")
            and r.leader_recovery_state == pb.RECOVERING
        )
        return last - len(records) + 1

    # --- operations ------------------------------------------------------------------------

    async def create_topics(self, topics: Sequence[NewTopic]) -> list[CreateTopicResult]:
        async with self._lock:
            self._require_active()
            defaults = TopicDefaults(
                self.config.num_partitions, self.config.default_replication_factor
            )
            records, results = create_topics(
                self.image,
                topics,
                defaults=defaults,
                limits=self.config.partition_limits,
                start=self.rng.randrange(1 << 16),
            )
            await self._commit(records)
            return results

    async def delete_topics(self, names: Sequence[str]) -> dict[str, ApiError | None]:
        async with self._lock:
            self._require_active()
            records, results = delete_topics(self.image, names)
            await self._commit(records)
            return results

    async def create_partitions(
        self, name: str, count: int, assignments: Sequence[Sequence[int]] | None = None
    ) -> None:
        async with self._lock:
            self._require_active()
            records = create_partitions(
                self.image,
                name,
                count,
                assignments,
                limits=self.config.partition_limits,
                start=self.rng.randrange(1 << 16),
            )
            await self._commit(records)

    async def register_broker(self, request: BrokerRegistrationRequest) -> int:
        """Registers a broker; returns its broker epoch (the offset of its record)."""
        async with self._lock:
            self._require_active()
            core = self.driver.core
            assert core is not None
            # No other append is in flight (one operation at a time), so the record goes
            # at the log end (after the bootstrap records, when they go first).
            offset = core.log.end_offset() + len(self._bootstrap_due())
            unclean = restarted_uncleanly(self.image, request)
            records, epoch = register_broker(
                self.image, self.tracker, request, offset, _now_ms(), self.local
            )
            if unclean:
                log.warning(
                    "Broker %d registered after an unclean shutdown (previous broker epoch "
                    "%d, registered as %d): it leaves every ISR and ELR where another "
                    "replica can lead",
                    request.broker_id,
                    request.previous_broker_epoch,
                    self.image.cluster.brokers[request.broker_id].epoch,
                )
            first = await self._commit(records)
            if records and first != offset:  # no records: the registration it already has
                raise ApiError(
                    "UNKNOWN_SERVER_ERROR",
                    f"broker {request.broker_id}'s registration landed at {first}, not {offset}",
                )
            return epoch

    async def broker_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        # The broker is alive now, whatever waits ahead of it for the lock: a slow commit
        # (a registration, a fencing, Raft waiting on a disk) must not let its session run
        # out meanwhile. Kafka too notes contact when the heartbeat arrives, outside its
        # event queue (BrokerHeartbeatTracker), after brokers were fenced under load.
        broker = self.image.cluster.brokers.get(request.broker_id)
        if broker is not None and broker.epoch == request.broker_epoch and self.is_active():
            self.tracker.touch(request.broker_id, _now_ms())
        async with self._lock:
            self._require_active()
            records, response = heartbeat(self.image, self.tracker, request, _now_ms(), self.local)
            await self._commit(records)
            return response

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, proposals: Sequence[IsrProposal]
    ) -> list[IsrResult]:
        async with self._lock:
            self._require_active()
            records, results = alter_partition(
                self.image, broker_id, broker_epoch, proposals, self.local
            )
            await self._commit(records)
            # An ISR that grew may finish a reassignment (its new replicas caught up); only
            # then is it worth scanning the partitions for one.
            if any(r.registration is not None and r.registration.adding_replicas for r in results):
                await self._commit(complete_reassignments(self.image, self.local))
            return results

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """A block of producer ids for the broker: (first id, count)."""
        async with self._lock:
            self._require_active()
            record, first = allocate_producer_ids(self.image, broker_id, broker_epoch)
            await self._commit([record])
            return first, record.next_producer_id - first

    async def elect_leaders(
        self, partitions: Sequence[tuple[str, int]] | None, election: Election
    ) -> dict[tuple[str, int], ApiError | None]:
        async with self._lock:
            self._require_active()
            records, results = elect_leaders(self.image, partitions, election, self.local)
            await self._commit(records)
            return results

    async def alter_partition_reassignments(
        self, requests: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], ApiError | None]:
        async with self._lock:
            self._require_active()
            records, results = alter_partition_reassignments(self.image, requests, self.local)
            await self._commit(records)
            return results

    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], OngoingReassignment]:
        self._require_active()
        return list_partition_reassignments(self.image, partitions)

    async def incremental_alter_configs(
        self, changes: Sequence[tuple[ConfigResource, Sequence[ConfigOp]]], validate_only: bool
    ) -> dict[ConfigResource, ApiError | None]:
        async with self._lock:
            self._require_active()
            records, results = incremental_alter_configs(self.image, changes, validate_only)
            await self._commit(records)
            return results

    async def create_acls(self, acls: Sequence[StandardAcl]) -> list[ApiError | None]:
        async with self._lock:
            self._require_active()
            records, results = create_acls(self.image, acls)
            await self._commit(records)
            return results

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[DeleteAclsResult]:
        async with self._lock:
            self._require_active()
            records, results = delete_acls(self.image, filters)
            await self._commit(records)
            return results

    def describe_acls(self, acl_filter: AclBindingFilter) -> list[StandardAcl]:
        """From this controller's own image, as DescribeConfigs (Kafka answers from a
        broker's authorizer cache). A client that just changed ACLs reads its change:
        brokers forward to the active controller, and the tools' ControllerClient asks the
        active controller first once it knows it."""
        return describe_acls(self.image, acl_filter)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[tuple[str, ApiError | None]]:
        async with self._lock:
            self._require_active()
            records, results = alter_user_scram_credentials(self.image, deletions, upsertions)
            await self._commit(records)
            return results

    def describe_user_scram_credentials(
        self, users: Sequence[str] | None
    ) -> dict[str, list[ScramCredentialInfo] | ApiError]:
        """From this controller's own image, active or not (as Kafka's brokers answer it
        from theirs)."""
        return describe_user_scram_credentials(self.image, users)

    # --- timers ----------------------------------------------------------------------------

    async def fence_expired_brokers(self) -> list[int]:
        async with self._lock:
            if not self.is_active():
                return []
            expired = self.tracker.expired(self.image, _now_ms())
            for broker_id in expired:
                await self._commit(fence_broker(self.image, broker_id, self.local))
            return expired

    async def write_bootstrap(self) -> None:
        """The bootstrap records of an empty log, when no operation wrote them yet."""
        async with self._lock:
            if self.is_active() and self._bootstrap_due():
                await self._commit([])

    async def maybe_snapshot(self) -> None:
        """Every node snapshots its own image once enough has been written since the last
        (Kafka's metadata.log.max.record.bytes.between.snapshots)."""
        if self.loader.bytes_since_snapshot < self.config.max_bytes_between_snapshots:
            return
        end, records = self.loader.snapshot()
        if end > 0:
            await self.driver.create_snapshot(end, records)

    async def rebalance_leaders(self) -> int:
        """Preferred elections where a broker leads too few of the partitions it prefers
        (auto.leader.rebalance.enable); returns how many partitions moved."""
        async with self._lock:
            if not self.is_active():
                return 0
            records = rebalance_leaders(
                self.image, self.config.leader_imbalance_percentage, self.local
            )
            await self._commit(records)
            return len(records)

    async def _periodic(self) -> None:
        interval = max(self.config.heartbeat_interval_ms // 4, 10) / 1000
        next_rebalance = _now_ms() + self.config.leader_imbalance_check_interval_ms
        while True:
            await asyncio.sleep(interval)
            try:
                await self.write_bootstrap()
                await self.fence_expired_brokers()
                await self.maybe_snapshot()
                if self.config.auto_leader_rebalance and _now_ms() >= next_rebalance:
                    next_rebalance = _now_ms() + self.config.leader_imbalance_check_interval_ms
                    await self.rebalance_leaders()
            except ApiError:
                pass  # lost leadership meanwhile: the next controller takes over
