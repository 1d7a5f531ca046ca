"""A consumer's side of its group (Kafka's ConsumerCoordinator), on the client's loop.

The coordinator is found with FindCoordinator. Joining follows the classic protocol:
JoinGroup (again with the id a MEMBER_ID_REQUIRED answer gave), then SyncGroup, where the
leader sends the assignment its chosen assignor computed from every member's
subscription. A heartbeat task keeps the membership while the consumer polls; a
REBALANCE_IN_PROGRESS answer, a new generation or a lost coordinator makes the next poll
rejoin. Through a rebalance the heartbeats go on until that poll (KIP-62), so a consumer busy
with its records keeps its place for up to max.poll.interval.ms, not session.timeout.ms.
Listener callbacks run in the consumer's own thread: the consumer drives the steps
(`needs_rejoin` -> revoke -> `join` -> assign) so a listener may commit.

With an eager assignor every partition is given up before rejoining; with
cooperative-sticky only those the new assignment moves away, and then the group
rebalances once more to hand them to their new owner (KIP-429).

The leader assigns from fresh metadata of every topic some member subscribes to and keeps
those partition counts (Kafka's assignment snapshot); the consumer hands it each newer
metadata (`metadata_changed`, at least every metadata.max.age.ms), and a count that changed
(partitions added to a topic, a subscribed topic created or deleted) makes it rejoin, which
rebalances the whole group onto the new partitions, as Kafka's ConsumerCoordinator does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from strom.assignors import (
    COOPERATIVE,
    Assignment,
    Assignor,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from strom.cluster import Cluster
from strom.errors import (
    AuthorizationError,
    ErrorName,
    StromError,
    error_for,
    error_name,
    from_pb,
)
from strom.fetcher import TopicPartition
from strom_api.error_codes import ErrorCode
from strom_api.v1 import client_pb2

log = logging.getLogger("strom.group")

_COORDINATOR_GONE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
_REJOIN = frozenset({ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION})
_RESET = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID})


class CommitFailedError(StromError):
    """Kafka's CommitFailedException: the group rebalanced, so this member's offsets for
    partitions it may no longer own were not committed."""

    def __init__(self, name: ErrorName, message: str) -> None:
        super().__init__(
            name,
            f"Commit cannot be completed since the group has already rebalanced and assigned "
            f"the partitions to another member ({message}). Poll again to rejoin.",
        )


@dataclass(frozen=True)
class AssignmentSnapshot:
    """What the leader assigned from (Kafka's MetadataSnapshot): every topic some member
    subscribes to, and the partition counts of those that exist."""

    topics: frozenset[str]
    counts: dict[str, int]

    def counts_of(self, counts: dict[str, int]) -> dict[str, int]:
        return {topic: n for topic, n in counts.items() if topic in self.topics}


@dataclass(frozen=True)
class GroupSettings:
    group_id: str
    group_instance_id: str | None
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # max.poll.interval.ms
    heartbeat_interval_ms: int
    assignors: tuple[Assignor, ...]
    request_timeout_ms: int
    retry_backoff_ms: int


class GroupMembership:
    def __init__(
        self,
        cluster: Cluster,
        settings: GroupSettings,
        topics: Callable[[], Sequence[str]],
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.topics = topics
        self.coordinator: int = -1
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.owned: set[TopicPartition] = set()
        self.rejoin = True
        self.last_poll = time.monotonic()
        # Only the leader watches for metadata changes, as in Kafka: None on the others.
        self.assignment_snapshot: AssignmentSnapshot | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self.cooperative = all(a.protocol == COOPERATIVE for a in settings.assignors)

    # --- coordinator -----------------------------------------------------------------

    def _timeout(self) -> float:
        return self.settings.request_timeout_ms / 1000

    async def _find_coordinator(self, deadline: float) -> int:
        request = client_pb2.FindCoordinatorRequest(key=self.settings.group_id)
        last = "no broker answered"
        while time.monotonic() < deadline:
            if not self.cluster.brokers:
                try:
                    await self.cluster.refresh()
                except StromError as exc:
                    last = str(exc)
            for address in list(
                dict.fromkeys([*self.cluster.brokers.values(), *self.cluster.bootstrap])
            ):
                try:
                    response = await self.cluster.stub_for(address).FindCoordinator(
                        request, timeout=self._timeout()
                    )
                except grpc.aio.AioRpcError as exc:
                    last = f"{address}: {exc.code().name}"
                    continue
                if response.error.code == 0:
                    self.cluster.brokers.setdefault(
                        response.node_id, f"{response.host}:{response.port}"
                    )
                    self.coordinator = int(response.node_id)
                    return self.coordinator
                refused = from_pb(response.error)
                if isinstance(refused, AuthorizationError):
                    raise refused  # not DESCRIBE on the group: no use asking again
                last = f"{error_name(response.error.code)}: {response.error.message}"
                break
            await asyncio.sleep(self.settings.retry_backoff_ms / 1000)
        raise StromError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"no coordinator for group '{self.settings.group_id}': {last}",
            True,
        )

    async def _call(self, method: str, request: object, deadline: float) -> Any:
        """Calls the coordinator, finding it (again) while it moves."""
        while True:
            if self.coordinator < 0:
                await self._find_coordinator(deadline)
            try:
                response = await getattr(self.cluster.stub(self.coordinator), method)(
                    request,
                    timeout=max(self._timeout(), self.settings.rebalance_timeout_ms / 1000 + 5),
                )
            except (grpc.aio.AioRpcError, StromError) as exc:
                log.debug("%s to coordinator %d failed: %s", method, self.coordinator, exc)
                self.coordinator = -1
                if time.monotonic() > deadline:
                    raise StromError(
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{method} failed: {exc}", True
                    ) from None
                await asyncio.sleep(self.settings.retry_backoff_ms / 1000)
                continue
            name = error_name(response.error.code) if response.HasField("error") else ErrorCode.NONE
            if name in _COORDINATOR_GONE and time.monotonic() < deadline:
                self.coordinator = -1
                await asyncio.sleep(self.settings.retry_backoff_ms / 1000)
                continue
            return response

    # --- joining ---------------------------------------------------------------------

    def to_revoke_before_join(self) -> set[TopicPartition]:
        return set() if self.cooperative else set(self.owned)

    def group_topics(self) -> frozenset[str]:
        """The topics whose metadata this member watches for the group: on the leader every
        topic some member subscribes to, elsewhere none."""
        snapshot = self.assignment_snapshot
        return snapshot.topics if snapshot is not None else frozenset()

    def metadata_changed(self, counts: dict[str, int]) -> bool:
        """Given newer partition counts (of at least `group_topics()`), whether the leader's
        assignment no longer covers the group's partitions; if so, the next poll rejoins."""
        snapshot = self.assignment_snapshot
        if snapshot is None or self.rejoin:
            return False
        now = snapshot.counts_of(counts)
        if now == snapshot.counts:
            return False
        log.info(
            "group %s: rejoining to rebalance: the partition counts of the subscribed topics "
            "changed from %s at the last assignment to %s",
            self.settings.group_id,
            snapshot.counts,
            now,
        )
        self.rejoin = True
        return True

    async def join(self) -> tuple[set[TopicPartition], set[TopicPartition]]:
        """One rebalance: returns (assigned now, revoked now). Eager: revoked is what was
        owned (already given up by the caller); cooperative: what the new assignment took
        away, and then another rebalance is due."""
        deadline = time.monotonic() + self.settings.rebalance_timeout_ms / 1000 + self._timeout()
        # The JoinGroup in flight keeps the member in the group now (the coordinator does
        # not expire a member while it waits in a join), as Kafka's heartbeat thread stops
        # once its consumer starts to rejoin.
        if self._heartbeat is not None and self._heartbeat is not asyncio.current_task():
            self._heartbeat.cancel()
        if not self.cooperative:
            self.owned = set()
        while True:
            subscription = Subscription(
                tuple(sorted(self.topics())),
                tuple(sorted(self.owned)),
                self.generation,
            )
            request = client_pb2.JoinGroupRequest(
                group_id=self.settings.group_id,
                session_timeout_ms=self.settings.session_timeout_ms,
                rebalance_timeout_ms=self.settings.rebalance_timeout_ms,
                member_id=self.member_id,
                group_instance_id=self.settings.group_instance_id or "",
                protocol_type="consumer",
                protocols=[
                    client_pb2.JoinGroupRequest.Protocol(
                        name=a.name, metadata=encode_subscription(subscription)
                    )
                    for a in self.settings.assignors
                ],
                client_id=self.settings.client_id,
            )
            response = await self._call("JoinGroup", request, deadline)
            name = error_name(response.error.code)
            if name == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = response.member_id
                continue
            if name in _RESET:
                self.member_id, self.generation = "", -1
                if time.monotonic() > deadline:
                    raise from_pb(response.error)
                continue
            if name == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if name != ErrorCode.NONE:
                raise from_pb(response.error)
            join = response
            break
        self.member_id = join.member_id
        generation = join.generation_id
        protocol = join.protocol_name
        assignments: list[client_pb2.SyncGroupRequest.Assignment] = []
        self.assignment_snapshot = None
        if join.leader == self.member_id:
            assignments = await self._lead(protocol, join.members)
        sync = await self._call(
            "SyncGroup",
            client_pb2.SyncGroupRequest(
                group_id=self.settings.group_id,
                generation_id=generation,
                member_id=self.member_id,
                group_instance_id=self.settings.group_instance_id or "",
                protocol_type="consumer",
                protocol_name=protocol,
                assignments=assignments,
            ),
            deadline,
        )
        name = error_name(sync.error.code)
        if name in _RESET:
            self.member_id, self.generation = "", -1
        if name != ErrorCode.NONE:
            self.rejoin = True
            raise from_pb(sync.error)
        self.generation, self.protocol = generation, protocol
        assignment = decode_assignment(sync.assignment)
        new = {TopicPartition(t, p) for t, p in assignment.partitions}
        revoked = self.owned - new
        self.owned = new
        # Cooperative: partitions given up must reach their new owner in another round.
        self.rejoin = bool(revoked) and self.cooperative
        self.last_poll = time.monotonic()
        self._start_heartbeat()
        log.info(
            "group %s: generation %d, member %s, assigned %s",
            self.settings.group_id,
            generation,
            self.member_id,
            sorted(new),
        )
        return new, revoked

    async def _lead(
        self, protocol: str, members: Sequence[Any]
    ) -> list[client_pb2.SyncGroupRequest.Assignment]:
        """The leader's assignment, from fresh metadata of every member's topics (Kafka's
        leader also asks for the topics only other members subscribe to); topics that do not
        exist get no partitions until a later metadata change brings them."""
        assignor = next(a for a in self.settings.assignors if a.name == protocol)
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        wanted = {t for s in subscriptions.values() for t in s.topics}
        try:
            await self.cluster.refresh(wanted)
        except StromError as exc:
            log.info("group %s: assigning from cached metadata: %s", self.settings.group_id, exc)
        snapshot = AssignmentSnapshot(frozenset(wanted), self.cluster.partition_counts(wanted))
        self.assignment_snapshot = snapshot
        plan = assignor.assign(snapshot.counts, subscriptions)
        return [
            client_pb2.SyncGroupRequest.Assignment(
                member_id=member, assignment=encode_assignment(Assignment(tuple(tps)))
            )
            for member, tps in plan.items()
        ]

    # --- staying in -------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.create_task(self._beat())

    async def _beat(self) -> None:
        """Heartbeats until the member's generation ends. A REBALANCE_IN_PROGRESS answer
        asks the consumer to rejoin at its next poll, and the heartbeats go on until then
        (KIP-62): a consumer busy with its records for longer than session.timeout.ms keeps
        its place in the rebalance, up to max.poll.interval.ms, instead of being expelled."""
        interval = self.settings.heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if time.monotonic() - self.last_poll > self.settings.rebalance_timeout_ms / 1000:
                # Kafka: a consumer that stops polling for max.poll.interval.ms leaves so
                # the others can take its partitions.
                log.warning(
                    "group %s: poll() not called for max.poll.interval.ms=%d; leaving the group",
                    self.settings.group_id,
                    self.settings.rebalance_timeout_ms,
                )
                await self.leave()
                return
            if self.coordinator < 0:
                try:
                    await self._find_coordinator(time.monotonic() + interval * 3)
                except StromError:
                    continue
            request = client_pb2.HeartbeatRequest(
                group_id=self.settings.group_id,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.settings.group_instance_id or "",
            )
            try:
                response = await self.cluster.stub(self.coordinator).Heartbeat(
                    request, timeout=self._timeout()
                )
            except (grpc.aio.AioRpcError, StromError):
                self.coordinator = -1
                continue
            name = error_name(response.error.code)
            if name == ErrorCode.REBALANCE_IN_PROGRESS:
                self.rejoin = True
            elif name in _REJOIN:  # the generation is over: nothing left to keep alive
                self.rejoin = True
                return
            elif name in _RESET:
                self.member_id, self.generation, self.rejoin = "", -1, True
                return
            elif name in _COORDINATOR_GONE:
                self.coordinator = -1

    async def leave(self) -> None:
        self.rejoin = True
        if self._heartbeat is not None and self._heartbeat is not asyncio.current_task():
            self._heartbeat.cancel()
        if not self.member_id or self.settings.group_instance_id:
            # Static members do not leave on close (KIP-345): a restart keeps the assignment.
            return
        try:
            if self.coordinator >= 0:
                await self.cluster.stub(self.coordinator).LeaveGroup(
                    client_pb2.LeaveGroupRequest(
                        group_id=self.settings.group_id,
                        members=[client_pb2.LeaveGroupRequest.Member(member_id=self.member_id)],
                    ),
                    timeout=self._timeout(),
                )
        except (grpc.aio.AioRpcError, StromError) as exc:
            log.debug("LeaveGroup failed: %s", exc)
        self.member_id, self.generation = "", -1
        self.owned = set()

    # --- offsets ----------------------------------------------------------------------

    async def commit(self, offsets: dict[TopicPartition, tuple[int, str]]) -> None:
        topics: dict[str, list[client_pb2.OffsetCommitRequest.Partition]] = {}
        for tp, (offset, metadata) in offsets.items():
            topics.setdefault(tp.topic, []).append(
                client_pb2.OffsetCommitRequest.Partition(
                    partition=tp.partition,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata=metadata,
                )
            )
        in_group = self.generation >= 0 and self.member_id
        request = client_pb2.OffsetCommitRequest(
            group_id=self.settings.group_id,
            generation_id=self.generation if in_group else -1,
            member_id=self.member_id if in_group else "",
            group_instance_id=self.settings.group_instance_id or "",
            topics=[
                client_pb2.OffsetCommitRequest.Topic(name=t, partitions=ps)
                for t, ps in topics.items()
            ],
        )
        deadline = time.monotonic() + self._timeout()
        while True:
            response = await self._call("OffsetCommit", request, deadline)
            name = error_name(response.error.code)
            if name in _REJOIN or name in _RESET:
                self.rejoin = True
                raise CommitFailedError(name, response.error.message)
            if name != ErrorCode.NONE:
                raise from_pb(response.error)
            # Each partition has its own answer: a coordinator that does not know a topic
            # yet (just created) refuses it with UNKNOWN_TOPIC_OR_PARTITION. As Kafka's
            # commitSync, retry retriable ones until the timeout and raise the others;
            # never report a commit that did not happen.
            failed = [
                (t.name, p) for t in response.topics for p in t.partitions if p.error.code != 0
            ]
            if not failed:
                return
            topic, partition = failed[0]
            error = partition.error
            if not error.retriable or time.monotonic() > deadline:
                raise error_for(
                    error_name(error.code),
                    f"Offset commit failed on partition {topic}-{partition.partition}: "
                    f"{error.message}",
                    error.retriable,
                )
            await asyncio.sleep(self.settings.retry_backoff_ms / 1000)

    async def committed(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = client_pb2.OffsetFetchRequest(
            group_id=self.settings.group_id,
            topics=[
                client_pb2.OffsetFetchRequest.Topic(name=t, partitions=ps)
                for t, ps in topics.items()
            ],
        )
        response = await self._call("OffsetFetch", request, time.monotonic() + self._timeout())
        if response.error.code != 0:
            raise from_pb(response.error)
        out: dict[TopicPartition, int | None] = dict.fromkeys(tps)
        for topic in response.topics:
            for p in topic.partitions:
                refused = from_pb(p.error) if p.error.code != 0 else None
                if isinstance(refused, AuthorizationError):
                    # Not "no offset": a consumer would reset its position on that.
                    raise refused
                tp = TopicPartition(topic.name, p.partition)
                out[tp] = p.committed_offset if p.committed_offset >= 0 else None
        return out
