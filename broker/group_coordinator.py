"""The group coordinator (Kafka's classic GroupCoordinator and GroupMetadataManager).

A group belongs to partition abs(javaHash(group)) % offsets.topic.num.partitions of
`__consumer_offsets`; the broker leading that partition coordinates it. When a broker
becomes leader of such a partition it loads the partition's records (the latest offset per
group, topic and partition, and the latest metadata per group) before answering for its
groups (COORDINATOR_LOAD_IN_PROGRESS meanwhile); when it stops leading, it forgets them
(NOT_COORDINATOR). Offset commits and group metadata are written there with acks=all and
answered once replicated, so a new coordinator finds them after a failover.

Rebalances follow the classic protocol: JoinGroup calls wait until every member has
rejoined (or its rebalance timeout passed, and the laggards are removed), the first
rebalance of an empty group waits group.initial.rebalance.delay.ms for more members, the
leader gets every member's subscription and returns the assignment in SyncGroup, and the
group is Stable once it is stored. Heartbeats keep members; a member silent for its
session timeout is removed and the others rebalance. Static members (group.instance.id,
KIP-345) keep their assignment across restarts without a rebalance. Offsets of Empty
groups expire after offsets.retention.minutes.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from broker.partition import Partition, batch_headers
from broker.replica_manager import ReplicaManager
from coordinator.group.config import GroupConfig
from coordinator.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    offset_key,
    offset_value,
    partition_for_group,
)
from coordinator.group.state import Group, GroupState, Member
from metadata.errors import ApiError
from strom_api.records import Record, decode_batch, encode_batch

log = logging.getLogger("strom.groups")

OFFSETS_TOPIC = "__consumer_offsets"
Records = list[tuple[bytes, bytes | None]]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _error_for_write(error: ApiError) -> ApiError:
    """Kafka's mapping of a failed write to __consumer_offsets to what a client sees."""
    if error.error_name in ("NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH"):
        return ApiError("NOT_COORDINATOR", "This broker stopped coordinating the group.")
    if error.error_name in (
        "UNKNOWN_TOPIC_OR_PARTITION",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
    ):
        return ApiError(
            "COORDINATOR_NOT_AVAILABLE",
            f"The group's state could not be stored ({error.error_name}): try again.",
        )
    return error


