"""The membership rules of a classic consumer group (Kafka's ClassicGroup protocol in its
GroupMetadataManager): JoinGroup with KIP-394 member ids and KIP-345 static members,
rebalances (the initial delay, the rebalance timeout, laggards left out), SyncGroup and the
storing of the leader's assignment, Heartbeat, LeaveGroup and session expiry. Part of the
sans-I/O core (coordinator/group/core.py, which finds the group and routes each request):
it answers and appends through the step's Outbox.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from coordinator.group.config import GroupConfig
from coordinator.group.messages import (
    Heartbeat,
    JoinedMember,
    JoinGroup,
    JoinResult,
    LeaveGroup,
    LeaveResult,
    MemberIdRequired,
    SyncGroup,
    SyncResult,
)
from coordinator.group.outbox import Outbox
from coordinator.group.persistence import metadata_record
from coordinator.group.state import Group, GroupState, Member
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode

# Kafka's strings carry an int16 length: a member id goes back in JoinGroup answers (and in
# __consumer_offsets records) as one, so it is at most this many bytes in UTF-8.
MAX_MEMBER_ID_BYTES = 32_767


def new_member_id(prefix: str, unique: str) -> str:
    """Kafka's member id, `prefix` (the client id, or the group instance id) + "-" + a UUID,
    with the prefix cut (at a character boundary) so the id fits a Kafka string: a client id
    of 32,767 bytes made one that JoinGroup could not answer."""
    room = MAX_MEMBER_ID_BYTES - 1 - len(unique.encode())
    head = prefix.encode()
    if len(head) > room:
        prefix = head[:room].decode(errors="ignore")
    return f"{prefix}-{unique}"


log = logging.getLogger("strom.groups")


def _rebalancing() -> ApiError:
    return ApiError(ErrorCode.REBALANCE_IN_PROGRESS, "The group is rebalancing: join again.")


# What a membership append does once it is done (the core calls back on append_done).


@dataclass(frozen=True, slots=True)
class StoreQuietly:
    """Group metadata stored in the background (a group that became Empty)."""

    group: Group


@dataclass(frozen=True, slots=True)
class StoreStaticRejoin:
    """A static member's new id: its JoinGroup is answered once stored."""

    request: int
    group: Group
    member: Member


@dataclass(frozen=True, slots=True)
class StoreAssignment:
    """The leader's assignment: the group is Stable, and its SyncGroups answered, once
    stored."""

    request: int  # the leader's SyncGroup
    group: Group
    leader: Member
    generation: int


