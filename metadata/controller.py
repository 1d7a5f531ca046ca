"""The active controller: operations on the metadata log, pipelined on the node's event loop
(after Kafka's QuorumController).

Every controller node runs one, over its Raft driver and its MetadataLoader; only the one
on the Raft leader is active, and an operation reaching another is refused with
NOT_CONTROLLER naming the leader. The rules live in metadata/controller_core.py (sans-I/O,
the same class the controller simulator runs); this module is its asyncio pump. An
operation computes records (the pure functions of metadata/) against the committed image
with every pending write applied, appends them through Raft as one batch without waiting
for earlier writes to commit, and returns once its records are committed (and so replayed
into the image by the loader); the core learns of commits and leader changes from the
loader's notifications. On loss of leadership every pending operation fails with
NOT_CONTROLLER. A controller becomes active once its image holds the first entry of its
own epoch (everything the previous leaders committed is in it); it then re-seeds the
heartbeat tracker, so brokers that died meanwhile are still fenced a session later, and
runs the periodic session check. Standby controllers replay the same log and take over
without a reload.

The first active controller of an empty metadata log appends its bootstrap records (the
--add-scram users of `strom storage format`, server/bootstrap_checkpoint.py) in the same batch as
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
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

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
    alter_partition_completing_reassignments,
)
from metadata.authorizer import StandardAcl
from metadata.broker_lifecycle import (
    BrokerRegistrationRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatTracker,
    fence_broker,
    heartbeat,
    leaders_for_offline,
    may_lead,
    register_broker,
    restarted_uncleanly,
)
from metadata.config_control import ConfigOp, LocalConfig, incremental_alter_configs
from metadata.controller_core import ControllerCore, ControllerCoreError, PendingWrite
from metadata.errors import ApiError
from metadata.image import ConfigResource, MetadataImage
from metadata.leader_election import elect_leaders, rebalance_leaders
from metadata.loader import MetadataLoader
from metadata.partition_change import Election
from metadata.partition_counts import PartitionCounts
from metadata.reassignment import (
    OngoingReassignment,
    alter_partition_reassignments,
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
from raft.messages import LeaderAndEpoch
from raft.roles import Role
from strom_api.error_codes import ErrorCode
from strom_api.v1 import metadata_pb2 as pb

log = logging.getLogger("strom.controller")
T = TypeVar("T")

# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: the most metadata records one user
# operation (an admin request) may write; beyond it Kafka answers POLICY_VIOLATION with
# EXCESSIVE_BATCH. The controller's service refuses requests naming more items than this
# (server/controller_service.py), each item being a record at least.
MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."


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
    # unclean.leader.election.interval.ms: how often leaderless partitions are given a leader
    # where unclean.leader.election.enable now allows one (Kafka 3.9's KAFKA-12670): a topic
    # enabled after its partition went offline needs no broker event to recover.
    unclean_leader_election_interval_ms: int = 300_000
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
        self.core = ControllerCore()
        # The caller of each pending write waits on its future; the core decides when.
        self._waiting: dict[PendingWrite[object], asyncio.Future[None]] = {}
        self._appends: set[asyncio.Task[None]] = set()  # kept referenced until they end
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.unclean_elections = 0  # leaders this controller chose from outside the ISR
        self.bootstrap_records = list(bootstrap_records)
        # The cluster-wide partition gauges, moved by each delta (a scrape walks nothing).
        self.partition_counts = PartitionCounts.of(loader.image)
        loader.publishers.append(self.partition_counts.publish)
        loader.publishers.append(lambda _delta, _image: self._sync())
        loader.leader_listeners.append(self._on_leader_change)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._periodic())

    async def stop(self) -> None:
        """No more operations; those still pending fail with NOT_CONTROLLER now (their
        records may still commit), not when the Raft driver stops after the servers."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._fail(self.core.renounce(), -1)

    @property
    def image(self) -> MetadataImage:
        """The committed image (what reads answer from)."""
        return self.loader.image

    def is_active(self) -> bool:
        """Leader, and the image holds its epoch's first entry (all before it, too)."""
        if self._stopped:
            return False
        self._sync()
        return self.core.active

    def _require_active(self) -> None:
        if not self.is_active():
            leader = self.driver.core.leader_id if self.driver.core is not None else -1
            raise ApiError(
                ErrorCode.NOT_CONTROLLER,
                f"This node is not the active controller; the Raft leader is {leader}.",
            )

    # --- the pump ----------------------------------------------------------------------------

    def _sync(self) -> None:
        """Tells the core the Raft state and the committed image (after every commit and
        leader change, and before every operation), and settles what it decided."""
        raft = self.driver.core
        if raft is None or self._stopped:
            return
        update = self.core.update(raft.role is Role.LEADER, raft.epoch, self.loader.image)
        if update.activated:
            # Newly active: heartbeats seen by an earlier controller are unknown here.
            self.tracker.reseed(self.loader.image, _now_ms())
        for pending in update.completed:
            self.unclean_elections += sum(
                1
                for r in pending.records
                if isinstance(r, pb.PartitionChangeRecord)
                and r.HasField("leader_recovery_state")
                and r.leader_recovery_state == pb.RECOVERING
            )
            self._settle(pending, None)
        if update.failed:
            self._fail(update.failed, raft.leader_id)

    def _on_leader_change(self, leader: LeaderAndEpoch) -> None:
        self._sync()

    def _settle(self, pending: PendingWrite[object], error: ApiError | None) -> None:
        future = self._waiting.pop(pending, None)
        if future is None or future.done():
            return
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)

    def _fail(self, failed: Sequence[PendingWrite[object]], leader: int) -> None:
        for pending in failed:
            self._settle(
                pending,
                ApiError(
                    ErrorCode.NOT_CONTROLLER,
                    f"Leadership moved (the Raft leader is {leader}) before the change committed.",
                ),
            )

    def _bootstrap_due(self) -> list[Message]:
        """The bootstrap records, while the log (as far as committed) holds no metadata
        record and no write is pending (the first write carries them)."""
        return self.bootstrap_records if self.loader.log_empty and not self.core.pending else []

    def _submit(self, records: Sequence[Message], response: T) -> Awaitable[T]:
        """Writes one operation's records (the bootstrap records first, when due) to the core
        and hands them to Raft as one batch, before the caller computes anything else (the
        records were computed against `self.core.image` with no await since). Resolves to
        `response` once they, and every write before them, are committed."""
        core = self.core
        batch = [*self._bootstrap_due(), *records]
        pending = core.write(batch, response)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if core.is_complete(pending):
            done.set_result(None)
        else:
            self._waiting[pending] = done  # type: ignore[index]
            if batch:
                # Tasks start in the order they are made, so the batches reach the
                # driver's queue in the order the core gave them offsets.
                task = asyncio.ensure_future(self._append(pending, [encode(r) for r in batch]))
                self._appends.add(task)
                task.add_done_callback(self._appends.discard)
        return self._answer(done, response)

    async def _write(self, records: Sequence[Message], response: T) -> T:
        return await self._submit(records, response)

    @staticmethod
    async def _answer(done: asyncio.Future[None], response: T) -> T:
        await done
        return response

    async def _append(self, pending: PendingWrite[T], data: list[bytes]) -> None:
        """The append of one write; its caller waits for the core to see it committed."""
        try:
            last = await self.driver.append(data)
            self.core.appended(pending, last)
        except NotLeaderError as exc:
            self._sync()
            if self.core.epoch == pending.epoch:  # the driver refused, yet Raft still leads
                self._fail(self.core.renounce(), exc.leader.leader_id)
        except ControllerCoreError as exc:
            log.error("Controller writes out of step with the metadata log: %s", exc)
            if self.core.epoch == pending.epoch:
                self._fail(self.core.renounce(), -1)

    # --- operations ------------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[NewTopic], validate_only: bool = False
    ) -> list[CreateTopicResult]:
        """With `validate_only` (Kafka's validateOnly) every check is made and each topic
        answered as if created, and nothing is written."""
        self._require_active()
        defaults = TopicDefaults(self.config.num_partitions, self.config.default_replication_factor)
        records, results = create_topics(
            self.core.image,
            topics,
            defaults=defaults,
            limits=self.config.partition_limits,
            start=self.rng.randrange(1 << 16),
        )
        if validate_only:
            return results
        return await self._write(records, results)

    async def delete_topics(self, names: Sequence[str]) -> dict[str, ApiError | None]:
        self._require_active()
        records, results = delete_topics(self.core.image, names)
        return await self._write(records, results)

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> None:
        self._require_active()
        records = create_partitions(
            self.core.image,
            name,
            count,
            assignments,
            limits=self.config.partition_limits,
            start=self.rng.randrange(1 << 16),
        )
        if not validate_only:
            await self._write(records, None)

    async def register_broker(self, request: BrokerRegistrationRequest) -> int:
        """Registers a broker; returns its broker epoch (the offset of its record)."""
        self._require_active()
        image = self.core.image
        # The core knows where the record goes: after every pending write, and after the
        # bootstrap records when they go first in the same batch.
        offset = self.core.next_offset + len(self._bootstrap_due())
        unclean = restarted_uncleanly(image, request)
        records, epoch = register_broker(
            image, self.tracker, request, offset, _now_ms(), self.local
        )
        if unclean:
            log.warning(
                "Broker %d registered after an unclean shutdown (previous broker epoch "
                "%d, registered as %d): it leaves every ISR and ELR where another "
                "replica can lead",
                request.broker_id,
                request.previous_broker_epoch,
                image.cluster.brokers[request.broker_id].epoch,
            )
        return await self._write(records, epoch)

    async def broker_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        # The broker is alive now, whatever waits ahead of it to commit: a slow commit
        # (a registration, a fencing, Raft waiting on a disk) must not let its session run
        # out meanwhile. Kafka too notes contact when the heartbeat arrives, outside its
        # event queue (BrokerHeartbeatTracker), after brokers were fenced under load.
        broker = self.image.cluster.brokers.get(request.broker_id)
        if broker is not None and broker.epoch == request.broker_epoch and self.is_active():
            self.tracker.touch(request.broker_id, _now_ms())
        self._require_active()
        records, response = heartbeat(self.core.image, self.tracker, request, _now_ms(), self.local)
        return await self._write(records, response)

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, proposals: Sequence[IsrProposal]
    ) -> list[IsrResult]:
        self._require_active()
        records, results = alter_partition_completing_reassignments(
            self.core.image, broker_id, broker_epoch, proposals, self.local
        )
        return await self._write(records, results)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """A block of producer ids for the broker: (first id, count)."""
        self._require_active()
        record, first = allocate_producer_ids(self.core.image, broker_id, broker_epoch)
        return await self._write([record], (first, record.next_producer_id - first))

    async def elect_leaders(
        self, partitions: Sequence[tuple[str, int]] | None, election: Election
    ) -> dict[tuple[str, int], ApiError | None]:
        self._require_active()
        records, results = elect_leaders(self.core.image, partitions, election, self.local)
        return await self._write(records, results)

    async def alter_partition_reassignments(
        self,
        requests: Mapping[tuple[str, int], Sequence[int] | None],
        keep_replication_factor: bool = False,
    ) -> dict[tuple[str, int], ApiError | None]:
        self._require_active()
        records, results = alter_partition_reassignments(
            self.core.image, requests, self.local, keep_replication_factor
        )
        return await self._write(records, results)

    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], OngoingReassignment]:
        self._require_active()
        return list_partition_reassignments(self.image, partitions)

    async def incremental_alter_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Sequence[ConfigOp]]],
        validate_only: bool,
        replace: bool = False,
    ) -> dict[ConfigResource, ApiError | None]:
        self._require_active()
        records, results = incremental_alter_configs(
            self.core.image, changes, validate_only, replace
        )
        return await self._write(records, results)

    async def create_acls(self, acls: Sequence[StandardAcl]) -> list[ApiError | None]:
        self._require_active()
        records, results = create_acls(self.core.image, acls)
        return await self._write(records, results)

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[DeleteAclsResult]:
        self._require_active()
        records, results = delete_acls(self.core.image, filters)
        return await self._write(records, results)

    def describe_acls(self, acl_filter: AclBindingFilter) -> list[StandardAcl]:
        """From this controller's own image, as DescribeConfigs (Kafka answers from a
        broker's authorizer cache). A client that just changed ACLs reads its change:
        brokers forward to the active controller, and the tools' ControllerClient asks the
        active controller first once it knows it."""
        return describe_acls(self.image, acl_filter)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[tuple[str, ApiError | None]]:
        self._require_active()
        records, results = alter_user_scram_credentials(self.core.image, deletions, upsertions)
        return await self._write(records, results)

    def describe_user_scram_credentials(
        self, users: Sequence[str] | None
    ) -> dict[str, list[ScramCredentialInfo] | ApiError]:
        """From this controller's own image, active or not (as Kafka's brokers answer it
        from theirs)."""
        return describe_user_scram_credentials(self.image, users)

    # --- timers ----------------------------------------------------------------------------

    async def fence_expired_brokers(self) -> list[int]:
        if not self.is_active():
            return []
        expired = self.tracker.expired(self.core.image, _now_ms())
        # Each fencing its own write, computed on the one before it, all in flight at once.
        writes = []
        for broker_id in expired:
            writes.append(self._submit(fence_broker(self.core.image, broker_id, self.local), None))
        await asyncio.gather(*writes)
        return expired

    async def write_bootstrap(self) -> None:
        """The bootstrap records of an empty log, when no operation wrote them yet."""
        if self.is_active() and self._bootstrap_due():
            await self._write([], None)

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
        if not self.is_active():
            return 0
        records = rebalance_leaders(
            self.core.image, self.config.leader_imbalance_percentage, self.local
        )
        return await self._write(records, len(records))

    async def elect_unclean_leaders(self) -> int:
        """Leaders for leaderless partitions wherever one may now lead, unclean where the
        topic allows it (Kafka's periodic maybeAdjustPartitionLeaders); returns how many
        partitions got one."""
        if not self.is_active():
            return 0
        image = self.core.image
        records = leaders_for_offline(image, may_lead(image), self.local)
        return await self._write(records, len(records))

    async def _periodic(self) -> None:
        interval = max(self.config.heartbeat_interval_ms // 4, 10) / 1000
        next_rebalance = _now_ms() + self.config.leader_imbalance_check_interval_ms
        next_unclean = _now_ms() + self.config.unclean_leader_election_interval_ms
        while not self._stopped:  # as well as stop()'s cancel, which an await may drop
            await asyncio.sleep(interval)
            try:
                await self.write_bootstrap()
                await self.fence_expired_brokers()
                await self.maybe_snapshot()
                if self.config.auto_leader_rebalance and _now_ms() >= next_rebalance:
                    next_rebalance = _now_ms() + self.config.leader_imbalance_check_interval_ms
                    await self.rebalance_leaders()
                if _now_ms() >= next_unclean:
                    next_unclean = _now_ms() + self.config.unclean_leader_election_interval_ms
                    await self.elect_unclean_leaders()
            except ApiError:
                pass  # lost leadership meanwhile: the next controller takes over