class GroupCoordinator:
    def __init__(
        self, broker_id: int, replicas: ReplicaManager, config: GroupConfig | None = None
    ) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.config = config or GroupConfig()
        self.groups: dict[str, Group] = {}
        self.loaded: set[int] = set()  # offsets partitions this broker serves
        self.loading: dict[int, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._last_expiry_ms = now_ms()
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._tick())

    def _background(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in self.loading.values():
            task.cancel()
        for group in self.groups.values():
            self._fail_waiters(group, ApiError("NOT_COORDINATOR", "The broker is shutting down."))

    # --- which groups are here ------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        """The __consumer_offsets partition of a group: by the topic's real partition count
        once it exists, as Kafka's coordinator counts it (a topic made with another count
        than offsets.topic.num.partitions must not leave groups without a coordinator)."""
        topic = self.replicas.image.topics.by_name.get(OFFSETS_TOPIC)
        count = len(topic.partitions) if topic is not None and topic.partitions else 0
        return partition_for_group(group_id, count or self.config.offsets_topic_partitions)

    def on_partition_role(self, partition: Partition) -> None:
        """Called when this broker's role for a partition changed (or it went away)."""
        if partition.topic != OFFSETS_TOPIC:
            return
        index = partition.index
        if partition.is_leader and index not in self.loaded and index not in self.loading:
            self.loading[index] = asyncio.create_task(self._load(partition))
        elif not partition.is_leader:
            self._unload(index)

    def _unload(self, index: int) -> None:
        task = self.loading.pop(index, None)
        if task is not None:
            task.cancel()
        self.loaded.discard(index)
        for group_id in [g for g, group in self.groups.items() if group.partition == index]:
            group = self.groups.pop(group_id)
            group.transition(GroupState.DEAD, now_ms())
            self._fail_waiters(group, ApiError("NOT_COORDINATOR", "The coordinator moved."))

    async def _load(self, partition: Partition) -> None:
        """Replays the partition: the latest value of every key, tombstones included."""
        try:
            log_ = partition.log
            offset = log_.log_start_offset
            values: dict[bytes, bytes | None] = {}
            while offset < log_.log_end_offset:
                data = log_.read(offset, 1 << 20)
                if not data:
                    break
                pos = 0
                for header in batch_headers(data):
                    if not header.is_control:
                        _, records = decode_batch(data, pos)
                        for record in records:
                            if record.key is not None:
                                values[record.key] = record.value
                    pos += header.size
                    offset = header.next_offset
                await asyncio.sleep(0)  # let requests in between chunks
            now = now_ms()
            for key_bytes, value in values.items():
                key = decode_key(key_bytes)
                if isinstance(key, OffsetKey):
                    if value is not None:
                        group = self._group_for_load(key.group, partition.index)
                        group.offsets[(key.topic, key.partition)] = decode_offset_value(value)
                elif value is not None:
                    self._restore_group(key.group, partition.index, decode_group_value(value), now)
            self.loaded.add(partition.index)
            log.info(
                "loaded __consumer_offsets-%d: %d group(s)",
                partition.index,
                sum(1 for g in self.groups.values() if g.partition == partition.index),
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("could not load __consumer_offsets-%d", partition.index)
        finally:
            self.loading.pop(partition.index, None)

    def _group_for_load(self, group_id: str, index: int) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, index)
        return group

    def _restore_group(self, group_id: str, index: int, value: GroupValue, now: int) -> None:
        group = self._group_for_load(group_id, index)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol = value.protocol
        group.leader = value.leader
        for m in value.members:
            member = Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.session_timeout,
                m.rebalance_timeout,
                value.protocol_type,
                [(value.protocol or "", m.subscription)],
                m.assignment,
                last_heartbeat_ms=now,
            )
            group.members[m.member_id] = member
            if m.group_instance_id:
                group.static_members[m.group_instance_id] = m.member_id
        group.restore(GroupState.STABLE if group.members else GroupState.EMPTY, now)

    def _group(self, group_id: str, create: bool = False) -> Group | None:
        if not group_id:
            raise ApiError("INVALID_GROUP_ID", "The group id must not be empty.")
        index = self.partition_for(group_id)
        if index in self.loading:
            raise ApiError(
                "COORDINATOR_LOAD_IN_PROGRESS", "The coordinator is loading the group's state."
            )
        if index not in self.loaded:
            raise ApiError(
                "NOT_COORDINATOR",
                f"Broker {self.broker_id} does not coordinate group '{group_id}' (it is not "
                f"the leader of {OFFSETS_TOPIC}-{index}).",
            )
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = Group(group_id, index)
            group.state_timestamp_ms = now_ms()
        return group

    # --- writing --------------------------------------------------------------------

    async def _write(self, index: int, records: Records) -> None:
        now = now_ms()
        batch = encode_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)])
        results = await self.replicas.produce(
            -1, self.config.offsets_commit_timeout_ms, [(OFFSETS_TOPIC, index, batch)]
        )
        result = results[(OFFSETS_TOPIC, index)]
        if result.error is not None:
            raise _error_for_write(result.error)

    def _metadata_record(self, group: Group) -> tuple[bytes, bytes]:
        members = tuple(
            MemberValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(group.protocol or ""),
                m.assignment,
            )
            for m in group.members.values()
        )
        value = GroupValue(
            group.protocol_type or "",
            group.generation,
            group.protocol,
            group.leader,
            group.state_timestamp_ms,
            members,
        )
        return group_key(GroupKey(group.group_id)), group_value(value)

    # --- JoinGroup ------------------------------------------------------------------

    async def join_group(self, request: Any, client_host: str = "") -> dict[str, Any]:
        """Returns the JoinGroupResponse fields (the coordinator's servicer builds it)."""
        config = self.config
        if (
            not config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= config.max_session_timeout_ms
        ):
            raise ApiError(
                "INVALID_SESSION_TIMEOUT",
                f"session.timeout.ms {request.session_timeout_ms} is outside the broker's "
                f"[{config.min_session_timeout_ms}, {config.max_session_timeout_ms}] "
                "(group.min/max.session.timeout.ms).",
            )
        protocols = [(p.name, p.metadata) for p in request.protocols]
        group = self._group(request.group_id, create=not request.member_id)
        if group is None:
            raise ApiError(
                "UNKNOWN_MEMBER_ID", f"The group '{request.group_id}' does not know this member."
            )
        if not group.supports(request.protocol_type, [p for p, _ in protocols]):
            group.pending_members.pop(request.member_id, None)
            raise ApiError(
                "INCONSISTENT_GROUP_PROTOCOL",
                "The member's protocol type or assignors do not match the group's members'.",
            )
        now = now_ms()
        instance = request.group_instance_id or None
        member_id = request.member_id
        if not member_id and instance is not None:
            return await self._join_static(group, request, protocols, instance, client_host, now)
        if not member_id:
            # KIP-394: hand out an id and have the member come back with it.
            new_id = f"{request.client_id or 'member'}-{uuid.uuid4()}"
            group.pending_members[new_id] = now + request.session_timeout_ms
            raise _MemberIdRequired(new_id)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            member = Member(
                member_id,
                instance,
                request.client_id,
                client_host,
                request.session_timeout_ms,
                request.rebalance_timeout_ms,
                request.protocol_type,
                protocols,
                last_heartbeat_ms=now,
            )
            group.members[member_id] = member
            if group.leader is None:
                group.leader = member_id
            return await self._await_join(group, member, now)
        known = group.members.get(member_id)
        if known is None:
            raise ApiError(
                "UNKNOWN_MEMBER_ID", f"Member {member_id} is not in group '{group.group_id}'."
            )
        member = known
        member.last_heartbeat_ms = now
        changed = member.protocols != protocols
        member.protocols = protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if group.state is GroupState.STABLE and not changed and member_id != group.leader:
            # A follower rejoining with nothing new: it gets the current generation again.
            return self._join_answer(group, member)
        return await self._await_join(group, member, now)

    async def _join_static(
        self,
        group: Group,
        request: Any,
        protocols: list[tuple[str, bytes]],
        instance: str,
        client_host: str,
        now: int,
    ) -> dict[str, Any]:
        new_id = f"{instance}-{uuid.uuid4()}"
        old_id = group.static_members.get(instance)
        old = group.members.pop(old_id, None) if old_id else None
        member = Member(
            new_id,
            instance,
            request.client_id,
            client_host,
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            request.protocol_type,
            protocols,
            assignment=old.assignment if old else b"",
            last_heartbeat_ms=now,
        )
        group.members[new_id] = member
        group.static_members[instance] = new_id
        if old is not None:
            self._fail_member_waiters(
                old,
                ApiError(
                    "FENCED_INSTANCE_ID",
                    "A newer instance with the same group.instance.id joined.",
                ),
            )
            if group.leader == old_id:
                group.leader = new_id
            if group.state is GroupState.STABLE and old.protocols == protocols:
                # KIP-345: a known static member coming back changes nothing else.
                await self._write(group.partition, [self._metadata_record(group)])
                return self._join_answer(group, member)
        if group.leader is None:
            group.leader = new_id
        return await self._await_join(group, member, now)

    async def _await_join(self, group: Group, member: Member, now: int) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_exception(
                ApiError("UNKNOWN_MEMBER_ID", "Superseded by a newer JoinGroup of this member.")
            )
        member.join_future = loop.create_future()
        future = member.join_future
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, now, f"member {member.member_id} joined")
        self._maybe_complete_join(group, now)
        return await future  # type: ignore[no-any-return]

    def _prepare_rebalance(self, group: Group, now: int, why: str) -> None:
        was_empty = group.state is GroupState.EMPTY
        for m in group.members.values():
            if m.sync_future is not None and not m.sync_future.done():
                m.sync_future.set_exception(
                    ApiError("REBALANCE_IN_PROGRESS", "The group is rebalancing: join again.")
                )
            m.sync_future = None
        group.transition(GroupState.PREPARING_REBALANCE, now)
        timeout = group.max_rebalance_timeout_ms()
        group.rebalance_deadline_ms = now + timeout
        group.join_not_before_ms = now + (
            self.config.initial_rebalance_delay_ms if was_empty else 0
        )
        log.info("group %s: preparing to rebalance (%s)", group.group_id, why)

    def _maybe_complete_join(self, group: Group, now: int) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        ready = group.all_joined() and now >= group.join_not_before_ms
        if not ready and now < group.rebalance_deadline_ms:
            return
        # Members that did not rejoin in time leave the group.
        for member_id in [m for m, member in group.members.items() if member.join_future is None]:
            self._remove(group, member_id)
        group.pending_members.clear()
        group.generation += 1
        if not group.members:
            group.protocol = group.protocol_type = group.leader = None
            group.transition(GroupState.EMPTY, now)
            self._background(self._write_quietly(group))
            return
        group.protocol_type = next(iter(group.members.values())).protocol_type
        group.protocol = group.select_protocol()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info(
            "group %s: generation %d with %d member(s), assignor %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol,
        )
        for member in group.members.values():
            future, member.join_future = member.join_future, None
            if future is not None and not future.done():
                future.set_result(self._join_answer(group, member))

    def _join_answer(self, group: Group, member: Member) -> dict[str, Any]:
        is_leader = member.member_id == group.leader
        return {
            "generation_id": group.generation,
            "protocol_type": group.protocol_type or "",
            "protocol_name": group.protocol or "",
            "leader": group.leader or "",
            "member_id": member.member_id,
            "members": [
                (m.member_id, m.group_instance_id or "", m.metadata_for(group.protocol or ""))
                for m in group.members.values()
            ]
            if is_leader
            else [],
        }

    async def _write_quietly(self, group: Group) -> None:
        try:
            await self._write(group.partition, [self._metadata_record(group)])
        except ApiError as exc:
            log.info("group %s: could not store its metadata: %s", group.group_id, exc)

    # --- SyncGroup ------------------------------------------------------------------

    async def sync_group(self, request: Any) -> tuple[str, str, bytes]:
        group = self._group(request.group_id)
        member = self._check_member(group, request.member_id, request.generation_id)
        assert group is not None
        if group.state is GroupState.PREPARING_REBALANCE:
            raise ApiError("REBALANCE_IN_PROGRESS", "The group is rebalancing: join again.")
        if group.state is GroupState.STABLE:
            return group.protocol_type or "", group.protocol or "", member.assignment
        loop = asyncio.get_running_loop()
        member.sync_future = loop.create_future()
        future = member.sync_future
        if request.member_id == group.leader:
            assignments = {a.member_id: a.assignment for a in request.assignments}
            generation = group.generation
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            try:
                await self._write(group.partition, [self._metadata_record(group)])
            except ApiError as exc:
                if (
                    group.generation == generation
                    and group.state is GroupState.COMPLETING_REBALANCE
                ):
                    for m in group.members.values():
                        m.assignment = b""
                    self._prepare_rebalance(group, now_ms(), "its assignment could not be stored")
                raise exc from None
            if group.generation == generation and group.state is GroupState.COMPLETING_REBALANCE:
                group.transition(GroupState.STABLE, now_ms())
                for m in group.members.values():
                    if m.sync_future is not None and not m.sync_future.done():
                        m.sync_future.set_result(m.assignment)
                    m.sync_future = None
        assignment: bytes = await future
        return group.protocol_type or "", group.protocol or "", assignment

    def _check_member(self, group: Group | None, member_id: str, generation: int) -> Member:
        if group is None or group.state is GroupState.DEAD:
            raise ApiError("UNKNOWN_MEMBER_ID", "The group does not exist (any more).")
        member = group.members.get(member_id)
        if member is None:
            raise ApiError(
                "UNKNOWN_MEMBER_ID", f"Member {member_id} is not in group '{group.group_id}'."
            )
        if generation != group.generation:
            raise ApiError(
                "ILLEGAL_GENERATION",
                f"Generation {generation} is not the group's current {group.generation}.",
            )
        member.last_heartbeat_ms = now_ms()
        return member

    # --- Heartbeat and LeaveGroup ---------------------------------------------------

    def heartbeat(self, request: Any) -> None:
        group = self._group(request.group_id)
        self._check_member(group, request.member_id, request.generation_id)
        assert group is not None
        if group.state is GroupState.PREPARING_REBALANCE:
            raise ApiError("REBALANCE_IN_PROGRESS", "The group is rebalancing: join again.")

    def leave_group(self, request: Any) -> list[tuple[str, str, ApiError | None]]:
        group = self._group(request.group_id)
        results: list[tuple[str, str, ApiError | None]] = []
        now = now_ms()
        for m in request.members:
            member_id = m.member_id
            if not member_id and m.group_instance_id and group is not None:
                member_id = group.static_members.get(m.group_instance_id, "")
            if group is None or member_id not in group.members:
                results.append(
                    (
                        m.member_id,
                        m.group_instance_id,
                        ApiError("UNKNOWN_MEMBER_ID", "Not a member."),
                    )
                )
                continue
            self._remove(group, member_id)
            results.append((member_id, m.group_instance_id, None))
            self._member_gone(group, now, f"member {member_id} left")
        return results

    def _remove(self, group: Group, member_id: str) -> None:
        member = group.members.pop(member_id, None)
        if member is None:
            return
        if (
            member.group_instance_id
            and group.static_members.get(member.group_instance_id) == member_id
        ):
            del group.static_members[member.group_instance_id]
        self._fail_member_waiters(member, ApiError("UNKNOWN_MEMBER_ID", "The member was removed."))
        if group.leader == member_id:
            group.leader = next(iter(group.members), None)

    def _member_gone(self, group: Group, now: int, why: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if group.members:
                self._prepare_rebalance(group, now, why)
            else:
                # Kafka's path to Empty goes through PreparingRebalance (GroupState's table).
                group.transition(GroupState.PREPARING_REBALANCE, now)
                group.generation += 1
                group.protocol = group.leader = None
                group.transition(GroupState.EMPTY, now)
                self._background(self._write_quietly(group))
        self._maybe_complete_join(group, now)

    def _fail_member_waiters(self, member: Member, error: ApiError) -> None:
        for future in (member.join_future, member.sync_future):
            if future is not None and not future.done():
                future.set_exception(error)
        member.join_future = member.sync_future = None

    def _fail_waiters(self, group: Group, error: ApiError) -> None:
        for member in group.members.values():
            self._fail_member_waiters(member, error)

    # --- offsets --------------------------------------------------------------------

    async def commit_offsets(self, request: Any) -> dict[tuple[str, int], ApiError | None]:
        group = self._group(request.group_id, create=True)
        assert group is not None
        if request.generation_id < 0 and not request.member_id:
            if group.state is not GroupState.EMPTY:
                raise ApiError(
                    "UNKNOWN_MEMBER_ID",
                    f"Group '{group.group_id}' has active members: only they may commit.",
                )
        else:
            self._check_member(group, request.member_id, request.generation_id)
            if group.state is GroupState.PREPARING_REBALANCE:
                raise ApiError("REBALANCE_IN_PROGRESS", "The group is rebalancing: join again.")
        now = now_ms()
        values: dict[tuple[str, int], OffsetValue] = {}
        refused: dict[tuple[str, int], ApiError | None] = {}
        records: Records = []
        topics = self.replicas.image.topics
        limit = self.config.offset_metadata_max_bytes
        for topic in request.topics:
            for p in topic.partitions:
                # Kafka's checks: a partition that exists (else a commit could fill the
                # coordinator's memory with made-up names), metadata within
                # offset.metadata.max.bytes.
                if topics.partition(topic.name, p.partition) is None:
                    refused[(topic.name, p.partition)] = ApiError(
                        "UNKNOWN_TOPIC_OR_PARTITION",
                        f"This server does not host this topic-partition: "
                        f"{topic.name}-{p.partition}.",
                    )
                    continue
                if len(p.committed_metadata.encode()) > limit:
                    refused[(topic.name, p.partition)] = ApiError(
                        "OFFSET_METADATA_TOO_LARGE",
                        f"The metadata of the offset for {topic.name}-{p.partition} is longer "
                        f"than offset.metadata.max.bytes={limit}.",
                    )
                    continue
                value = OffsetValue(
                    p.committed_offset, p.committed_leader_epoch, p.committed_metadata, now
                )
                values[(topic.name, p.partition)] = value
                records.append(
                    (
                        offset_key(OffsetKey(group.group_id, topic.name, p.partition)),
                        offset_value(value),
                    )
                )
        if records:
            await self._write(group.partition, records)
        group.offsets.update(values)
        return {**dict.fromkeys(values), **refused}

    def fetch_offsets(self, request: Any) -> dict[tuple[str, int], OffsetValue | None]:
        group = self._group(request.group_id)
        offsets = {} if group is None else group.offsets
        if not request.topics:
            return dict(offsets)
        return {(t.name, p): offsets.get((t.name, p)) for t in request.topics for p in t.partitions}

    # --- admin ------------------------------------------------------------------------

    def describe(self, group_id: str) -> Group | None:
        return self._group(group_id)

    def list_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if g.partition in self.loaded]

    def committed_offsets(self) -> list[tuple[str, str, int, int]]:
        """(group, topic, partition, offset) of every committed offset of the groups this
        broker serves, sorted; for metrics, read on the event loop."""
        return sorted(
            (group.group_id, topic, partition, value.offset)
            for group in self.list_groups()
            for (topic, partition), value in group.offsets.items()
            if value.offset >= 0
        )

    async def delete_group(self, group_id: str) -> None:
        group = self._group(group_id)
        if group is None:
            raise ApiError("GROUP_ID_NOT_FOUND", f"The group '{group_id}' does not exist.")
        if group.state not in (GroupState.EMPTY, GroupState.DEAD):
            raise ApiError("NON_EMPTY_GROUP", f"The group '{group_id}' has active members.")
        records: Records = [
            (offset_key(OffsetKey(group_id, t, p)), None) for (t, p) in group.offsets
        ]
        records.append((group_key(GroupKey(group_id)), None))
        await self._write(group.partition, records)
        group.transition(GroupState.DEAD, now_ms())
        self.groups.pop(group_id, None)

    # --- time ---------------------------------------------------------------------------

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            try:
                self._expire(now_ms())
            except Exception:
                log.exception("group coordinator tick failed")

    def _expire(self, now: int) -> None:
        for group in list(self.groups.values()):
            for pending, deadline in list(group.pending_members.items()):
                if now > deadline:
                    del group.pending_members[pending]
            expired = [
                m.member_id
                for m in group.members.values()
                if m.join_future is None and now - m.last_heartbeat_ms > m.session_timeout_ms
            ]
            for member_id in expired:
                log.info("group %s: member %s's session expired", group.group_id, member_id)
                self._remove(group, member_id)
                self._member_gone(group, now, f"member {member_id}'s session expired")
            self._maybe_complete_join(group, now)
        if now - self._last_expiry_ms >= self.config.offsets_retention_check_interval_ms:
            self._last_expiry_ms = now
            self._background(self._expire_offsets(now))

    async def _expire_offsets(self, now: int) -> None:
        """offsets.retention.minutes after an Empty group's last state change (Kafka's
        KIP-211 rule), its offsets go."""
        retention = self.config.offsets_retention_minutes * 60_000
        for group in list(self.groups.values()):
            if group.state is not GroupState.EMPTY or not group.offsets:
                continue
            if (
                now
                - max(
                    group.state_timestamp_ms,
                    max(v.commit_timestamp for v in group.offsets.values()),
                )
                < retention
            ):
                continue
            records: Records = [
                (offset_key(OffsetKey(group.group_id, t, p)), None) for (t, p) in group.offsets
            ]
            try:
                await self._write(group.partition, records)
            except ApiError:
                continue
            log.info("group %s: %d offset(s) expired", group.group_id, len(records))
            group.offsets.clear()


class _MemberIdRequired(ApiError):
    def __init__(self, member_id: str) -> None:
        super().__init__("MEMBER_ID_REQUIRED", "Join again with the member id given.")
        self.member_id = member_id


MemberIdRequired = _MemberIdRequired