class Membership:
    def __init__(self, config: GroupConfig, outbox: Outbox, new_uuid: Callable[[], str]) -> None:
        self.config = config
        self.outbox = outbox
        self.new_uuid = new_uuid

    # --- JoinGroup ------------------------------------------------------------------

    def check_session(self, join: JoinGroup) -> None:
        config = self.config
        if (
            not config.min_session_timeout_ms
            <= join.session_timeout_ms
            <= (config.max_session_timeout_ms)
        ):
            raise ApiError(
                ErrorCode.INVALID_SESSION_TIMEOUT,
                f"session.timeout.ms {join.session_timeout_ms} is outside the broker's "
                f"[{config.min_session_timeout_ms}, {config.max_session_timeout_ms}] "
                "(group.min/max.session.timeout.ms).",
            )

    def join(self, request: int, group: Group | None, join: JoinGroup, now: int) -> None:
        """`group`: the group, made new unless the member names itself."""
        protocols = list(join.protocols)
        if group is None:
            raise ApiError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"The group '{join.group_id}' does not know this member.",
            )
        if not group.supports(join.protocol_type, [p for p, _ in protocols]):
            group.pending_members.pop(join.member_id, None)
            raise ApiError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                "The member's protocol type or assignors do not match the group's members'.",
            )
        instance = join.group_instance_id or None
        member_id = join.member_id
        if not member_id and instance is not None:
            self._join_static(request, group, join, protocols, instance, now)
            return
        if not member_id:
            # KIP-394: hand out an id and have the member come back with it; a client older
            # than KIP-394 (Kafka's JoinGroup v0-3) joins at once under the id made for it,
            # as Kafka's coordinator does when the version does not require a known id.
            new_id = new_member_id(join.client_id or "member", self.new_uuid())
            group.pending_members[new_id] = now + join.session_timeout_ms
            if join.require_known_member_id:
                raise MemberIdRequired(new_id)
            member_id = new_id
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
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not in group '{group.group_id}'.",
            )
        member = known
        member.last_heartbeat_ms = now
        changed = member.protocols != protocols
        member.protocols = protocols
        member.session_timeout_ms = join.session_timeout_ms
        member.rebalance_timeout_ms = join.rebalance_timeout_ms
        if group.state is GroupState.STABLE and not changed and member_id != group.leader:
            # A follower rejoining with nothing new: it gets the current generation again.
            self.outbox.respond(request, self.join_answer(group, member))
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
        new_id = new_member_id(instance, self.new_uuid())
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
                    ErrorCode.FENCED_INSTANCE_ID,
                    "A newer instance with the same group.instance.id joined.",
                ),
            )
            if group.leader == old_id:
                group.leader = new_id
            if group.state is GroupState.STABLE and old.protocols == protocols:
                # KIP-345: a known static member coming back changes nothing else; it is
                # answered once the new member id is stored.
                rejoin = StoreStaticRejoin(request, group, member)
                self.outbox.append(group.partition, [metadata_record(group)], rejoin)
                return
        if group.leader is None:
            group.leader = new_id
        self._await_join(request, group, member, now)

    def _await_join(self, request: int, group: Group, member: Member, now: int) -> None:
        if member.join_request is not None:
            self.outbox.respond(
                member.join_request,
                error=ApiError(
                    ErrorCode.UNKNOWN_MEMBER_ID, "Superseded by a newer JoinGroup of this member."
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
                self.outbox.respond(m.sync_request, error=_rebalancing())
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
            self.outbox.append(group.partition, [metadata_record(group)], StoreQuietly(group))
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
                self.outbox.respond(waiting, self.join_answer(group, member))

    def join_answer(self, group: Group, member: Member) -> JoinResult:
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

    def sync(self, request: int, group: Group | None, sync: SyncGroup, now: int) -> None:
        member = self.check_member(group, sync.member_id, sync.generation_id, now)
        assert group is not None
        if (sync.protocol_type is not None and sync.protocol_type != group.protocol_type) or (
            sync.protocol_name is not None and sync.protocol_name != group.protocol
        ):
            # Kafka's isProtocolTypeAndNameConsistent: a member syncing for another protocol
            # than the generation's (SyncGroup v5+ names it).
            raise ApiError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"The group's protocol is {group.protocol_type}/{group.protocol}, not "
                f"{sync.protocol_type}/{sync.protocol_name}.",
            )
        if group.state is GroupState.PREPARING_REBALANCE:
            raise _rebalancing()
        if group.state is GroupState.STABLE:
            self.outbox.respond(request, self._sync_answer(group, member))
            return
        # CompletingRebalance: wait for the leader's assignment to be stored. A member's
        # earlier SyncGroup still waiting (its client gave up and retried) is answered now;
        # Kafka leaves it to the request timeout, but the pump would hold it forever.
        if member.sync_request is not None:
            self.outbox.respond(
                member.sync_request,
                error=ApiError(
                    ErrorCode.UNKNOWN_MEMBER_ID, "Superseded by a newer SyncGroup of this member."
                ),
            )
        member.sync_request = request
        if sync.member_id == group.leader:
            for m in group.members.values():
                m.assignment = sync.assignments.get(m.member_id, b"")
            self.outbox.append(
                group.partition,
                [metadata_record(group)],
                StoreAssignment(request, group, member, group.generation),
            )

    def _sync_answer(self, group: Group, member: Member) -> SyncResult:
        return SyncResult(group.protocol_type or "", group.protocol or "", member.assignment)

    def assignment_stored(self, pending: StoreAssignment, error: ApiError | None, now: int) -> None:
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
                        self.outbox.respond(m.sync_request, self._sync_answer(group, m))
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
            self.outbox.respond(pending.request, error=error)

    def check_member(
        self, group: Group | None, member_id: str, generation: int, now: int
    ) -> Member:
        if group is None or group.state is GroupState.DEAD:
            raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID, "The group does not exist (any more).")
        member = group.members.get(member_id)
        if member is None:
            raise ApiError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not in group '{group.group_id}'.",
            )
        if generation != group.generation:
            raise ApiError(
                ErrorCode.ILLEGAL_GENERATION,
                f"Generation {generation} is not the group's current {group.generation}.",
            )
        member.last_heartbeat_ms = now
        return member

    # --- Heartbeat and LeaveGroup ---------------------------------------------------

    def heartbeat(self, request: int, group: Group | None, beat: Heartbeat, now: int) -> None:
        self.check_member(group, beat.member_id, beat.generation_id, now)
        assert group is not None
        if group.state is GroupState.PREPARING_REBALANCE:
            raise _rebalancing()
        self.outbox.respond(request)

    def leave(self, request: int, group: Group | None, leave: LeaveGroup, now: int) -> None:
        results: list[LeaveResult] = []
        not_a_member = ApiError(ErrorCode.UNKNOWN_MEMBER_ID, "Not a member.")  # one for all
        for m in leave.members:
            member_id = m.member_id
            if not member_id and m.group_instance_id and group is not None:
                member_id = group.static_members.get(m.group_instance_id, "")
            if group is None or member_id not in group.members:
                results.append(LeaveResult(m.member_id, m.group_instance_id, not_a_member))
                continue
            self._remove(group, member_id)
            results.append(LeaveResult(member_id, m.group_instance_id, None))
            self._member_gone(group, now, f"member {member_id} left")
        self.outbox.respond(request, tuple(results))

    def _remove(self, group: Group, member_id: str) -> None:
        member = group.members.pop(member_id, None)
        if member is None:
            return
        if (
            member.group_instance_id
            and group.static_members.get(member.group_instance_id) == member_id
        ):
            del group.static_members[member.group_instance_id]
        self._fail_member_waiters(
            member, ApiError(ErrorCode.UNKNOWN_MEMBER_ID, "The member was removed.")
        )
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
                self.outbox.append(group.partition, [metadata_record(group)], StoreQuietly(group))
        self._maybe_complete_join(group, now)

    def _fail_member_waiters(self, member: Member, error: ApiError) -> None:
        for waiting in (member.join_request, member.sync_request):
            if waiting is not None:
                self.outbox.respond(waiting, error=error)
        member.join_request = member.sync_request = None

    def fail_waiters(self, group: Group, error: ApiError) -> None:
        for member in group.members.values():
            self._fail_member_waiters(member, error)

    def append_done(self, pending: object, failure: ApiError | None, now: int) -> Group:
        """A membership append is done (`failure`: None, or what a client sees); returns
        its group."""
        if isinstance(pending, StoreQuietly):
            if failure is not None:
                log.info(
                    "group %s: could not store its metadata: %s", pending.group.group_id, failure
                )
        elif isinstance(pending, StoreStaticRejoin):
            if failure is None:
                answer = self.join_answer(pending.group, pending.member)
                self.outbox.respond(pending.request, answer)
            else:
                self.outbox.respond(pending.request, error=failure)
        elif isinstance(pending, StoreAssignment):
            self.assignment_stored(pending, failure, now)
        else:
            raise TypeError(f"not a membership append: {pending!r}")
        return pending.group

    # --- time -----------------------------------------------------------------------

    def expire_members(self, group: Group, now: int) -> None:
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

    def deadline(self, group: Group) -> int | None:
        """The next time `expire_members` can change this group: a pending member id or a
        member's session running out, or the end of a rebalance's wait."""
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
