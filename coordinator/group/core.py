"""The group coordinator's decisions (Kafka's classic GroupCoordinator and
GroupMetadataManager), as a state machine without I/O: no clock, no asyncio, no gRPC, no
files. Its pump (coordinator/group/runtime.py) feeds it events with the time they happen
(`now_ms`) and carries out the `Effects` each returns: answers to requests, appends to
`__consumer_offsets`, and the time by which `tick` must run next. The simulator or a unit
test drives the very same class by hand.

Rules:
- A group belongs to partition abs(javaHash(group)) % N of `__consumer_offsets` (N: the
  topic's real partition count once it exists); this broker answers for it only while it
  leads that partition and has loaded it (COORDINATOR_LOAD_IN_PROGRESS while loading,
  NOT_COORDINATOR otherwise). Losing the partition fails every waiting request with
  NOT_COORDINATOR.
- Every request gets exactly one answer (`Respond`); a JoinGroup or SyncGroup may get it
  in a later step, when the rebalance completes. A request's id is open from its handler
  until its answer, and answering one that is not open is a bug that raises.
- Rebalances follow the classic protocol: JoinGroup waits until every member has rejoined
  (or its rebalance timeout passed, and the laggards are removed); the first rebalance of
  an empty group waits group.initial.rebalance.delay.ms for more members; the leader gets
  every member's subscription and returns the assignment in SyncGroup; the group is Stable
  once that assignment is stored. A member silent for its session timeout is removed and
  the others rebalance. Static members (KIP-345) keep their assignment across restarts;
  dynamic ones get their id from a first JoinGroup (KIP-394). Group states move only along
  Kafka's legal transitions (coordinator/group/state.py).
- Offset commits and group metadata are appended with acks=all and take effect once the
  append succeeded (`append_done`), so a new coordinator finds them after a failover.
  Offsets of Empty groups expire after offsets.retention.minutes (KIP-211).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from coordinator.group import offsets
from coordinator.group.config import GroupConfig
from coordinator.group.messages import (
    Append,
    CommitResult,
    DeleteGroup,
    Effects,
    FetchResult,
    Heartbeat,
    JoinedMember,
    JoinGroup,
    JoinResult,
    LeaveGroup,
    LeaveResult,
    MemberIdRequired,
    OffsetCommit,
    OffsetFetch,
    Respond,
    SyncGroup,
    SyncResult,
    TopicPartition,
)
from coordinator.group.persistence import (
    error_for_append,
    group_tombstone,
    metadata_record,
    offset_tombstones,
    replay,
)
from coordinator.group.records import (
    OffsetValue,
    partition_for_group,
)
from coordinator.group.state import Group, GroupState, Member
from metadata.errors import ApiError

log = logging.getLogger("strom.groups")

OFFSETS_TOPIC = "__consumer_offsets"


class CoordinatorBug(RuntimeError):
    """A step broke one of the core's own rules (an illegal transition, ...). It carries the
    effects the step had decided before it failed, which the pump still carries out, so no
    request already answered is lost; the request being handled is answered
    UNKNOWN_SERVER_ERROR."""

    def __init__(self, effects: Effects) -> None:
        super().__init__("the group coordinator failed a step")
        self.effects = effects


def _rebalancing() -> ApiError:
    return ApiError("REBALANCE_IN_PROGRESS", "The group is rebalancing: join again.")


# --- what an append waits to do once it is done -------------------------------------------


@dataclass(frozen=True, slots=True)
class _StoreQuietly:
    """Group metadata stored in the background (a group that became Empty)."""

    group: Group


@dataclass(frozen=True, slots=True)
class _StoreStaticRejoin:
    request: int
    group: Group
    member: Member


@dataclass(frozen=True, slots=True)
class _StoreAssignment:
    request: int  # the leader's SyncGroup
    group: Group
    leader: Member
    generation: int


@dataclass(frozen=True, slots=True)
class _StoreOffsets:
    request: int
    group: Group
    values: dict[TopicPartition, OffsetValue]
    refused: dict[TopicPartition, ApiError | None]


@dataclass(frozen=True, slots=True)
class _DeleteGroup:
    request: int
    group: Group


@dataclass(frozen=True, slots=True)
class _ExpireOffsets:
    group: Group
    count: int


_PendingAppend = (
    _StoreQuietly
    | _StoreStaticRejoin
    | _StoreAssignment
    | _StoreOffsets
    | _DeleteGroup
    | _ExpireOffsets
)


class GroupCoordinatorCore:
    """The groups of the `__consumer_offsets` partitions this broker leads. Not thread-safe:
    one pump drives it."""

    def __init__(
        self,
        broker_id: int,
        config: GroupConfig,
        partition_count: Callable[[str], int],
        now_ms: int,
        new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        # A topic's partition count now (0: no such topic); the broker's metadata image.
        self._partition_count = partition_count
        self._new_uuid = new_uuid
        self.groups: dict[str, Group] = {}
        self.loaded: set[int] = set()  # offsets partitions this broker serves
        self.loading: dict[int, dict[bytes, bytes | None]] = {}  # latest value per key
        self._appends: dict[int, _PendingAppend] = {}
        self._next_append = 0
        self._open: set[int] = set()  # requests not answered yet
        self._last_retention_check_ms = now_ms
        self._out = Effects()

    # --- which groups are here ------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        """The __consumer_offsets partition of a group: by the topic's real partition count
        once it exists, as Kafka's coordinator counts it (a topic made with another count
        than offsets.topic.num.partitions must not leave groups without a coordinator)."""
        count = self._partition_count(OFFSETS_TOPIC)
        return partition_for_group(group_id, count or self.config.offsets_topic_partitions)

    def begin_load(self, index: int) -> bool:
        """This broker became leader of __consumer_offsets-`index`: True when the pump must
        now read the partition (`load_records`, then `load_finished` or `load_failed`)."""
        if index in self.loaded or index in self.loading:
            return False
        self.loading[index] = {}
        return True

    def load_records(self, index: int, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """A chunk of the partition, in offset order: the latest value of a key wins."""
        values = self.loading[index]
        for key, value in records:
            values[key] = value

    def load_finished(self, index: int, now_ms: int) -> Effects:
        return self._step(lambda: self._load_finished(index, now_ms))

    def _load_finished(self, index: int, now_ms: int) -> None:
        values = self.loading.pop(index)
        for group in replay(values, index, self.groups, now_ms):
            self._out.wake_by(self._deadline(group))
        self.loaded.add(index)
        log.info(
            "loaded %s-%d: %d group(s)",
            OFFSETS_TOPIC,
            index,
            sum(1 for g in self.groups.values() if g.partition == index),
        )

    def load_failed(self, index: int) -> None:
        """The partition could not be read: its groups stay NOT_COORDINATOR here."""
        self.loading.pop(index, None)

    def unload(self, index: int, now_ms: int) -> Effects:
        """This broker no longer leads __consumer_offsets-`index` (or lost it)."""
        return self._step(lambda: self._unload(index, now_ms))

    def _unload(self, index: int, now_ms: int) -> None:
        self.loading.pop(index, None)
        self.loaded.discard(index)
        for group_id in [g for g, group in self.groups.items() if group.partition == index]:
            group = self.groups.pop(group_id)
            group.transition(GroupState.DEAD, now_ms)
            self._fail_waiters(group, ApiError("NOT_COORDINATOR", "The coordinator moved."))

    def shut_down(self) -> Effects:
        """The broker is stopping: every waiting request is answered NOT_COORDINATOR."""
        return self._step(self._shut_down)

    def _shut_down(self) -> None:
        error = ApiError("NOT_COORDINATOR", "The broker is shutting down.")
        for group in self.groups.values():
            self._fail_waiters(group, error)

    def _group(self, group_id: str, now_ms: int, create: bool = False) -> Group | None:
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
            group.state_timestamp_ms = now_ms
        return group

    # --- requests: each handler answers its request now or in a later step --------------

    def join_group(self, request: int, join: JoinGroup, now_ms: int) -> Effects:
        return self._handle(request, join.group_id, lambda: self._join(request, join, now_ms))

    def sync_group(self, request: int, sync: SyncGroup, now_ms: int) -> Effects:
        return self._handle(request, sync.group_id, lambda: self._sync(request, sync, now_ms))

    def heartbeat(self, request: int, beat: Heartbeat, now_ms: int) -> Effects:
        return self._handle(request, beat.group_id, lambda: self._heartbeat(request, beat, now_ms))

    def leave_group(self, request: int, leave: LeaveGroup, now_ms: int) -> Effects:
        return self._handle(request, leave.group_id, lambda: self._leave(request, leave, now_ms))

    def commit_offsets(self, request: int, commit: OffsetCommit, now_ms: int) -> Effects:
        return self._handle(
            request, commit.group_id, lambda: self._commit(request, commit, now_ms)
        )

    def fetch_offsets(self, request: int, fetch: OffsetFetch, now_ms: int) -> Effects:
        return self._handle(request, fetch.group_id, lambda: self._fetch(request, fetch, now_ms))

    def delete_group(self, request: int, delete: DeleteGroup, now_ms: int) -> Effects:
        return self._handle(
            request, delete.group_id, lambda: self._delete(request, delete.group_id, now_ms)
        )

    def _handle(self, request: int, group_id: str, handler: Callable[[], None]) -> Effects:
        if request in self._open:
            raise ValueError(f"request id {request} is already waiting for its answer")
        self._open.add(request)

        def answered() -> None:
            try:
                handler()
            except ApiError as exc:
                self._respond(request, error=exc)
            except Exception as exc:
                if request in self._open:
                    failed = f"The group coordinator failed: {exc}"
                    self._respond(request, error=ApiError("UNKNOWN_SERVER_ERROR", failed))
                raise
            group = self.groups.get(group_id)
            if group is not None:
                self._out.wake_by(self._deadline(group))

        return self._step(answered)

    def _step(self, action: Callable[[], None]) -> Effects:
        """Runs one step; its effects are returned, or carried by CoordinatorBug."""
        self._out = Effects()
        try:
            action()
        except Exception as exc:
            raise CoordinatorBug(self._take()) from exc
        return self._take()

    def _respond(
        self,
        request: int,
        answer: JoinResult | SyncResult | tuple[LeaveResult, ...] | CommitResult | FetchResult
        | None = None,
        error: ApiError | None = None,
    ) -> None:
        if request not in self._open:
            raise AssertionError(f"request {request} answered twice (or never asked)")
        self._open.discard(request)
        self._out.responses.append(Respond(request, answer, error))

    def _take(self) -> Effects:
        out, self._out = self._out, Effects()
        return out

    # --- JoinGroup ------------------------------------------------------------------

    def _join(self, request: int, join: JoinGroup, now: int) -> None:
        config = self.config
        if not config.min_session_timeout_ms <= join.session_timeout_ms <= (
            config.max_session_timeout_ms
        ):
            raise ApiError(
                "INVALID_SESSION_TIMEOUT",
                f"session.timeout.ms {join.session_timeout_ms} is outside the broker's "
                f"[{config.min_session_timeout_ms}, {config.max_session_timeout_ms}] "
                "(group.min/max.session.timeout.ms).",
            )
        protocols = list(join.protocols)
        group = self._group(join.group_id, now, create=not join.member_id)
        if group is None:
            raise ApiError(
                "UNKNOWN_MEMBER_ID", f"The group '{join.group_id}' does not know this member."
            )
        if not group.supports(join.protocol_type, [p for p, _ in protocols]):
            group.pending_members.pop(join.member_id, None)
            raise ApiError(
                "INCONSISTENT_GROUP_PROTOCOL",
                "The member's protocol type or assignors do not match the group's members'.",
            )
        instance = join.group_instance_id or None
        member_id = join.member_id
        if not member_id and instance is not None:
            self._join_static(request, group, join, protocols, instance, now)
            return
        if not member_id:
            # KIP-394: hand out an id and have the member come back with it.
            new_id = f"{join.client_id or 'member'}-{self._new_uuid()}"
            group.pending_members[new_id] = now + join.session_timeout_ms
            raise MemberIdRequired(new_id)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            member = Member(
                member_id,
                instance,
                join.client_id,
                join.client_host,
                join.session_timeout_ms,
                join.rebalance_timeout_ms,
                join.protocol_type,
                protocols,
                last_heartbeat_ms=now,
            )
            group.members[member_id] = member
            if group.leader is None:
                group.leader = member_id
            self._await_join(request, group, member, now)
            return
        known = group.members.get(member_id)
        if known is None:
            raise ApiError(
                "UNKNOWN_MEMBER_ID", f"Member {member_id} is not in group '{group.group_id}'."
            )
        member = known
        member.last_heartbeat_ms = now
        changed = member.protocols != protocols
        member.protocols = protocols
        member.session_timeout_ms = join.session_timeout_ms
        member.rebalance_timeout_ms = join.rebalance_timeout_ms
        if group.state is GroupState.STABLE and not changed and member_id != group.leader:
            # A follower rejoining with nothing new: it gets the current generation again.
            self._respond(request, self._join_answer(group, member))
            return
        self._await_join(request, group, member, now)

    def _join_static(
        self,
        request: int,
        group: Group,
        join: JoinGroup,
        protocols: list[tuple[str, bytes]],
        instance: str,
        now: int,
    ) -> None:
        new_id = f"{instance}-{self._new_uuid()}"
        old_id = group.static_members.get(instance)
        old = group.members.pop(old_id, None) if old_id else None
        member = Member(
            new_id,
            instance,
            join.client_id,
            join.client_host,
            join.session_timeout_ms,
            join.rebalance_timeout_ms,
            join.protocol_type,
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
                # KIP-345: a known static member coming back changes nothing else; it is
                # answered once the new member id is stored.
                rejoin = _StoreStaticRejoin(request, group, member)
                self._append(group, [metadata_record(group)], rejoin)
                return
        if group.leader is None:
            group.leader = new_id
        self._await_join(request, group, member, now)

    def _await_join(self, request: int, group: Group, member: Member, now: int) -> None:
        if member.join_request is not None:
            self._respond(
                member.join_request,
                error=ApiError(
                    "UNKNOWN_MEMBER_ID", "Superseded by a newer JoinGroup of this member."
                ),
            )
        member.join_request = request
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, now, f"member {member.member_id} joined")
        self._maybe_complete_join(group, now)

    def _prepare_rebalance(self, group: Group, now: int, why: str) -> None:
        was_empty = group.state is GroupState.EMPTY
        for m in group.members.values():
            if m.sync_request is not None:
                self._respond(m.sync_request, error=_rebalancing())
            m.sync_request = None
        group.transition(GroupState.PREPARING_REBALANCE, now)
        group.rebalance_deadline_ms = now + group.max_rebalance_timeout_ms()
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
        for member_id in [m for m, member in group.members.items() if member.join_request is None]:
            self._remove(group, member_id)
        group.pending_members.clear()
        group.generation += 1
        if not group.members:
            group.protocol = group.protocol_type = group.leader = None
            group.transition(GroupState.EMPTY, now)
            self._append(group, [metadata_record(group)], _StoreQuietly(group))
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
            waiting, member.join_request = member.join_request, None
            if waiting is not None:
                self._respond(waiting, self._join_answer(group, member))

    def _join_answer(self, group: Group, member: Member) -> JoinResult:
        is_leader = member.member_id == group.leader
        members = (
            tuple(
                JoinedMember(
                    m.member_id, m.group_instance_id or "", m.metadata_for(group.protocol or "")
                )
                for m in group.members.values()
            )
            if is_leader
            else ()
        )
        return JoinResult(
            group.generation,
            group.protocol_type or "",
            group.protocol or "",
            group.leader or "",
            member.member_id,
            members,
        )

    # --- SyncGroup ------------------------------------------------------------------

    def _sync(self, request: int, sync: SyncGroup, now: int) -> None:
        group = self._group(sync.group_id, now)
        member = self._check_member(group, sync.member_id, sync.generation_id, now)
        assert group is not None
        if group.state is GroupState.PREPARING_REBALANCE:
            raise _rebalancing()
        if group.state is GroupState.STABLE:
            self._respond(request, self._sync_answer(group, member))
            return
        # CompletingRebalance: wait for the leader's assignment to be stored. A member's
        # earlier SyncGroup still waiting (its client gave up and retried) is answered now;
        # Kafka leaves it to the request timeout, but the pump would hold it forever.
        if member.sync_request is not None:
            self._respond(
                member.sync_request,
                error=ApiError(
                    "UNKNOWN_MEMBER_ID", "Superseded by a newer SyncGroup of this member."
                ),
            )
        member.sync_request = request
        if sync.member_id == group.leader:
            for m in group.members.values():
                m.assignment = sync.assignments.get(m.member_id, b"")
            self._append(
                group,
                [metadata_record(group)],
                _StoreAssignment(request, group, member, group.generation),
            )

    def _sync_answer(self, group: Group, member: Member) -> SyncResult:
        return SyncResult(group.protocol_type or "", group.protocol or "", member.assignment)

    def _assignment_stored(
        self, pending: _StoreAssignment, error: ApiError | None, now: int
    ) -> None:
        group = pending.group
        current = (
            group.generation == pending.generation
            and group.state is GroupState.COMPLETING_REBALANCE
        )
        if error is None:
            if current:
                group.transition(GroupState.STABLE, now)
                for m in group.members.values():
                    if m.sync_request is not None:
                        self._respond(m.sync_request, self._sync_answer(group, m))
                    m.sync_request = None
            return
        # The leader hears why; the others rejoin (REBALANCE_IN_PROGRESS).
        leader_waiting = pending.leader.sync_request == pending.request
        if leader_waiting:
            pending.leader.sync_request = None
        if current:
            for m in group.members.values():
                m.assignment = b""
            self._prepare_rebalance(group, now, "its assignment could not be stored")
        if leader_waiting:
            self._respond(pending.request, error=error)

    def _check_member(
        self, group: Group | None, member_id: str, generation: int, now: int
    ) -> Member:
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
        member.last_heartbeat_ms = now
        return member

    # --- Heartbeat and LeaveGroup ---------------------------------------------------

    def _heartbeat(self, request: int, beat: Heartbeat, now: int) -> None:
        group = self._group(beat.group_id, now)
        self._check_member(group, beat.member_id, beat.generation_id, now)
        assert group is not None
        if group.state is GroupState.PREPARING_REBALANCE:
            raise _rebalancing()
        self._respond(request)

    def _leave(self, request: int, leave: LeaveGroup, now: int) -> None:
        group = self._group(leave.group_id, now)
        results: list[LeaveResult] = []
        for m in leave.members:
            member_id = m.member_id
            if not member_id and m.group_instance_id and group is not None:
                member_id = group.static_members.get(m.group_instance_id, "")
            if group is None or member_id not in group.members:
                results.append(
                    LeaveResult(
                        m.member_id,
                        m.group_instance_id,
                        ApiError("UNKNOWN_MEMBER_ID", "Not a member."),
                    )
                )
                continue
            self._remove(group, member_id)
            results.append(LeaveResult(member_id, m.group_instance_id, None))
            self._member_gone(group, now, f"member {member_id} left")
        self._respond(request, tuple(results))

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
                self._append(group, [metadata_record(group)], _StoreQuietly(group))
        self._maybe_complete_join(group, now)

    def _fail_member_waiters(self, member: Member, error: ApiError) -> None:
        for waiting in (member.join_request, member.sync_request):
            if waiting is not None:
                self._respond(waiting, error=error)
        member.join_request = member.sync_request = None

    def _fail_waiters(self, group: Group, error: ApiError) -> None:
        for member in group.members.values():
            self._fail_member_waiters(member, error)

    # --- offsets --------------------------------------------------------------------

    def _commit(self, request: int, commit: OffsetCommit, now: int) -> None:
        group = self._group(commit.group_id, now, create=True)
        assert group is not None
        if commit.generation_id < 0 and not commit.member_id:
            if group.state is not GroupState.EMPTY:
                raise ApiError(
                    "UNKNOWN_MEMBER_ID",
                    f"Group '{group.group_id}' has active members: only they may commit.",
                )
        else:
            self._check_member(group, commit.member_id, commit.generation_id, now)
            if group.state is GroupState.PREPARING_REBALANCE:
                raise _rebalancing()
        prepared = offsets.prepare_commit(
            group.group_id,
            commit.offsets,
            now,
            self._partition_count,
            self.config.offset_metadata_max_bytes,
        )
        if prepared.records:
            pending = _StoreOffsets(request, group, prepared.values, prepared.refused)
            self._append(group, prepared.records, pending)
        else:
            self._respond(request, dict(prepared.refused))

    def _fetch(self, request: int, fetch: OffsetFetch, now: int) -> None:
        self._respond(request, offsets.fetch(self._group(fetch.group_id, now), fetch.partitions))

    def _delete(self, request: int, group_id: str, now: int) -> None:
        group = self._group(group_id, now)
        if group is None:
            raise ApiError("GROUP_ID_NOT_FOUND", f"The group '{group_id}' does not exist.")
        if group.state not in (GroupState.EMPTY, GroupState.DEAD):
            raise ApiError("NON_EMPTY_GROUP", f"The group '{group_id}' has active members.")
        records = [*offset_tombstones(group), group_tombstone(group_id)]
        self._append(group, records, _DeleteGroup(request, group))

    # --- reading (admin and metrics) ----------------------------------------------------

    def describe(self, group_id: str) -> Group | None:
        return self._group(group_id, now_ms=0)  # never creates one, so the time is unused

    def list_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if g.partition in self.loaded]

    def committed_offsets(self) -> list[tuple[str, str, int, int]]:
        """(group, topic, partition, offset) of every committed offset of the groups this
        broker serves, sorted."""
        return sorted(
            (group.group_id, topic, partition, value.offset)
            for group in self.list_groups()
            for (topic, partition), value in group.offsets.items()
            if value.offset >= 0
        )

    # --- appends ------------------------------------------------------------------------

    def _append(
        self, group: Group, records: list[tuple[bytes, bytes | None]], then: _PendingAppend
    ) -> None:
        self._next_append += 1
        self._appends[self._next_append] = then
        self._out.appends.append(Append(self._next_append, group.partition, tuple(records)))

    def append_done(self, write: int, error: ApiError | None, now_ms: int) -> Effects:
        """The outcome of `Append` number `write`: None when replicated, else the partition's
        error."""
        return self._step(lambda: self._append_done(self._appends.pop(write), error, now_ms))

    def _append_done(self, pending: _PendingAppend, error: ApiError | None, now_ms: int) -> None:
        failure = None if error is None else error_for_append(error)
        if isinstance(pending, _StoreQuietly):
            if failure is not None:
                log.info(
                    "group %s: could not store its metadata: %s", pending.group.group_id, failure
                )
        elif isinstance(pending, _StoreStaticRejoin):
            if failure is None:
                self._respond(pending.request, self._join_answer(pending.group, pending.member))
            else:
                self._respond(pending.request, error=failure)
        elif isinstance(pending, _StoreAssignment):
            self._assignment_stored(pending, failure, now_ms)
        elif isinstance(pending, _StoreOffsets):
            if failure is None:
                pending.group.offsets.update(pending.values)
                self._respond(pending.request, {**dict.fromkeys(pending.values), **pending.refused})
            else:
                self._respond(pending.request, error=failure)
        elif isinstance(pending, _DeleteGroup):
            if failure is None:
                pending.group.transition(GroupState.DEAD, now_ms)
                if self.groups.get(pending.group.group_id) is pending.group:
                    del self.groups[pending.group.group_id]
                self._respond(pending.request)
            else:
                self._respond(pending.request, error=failure)
        elif failure is None:
            log.info("group %s: %d offset(s) expired", pending.group.group_id, pending.count)
            pending.group.offsets.clear()
        self._out.wake_by(self._deadline(pending.group))

    # --- time ---------------------------------------------------------------------------

    def tick(self, now_ms: int) -> Effects:
        """Expires pending member ids and silent members, completes rebalances whose wait is
        over, and every offsets.retention.check.interval.ms expires old offsets. Its
        `wakeup_ms` is the next deadline of any group."""
        return self._step(lambda: self._tick(now_ms))

    def _tick(self, now_ms: int) -> None:
        for group in list(self.groups.values()):
            self._expire_members(group, now_ms)
        interval = self.config.offsets_retention_check_interval_ms
        if now_ms - self._last_retention_check_ms >= interval:
            self._last_retention_check_ms = now_ms
            self._expire_offsets(now_ms)
        for group in self.groups.values():
            self._out.wake_by(self._deadline(group))
        self._out.wake_by(self._last_retention_check_ms + interval)

    def _expire_members(self, group: Group, now: int) -> None:
        for pending, deadline in list(group.pending_members.items()):
            if now > deadline:
                del group.pending_members[pending]
        expired = [
            m.member_id
            for m in group.members.values()
            if m.join_request is None and now - m.last_heartbeat_ms > m.session_timeout_ms
        ]
        for member_id in expired:
            log.info("group %s: member %s's session expired", group.group_id, member_id)
            self._remove(group, member_id)
            self._member_gone(group, now, f"member {member_id}'s session expired")
        self._maybe_complete_join(group, now)

    def _expire_offsets(self, now: int) -> None:
        retention = self.config.offsets_retention_minutes * 60_000
        for group in self.groups.values():
            if not offsets.expired(group, now, retention):
                continue
            records = offset_tombstones(group)
            self._append(group, records, _ExpireOffsets(group, len(records)))

    def _deadline(self, group: Group) -> int | None:
        """The next time `tick` can change this group: a pending member id or a member's
        session running out, or the end of a rebalance's wait."""
        if group.state is GroupState.DEAD:
            return None
        times = [deadline + 1 for deadline in group.pending_members.values()]
        times += [
            m.last_heartbeat_ms + m.session_timeout_ms + 1
            for m in group.members.values()
            if m.join_request is None
        ]
        if group.state is GroupState.PREPARING_REBALANCE:
            # Everyone is in: the join completes once the initial delay is over; else at the
            # rebalance timeout, without the laggards.
            if group.all_joined():
                times.append(group.join_not_before_ms)
            else:
                times.append(group.rebalance_deadline_ms)
        return min(times, default=None)
