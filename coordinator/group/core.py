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
- Rebalances follow the classic protocol (coordinator/group/membership.py): JoinGroup
  waits until every member has rejoined (or its rebalance timeout passed, and the laggards
  are removed); the first rebalance of an empty group waits group.initial.rebalance.delay.ms
  for more members; the leader gets every member's subscription and returns the assignment
  in SyncGroup; the group is Stable once that assignment is stored. A member silent for its
  session timeout is removed and the others rebalance. Static members (KIP-345) keep their
  assignment across restarts; dynamic ones get their id from a first JoinGroup (KIP-394).
  Group states move only along Kafka's legal transitions (coordinator/group/state.py).
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
from coordinator.group.membership import Membership
from coordinator.group.messages import (
    DeleteGroup,
    Effects,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
    TopicPartition,
)
from coordinator.group.outbox import Outbox
from coordinator.group.persistence import (
    error_for_append,
    error_for_commit_append,
    group_tombstone,
    offset_tombstones,
    replay,
)
from coordinator.group.records import OffsetKey, OffsetValue, offset_key, partition_for_group
from coordinator.group.state import Group, GroupState
from metadata.errors import ApiError, kept
from strom_api.error_codes import ErrorCode

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


# What an offsets append does once it is done (membership.py has the others).


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
class _DeleteOffsets:
    request: int
    group: Group
    deleted: tuple[TopicPartition, ...]
    answer: dict[TopicPartition, ApiError | None]


@dataclass(frozen=True, slots=True)
class _ExpireOffsets:
    group: Group
    count: int


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
        self.groups: dict[str, Group] = {}
        self.loaded: set[int] = set()  # offsets partitions this broker serves
        self.loading: dict[int, dict[bytes, bytes | None]] = {}  # latest value per key
        self._last_retention_check_ms = now_ms
        self._outbox = Outbox()
        self._members = Membership(config, self._outbox, new_uuid)

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
            self._outbox.effects.wake_by(self._members.deadline(group))
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
            self._members.fail_waiters(
                group, ApiError(ErrorCode.NOT_COORDINATOR, "The coordinator moved.")
            )

    def shut_down(self) -> Effects:
        """The broker is stopping: every waiting request is answered NOT_COORDINATOR."""
        return self._step(self._shut_down)

    def _shut_down(self) -> None:
        error = ApiError(ErrorCode.NOT_COORDINATOR, "The broker is shutting down.")
        for group in self.groups.values():
            self._members.fail_waiters(group, error)

    def _group(self, group_id: str, now_ms: int, create: bool = False) -> Group | None:
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "The group id must not be empty.")
        index = self.partition_for(group_id)
        if index in self.loading:
            raise ApiError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                "The coordinator is loading the group's state.",
            )
        if index not in self.loaded:
            raise ApiError(
                ErrorCode.NOT_COORDINATOR,
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
        def handle() -> None:
            self._members.check_session(join)
            group = self._group(join.group_id, now_ms, create=not join.member_id)
            self._members.join(request, group, join, now_ms)

        return self._handle(request, join.group_id, handle)

    def sync_group(self, request: int, sync: SyncGroup, now_ms: int) -> Effects:
        return self._handle(
            request,
            sync.group_id,
            lambda: self._members.sync(request, self._group(sync.group_id, now_ms), sync, now_ms),
        )

    def heartbeat(self, request: int, beat: Heartbeat, now_ms: int) -> Effects:
        return self._handle(
            request,
            beat.group_id,
            lambda: self._members.heartbeat(
                request, self._group(beat.group_id, now_ms), beat, now_ms
            ),
        )

    def leave_group(self, request: int, leave: LeaveGroup, now_ms: int) -> Effects:
        return self._handle(
            request,
            leave.group_id,
            lambda: self._members.leave(
                request, self._group(leave.group_id, now_ms), leave, now_ms
            ),
        )

    def commit_offsets(self, request: int, commit: OffsetCommit, now_ms: int) -> Effects:
        return self._handle(request, commit.group_id, lambda: self._commit(request, commit, now_ms))

    def fetch_offsets(self, request: int, fetch: OffsetFetch, now_ms: int) -> Effects:
        return self._handle(request, fetch.group_id, lambda: self._fetch(request, fetch, now_ms))

    def delete_group(self, request: int, delete: DeleteGroup, now_ms: int) -> Effects:
        return self._handle(
            request, delete.group_id, lambda: self._delete(request, delete.group_id, now_ms)
        )

    def delete_offsets(self, request: int, delete: OffsetDelete, now_ms: int) -> Effects:
        return self._handle(
            request, delete.group_id, lambda: self._delete_offsets(request, delete, now_ms)
        )

    def _handle(self, request: int, group_id: str, handler: Callable[[], None]) -> Effects:
        self._outbox.open(request)

        def answered() -> None:
            try:
                handler()
            except ApiError as exc:
                self._outbox.respond(request, error=kept(exc))
            except Exception as exc:
                if request in self._outbox.waiting:
                    failed = f"The group coordinator failed: {exc}"
                    self._outbox.respond(
                        request, error=ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, failed)
                    )
                raise
            group = self.groups.get(group_id)
            if group is not None:
                self._outbox.effects.wake_by(self._members.deadline(group))

        return self._step(answered)

    def _step(self, action: Callable[[], None]) -> Effects:
        """Runs one step; its effects are returned, or carried by CoordinatorBug."""
        self._outbox.take()  # nothing left from a step that failed before
        try:
            action()
        except Exception as exc:
            raise CoordinatorBug(self._outbox.take()) from exc
        return self._outbox.take()

    # --- offsets --------------------------------------------------------------------

    def _commit(self, request: int, commit: OffsetCommit, now: int) -> None:
        group = self._group(commit.group_id, now, create=True)
        assert group is not None
        if commit.generation_id < 0 and not commit.member_id:
            if group.state is not GroupState.EMPTY:
                raise ApiError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Group '{group.group_id}' has active members: only they may commit.",
                )
        else:
            self._members.check_member(group, commit.member_id, commit.generation_id, now)
            if group.state is GroupState.PREPARING_REBALANCE:
                raise ApiError(
                    ErrorCode.REBALANCE_IN_PROGRESS, "The group is rebalancing: join again."
                )
        prepared = offsets.prepare_commit(
            group.group_id,
            commit.offsets,
            now,
            self._partition_count,
            self.config.offset_metadata_max_bytes,
        )
        if prepared.records:
            pending = _StoreOffsets(request, group, prepared.values, prepared.refused)
            self._outbox.append(group.partition, prepared.records, pending)
        else:
            self._outbox.respond(request, dict(prepared.refused))

    def _fetch(self, request: int, fetch: OffsetFetch, now: int) -> None:
        group = self._group(fetch.group_id, now)
        self._outbox.respond(request, offsets.fetch(group, fetch.partitions))

    def _delete(self, request: int, group_id: str, now: int) -> None:
        group = self._group(group_id, now)
        if group is None:
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"The group '{group_id}' does not exist.")
        if group.state not in (GroupState.EMPTY, GroupState.DEAD):
            raise ApiError(ErrorCode.NON_EMPTY_GROUP, f"The group '{group_id}' has active members.")
        records = [*offset_tombstones(group), group_tombstone(group_id)]
        self._outbox.append(group.partition, records, _DeleteGroup(request, group))

    def _delete_offsets(self, request: int, delete: OffsetDelete, now: int) -> None:
        """Kafka's OffsetDelete: the offsets of topics no member subscribes to are deleted
        (tombstones, acks=all), those of subscribed topics refused GROUP_SUBSCRIBED_TO_TOPIC;
        a partition without an offset is answered as deleted."""
        group = self._group(delete.group_id, now)
        refusal = offsets.offset_delete_refusal(group, delete.group_id)
        if refusal is not None:
            raise refusal
        assert group is not None
        subscribed = offsets.subscribed_topics(group)
        answer: dict[TopicPartition, ApiError | None] = {}
        deleted = []
        for tp in delete.partitions:
            if subscribed is None or tp[0] in subscribed:
                answer[tp] = ApiError(
                    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
                    f"The group '{group.group_id}' is subscribed to topic {tp[0]}.",
                )
                continue
            answer[tp] = None
            if tp in group.offsets and tp not in deleted:
                deleted.append(tp)
        if not deleted:
            self._outbox.respond(request, answer)
            return
        records = [(offset_key(OffsetKey(group.group_id, t, p)), None) for t, p in deleted]
        pending = _DeleteOffsets(request, group, tuple(deleted), answer)
        self._outbox.append(group.partition, records, pending)

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

    def append_done(self, write: int, error: ApiError | None, now_ms: int) -> Effects:
        """The outcome of `Append` number `write`: None when replicated, else the partition's
        error."""
        return self._step(lambda: self._append_done(self._outbox.done(write), error, now_ms))

    def _append_done(self, pending: object, error: ApiError | None, now_ms: int) -> None:
        failure = None
        if error is not None:
            commit = isinstance(pending, _StoreOffsets)
            failure = error_for_commit_append(error) if commit else error_for_append(error)
        if isinstance(pending, _StoreOffsets):
            if failure is None:
                pending.group.offsets.update(pending.values)
                answer = {**dict.fromkeys(pending.values), **pending.refused}
                self._outbox.respond(pending.request, answer)
            else:
                self._outbox.respond(pending.request, error=failure)
            group = pending.group
        elif isinstance(pending, _DeleteGroup):
            if failure is None:
                pending.group.transition(GroupState.DEAD, now_ms)
                if self.groups.get(pending.group.group_id) is pending.group:
                    del self.groups[pending.group.group_id]
                self._outbox.respond(pending.request)
            else:
                self._outbox.respond(pending.request, error=failure)
            group = pending.group
        elif isinstance(pending, _DeleteOffsets):
            if failure is None:
                for tp in pending.deleted:
                    pending.group.offsets.pop(tp, None)
                self._outbox.respond(pending.request, pending.answer)
            else:
                self._outbox.respond(pending.request, error=failure)
            group = pending.group
        elif isinstance(pending, _ExpireOffsets):
            if failure is None:
                log.info("group %s: %d offset(s) expired", pending.group.group_id, pending.count)
                pending.group.offsets.clear()
            group = pending.group
        else:
            group = self._members.append_done(pending, failure, now_ms)
        self._outbox.effects.wake_by(self._members.deadline(group))

    # --- time ---------------------------------------------------------------------------

    def tick(self, now_ms: int) -> Effects:
        """Expires pending member ids and silent members, completes rebalances whose wait is
        over, and every offsets.retention.check.interval.ms expires old offsets. Its
        `wakeup_ms` is the next deadline of any group."""
        return self._step(lambda: self._tick(now_ms))

    def _tick(self, now_ms: int) -> None:
        for group in list(self.groups.values()):
            self._members.expire_members(group, now_ms)
        interval = self.config.offsets_retention_check_interval_ms
        if now_ms - self._last_retention_check_ms >= interval:
            self._last_retention_check_ms = now_ms
            self._expire_offsets(now_ms)
        for group in self.groups.values():
            self._outbox.effects.wake_by(self._members.deadline(group))
        self._outbox.effects.wake_by(self._last_retention_check_ms + interval)

    def _expire_offsets(self, now: int) -> None:
        retention = self.config.offsets_retention_minutes * 60_000
        for group in self.groups.values():
            if not offsets.expired(group, now, retention):
                continue
            records = offset_tombstones(group)
            self._outbox.append(group.partition, records, _ExpireOffsets(group, len(records)))
