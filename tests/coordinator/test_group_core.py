"""The group coordinator's sans-I/O core (coordinator/group/core.py) driven by hand: requests
in with the time, answers, appends and wake-ups out; appends complete when the test says."""

from __future__ import annotations

import itertools
import struct

import pytest

from coordinator.group.config import GroupConfig
from coordinator.group.core import CoordinatorBug, GroupCoordinatorCore
from coordinator.group.messages import (
    Append,
    CommittedOffset,
    DeleteGroup,
    Effects,
    Heartbeat,
    JoinGroup,
    JoinResult,
    LeaveGroup,
    LeavingMember,
    MemberIdRequired,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    Respond,
    SyncGroup,
    SyncResult,
)
from coordinator.group.state import GroupState, IllegalGroupTransition
from metadata.errors import ApiError

SESSION = 10_000
REBALANCE = 30_000
DELAY = 3000
# A single offsets partition: every group on 0.
TOPICS = {"__consumer_offsets": 1, "t": 2, "u": 1}


class Driver:
    """The core and what a pump would do, minus the I/O: request ids, a clock moved by
    hand, answers collected by request id, appends held until the test completes them."""

    def __init__(self, **config: int) -> None:
        self.now = 1_000_000
        settings = {"initial_rebalance_delay_ms": DELAY, **config}
        self.ids = itertools.count(1)
        uuids = (f"u{i}" for i in itertools.count(1))
        self.core = GroupCoordinatorCore(
            1, GroupConfig(**settings), lambda t: TOPICS.get(t, 0), self.now, lambda: next(uuids)
        )
        self.answers: dict[int, Respond] = {}
        self.appends: list[Append] = []
        self.stored: list[tuple[bytes, bytes | None]] = []  # what reached the log
        self.wakeups: list[int] = []

    def take(self, effects: Effects) -> Effects:
        for response in effects.responses:
            assert response.request not in self.answers, "answered twice"
            self.answers[response.request] = response
        self.appends += effects.appends
        if effects.wakeup_ms is not None:
            self.wakeups.append(effects.wakeup_ms)
        return effects

    def load(self) -> None:
        assert self.core.begin_load(0)
        self.take(self.core.load_finished(0, self.now))

    def send(self, handler_name: str, message: object) -> int:
        request = next(self.ids)
        self.take(getattr(self.core, handler_name)(request, message, self.now))
        return request

    def complete_appends(self, error: ApiError | None = None) -> None:
        appends, self.appends = self.appends, []
        for append in appends:
            if error is None:
                self.stored += append.records
            self.take(self.core.append_done(append.write, error, self.now))

    def tick(self, at: int) -> None:
        self.now = at
        self.take(self.core.tick(at))

    def answer(self, request: int) -> object:
        response = self.answers[request]
        if response.error is not None:
            raise response.error
        return response.answer

    def join(
        self,
        member_id: str = "",
        instance: str | None = None,
        group: str = "g",
        rebalance_timeout: int = REBALANCE,
    ) -> int:
        return self.send(
            "join_group",
            JoinGroup(
                group,
                member_id,
                instance,
                "c",
                "h",
                SESSION,
                rebalance_timeout,
                "consumer",
                (("range", b"sub-" + member_id.encode()),),
            ),
        )

    def new_member(self) -> str:
        """A dynamic member's first JoinGroup: KIP-394's id to come back with."""
        first = self.join()
        with pytest.raises(MemberIdRequired) as required:
            self.answer(first)
        return required.value.member_id

    def group(self, group_id: str = "g"):
        return self.core.groups[group_id]


def stable_group_of_one(d: Driver) -> tuple[str, JoinResult]:
    member = d.new_member()
    join = d.join(member)
    assert join not in d.answers  # an empty group's first rebalance waits for more members
    d.tick(d.now + DELAY)
    answer = d.answer(join)
    assert isinstance(answer, JoinResult)
    sync = d.send("sync_group", SyncGroup("g", member, answer.generation_id, {member: b"a"}))
    d.complete_appends()
    assert d.answer(sync) == SyncResult("consumer", "range", b"a")
    return member, answer


def test_a_first_member_gets_an_id_waits_the_initial_delay_and_becomes_leader():
    d = Driver()
    d.load()
    member, answer = stable_group_of_one(d)
    assert member == "c-u1"
    assert answer.leader == member and answer.generation_id == 1
    assert [m.member_id for m in answer.members] == [member]
    assert d.group().state is GroupState.STABLE
    assert d.group().members[member].assignment == b"a"


def test_the_join_is_answered_at_the_tick_the_core_asked_for():
    d = Driver()
    d.load()
    member = d.new_member()
    d.wakeups.clear()
    join = d.join(member)
    assert d.wakeups == [d.now + DELAY]  # group.initial.rebalance.delay.ms
    d.tick(d.now + DELAY - 1)
    assert join not in d.answers
    d.tick(d.now + 1)
    assert d.answer(join).generation_id == 1


def test_a_second_member_rebalances_the_group_and_both_get_the_new_generation():
    d = Driver()
    d.load()
    first, _ = stable_group_of_one(d)
    second = d.new_member()
    join2 = d.join(second)
    assert d.group().state is GroupState.PREPARING_REBALANCE
    with pytest.raises(ApiError, match="REBALANCE_IN_PROGRESS"):
        d.answer(d.send("heartbeat", Heartbeat("g", first, 1)))
    join1 = d.join(first)  # everyone is in, and the group was not empty: no delay
    one, two = d.answer(join1), d.answer(join2)
    assert one.generation_id == two.generation_id == 2
    assert one.leader == first and len(one.members) == 2 and two.members == ()
    assert d.group().state is GroupState.COMPLETING_REBALANCE


def test_a_member_not_back_by_the_rebalance_timeout_is_left_out_at_the_asked_wake_up():
    d = Driver(initial_rebalance_delay_ms=0)
    d.load()
    first = d.new_member()
    d.answer(d.join(first, rebalance_timeout=2000))  # alone, no delay: generation 1 at once
    d.send("sync_group", SyncGroup("g", first, 1, {first: b"a"}))
    d.complete_appends()
    second = d.new_member()
    d.wakeups.clear()
    join2 = d.join(second, rebalance_timeout=2000)
    assert d.wakeups == [d.now + 2000]  # before first's session (10 s) runs out
    start = d.now
    d.tick(start + 1999)
    assert join2 not in d.answers
    d.tick(start + 2000)
    answer = d.answer(join2)
    assert answer.generation_id == 2 and [m.member_id for m in answer.members] == [second]
    assert list(d.group().members) == [second]


def test_a_member_id_handed_out_and_never_used_holds_the_rebalance_only_for_a_session():
    d = Driver()
    d.load()
    first, _ = stable_group_of_one(d)
    d.new_member()  # KIP-394: an id the client never comes back with
    handed_out = d.now
    d.now += 1000
    d.wakeups.clear()
    rejoin = d.join(first)  # the leader rejoins: the group waits for the pending id too
    assert d.wakeups == [handed_out + SESSION + 1]
    d.tick(handed_out + SESSION)
    assert rejoin not in d.answers
    d.tick(handed_out + SESSION + 1)
    assert d.answer(rejoin).generation_id == 2
    assert d.group().pending_members == {}


def test_a_silent_member_is_removed_after_its_session_timeout():
    d = Driver()
    d.load()
    first, _ = stable_group_of_one(d)
    second = d.new_member()
    join2 = d.join(second)
    d.join(first)
    d.answer(join2)
    sync2 = d.send("sync_group", SyncGroup("g", second, 2))  # a follower waits
    assert sync2 not in d.answers
    last_heard = d.now  # from the leader, whose session now runs out first
    d.now += 5000
    d.wakeups.clear()
    d.answer(d.send("heartbeat", Heartbeat("g", second, 2)))
    assert d.wakeups == [last_heard + SESSION + 1]
    d.tick(last_heard + SESSION)
    assert first in d.group().members
    d.tick(last_heard + SESSION + 1)
    # The leader never synced: it is gone, and the waiting follower must rejoin.
    assert list(d.group().members) == [second]
    assert d.group().state is GroupState.PREPARING_REBALANCE
    with pytest.raises(ApiError, match="REBALANCE_IN_PROGRESS"):
        d.answer(sync2)


def test_an_assignment_that_cannot_be_stored_sends_everyone_back_to_join():
    d = Driver()
    d.load()
    first, _ = stable_group_of_one(d)
    second = d.new_member()
    join2 = d.join(second)
    d.join(first)
    d.answer(join2)
    sync2 = d.send("sync_group", SyncGroup("g", second, 2))
    sync1 = d.send("sync_group", SyncGroup("g", first, 2, {first: b"x", second: b"y"}))
    d.complete_appends(ApiError("NOT_ENOUGH_REPLICAS", "isr too small"))
    with pytest.raises(ApiError, match="COORDINATOR_NOT_AVAILABLE"):
        d.answer(sync1)
    with pytest.raises(ApiError, match="REBALANCE_IN_PROGRESS"):
        d.answer(sync2)
    assert d.group().state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in d.group().members.values())


def test_stale_generations_and_unknown_members_are_refused():
    d = Driver()
    d.load()
    member, _ = stable_group_of_one(d)
    with pytest.raises(ApiError, match="ILLEGAL_GENERATION"):
        d.answer(d.send("heartbeat", Heartbeat("g", member, 0)))
    with pytest.raises(ApiError, match="UNKNOWN_MEMBER_ID"):
        d.answer(d.send("heartbeat", Heartbeat("g", "stranger", 1)))
    with pytest.raises(ApiError, match="UNKNOWN_MEMBER_ID"):
        d.answer(d.join("stranger"))
    for session_timeout_ms in (1, 1_800_001):  # group.min/max.session.timeout.ms's defaults
        with pytest.raises(ApiError, match="INVALID_SESSION_TIMEOUT"):
            d.answer(
                d.send(
                    "join_group",
                    JoinGroup(
                        "g",
                        "",
                        None,
                        "c",
                        "h",
                        session_timeout_ms,
                        REBALANCE,
                        "consumer",
                        (("range", b""),),
                    ),
                )
            )


def test_a_partition_not_led_or_still_loading_answers_no_group():
    d = Driver()
    with pytest.raises(ApiError, match="NOT_COORDINATOR"):
        d.answer(d.join())
    assert d.core.begin_load(0) and not d.core.begin_load(0)
    with pytest.raises(ApiError, match="COORDINATOR_LOAD_IN_PROGRESS"):
        d.answer(d.join())
    with pytest.raises(ApiError, match="INVALID_GROUP_ID"):
        d.answer(d.join(group=""))


def test_losing_the_partition_fails_waiting_joins_with_not_coordinator():
    d = Driver()
    d.load()
    join = d.join(d.new_member())
    d.take(d.core.unload(0, d.now))
    with pytest.raises(ApiError, match="NOT_COORDINATOR"):
        d.answer(join)
    assert d.core.groups == {}


def test_a_static_member_that_restarts_keeps_its_assignment_without_a_rebalance():
    d = Driver()
    d.load()
    join = d.join(instance="i-1")
    d.tick(d.now + DELAY)
    old = d.answer(join).member_id
    d.send("sync_group", SyncGroup("g", old, 1, {old: b"mine"}))
    d.complete_appends()
    rejoin = d.join(instance="i-1")
    assert rejoin not in d.answers  # answered once the new member id is stored
    d.complete_appends()
    answer = d.answer(rejoin)
    assert answer.member_id != old and answer.generation_id == 1
    assert d.group().state is GroupState.STABLE
    assert d.group().members[answer.member_id].assignment == b"mine"


def test_offsets_are_checked_and_visible_only_once_stored():
    d = Driver(offset_metadata_max_bytes=4)
    d.load()
    commit = d.send(
        "commit_offsets",
        OffsetCommit(
            "g",
            "",
            -1,
            (
                CommittedOffset("t", 0, 5, 1, "ok"),
                CommittedOffset("t", 2, 5, 1, ""),  # t has partitions 0 and 1
                CommittedOffset("nope", 0, 5, 1, ""),
                CommittedOffset("t", 1, 5, 1, "too long"),
            ),
        ),
    )
    fetch_all = OffsetFetch("g", None)
    assert commit not in d.answers and d.answer(d.send("fetch_offsets", fetch_all)) == {}
    d.complete_appends()
    result = d.answer(commit)
    assert result[("t", 0)] is None
    assert result[("t", 2)].error_name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert result[("nope", 0)].error_name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert result[("t", 1)].error_name == "OFFSET_METADATA_TOO_LARGE"
    fetched = d.answer(d.send("fetch_offsets", OffsetFetch("g", (("t", 0), ("t", 1)))))
    assert fetched[("t", 0)].offset == 5 and fetched[("t", 1)] is None


def test_a_commit_the_log_refuses_is_not_coordinator_and_changes_nothing():
    d = Driver()
    d.load()
    commit = d.send(
        "commit_offsets", OffsetCommit("g", "", -1, (CommittedOffset("t", 0, 5, 1, ""),))
    )
    d.complete_appends(ApiError("NOT_LEADER_OR_FOLLOWER", "moved"))
    with pytest.raises(ApiError, match="NOT_COORDINATOR"):
        d.answer(commit)
    assert d.group().offsets == {}


def test_only_members_commit_to_a_group_with_members():
    d = Driver()
    d.load()
    member, _ = stable_group_of_one(d)
    outside = OffsetCommit("g", "", -1, (CommittedOffset("t", 0, 5, 1, ""),))
    with pytest.raises(ApiError, match="UNKNOWN_MEMBER_ID"):
        d.answer(d.send("commit_offsets", outside))
    inside = OffsetCommit("g", member, 1, (CommittedOffset("t", 0, 5, 1, ""),))
    request = d.send("commit_offsets", inside)
    d.complete_appends()
    assert d.answer(request) == {("t", 0): None}


def test_a_new_coordinator_loads_the_groups_and_offsets_the_old_one_stored():
    d = Driver()
    d.load()
    member, _ = stable_group_of_one(d)
    d.send("commit_offsets", OffsetCommit("g", member, 1, (CommittedOffset("t", 1, 7, 2, "m"),)))
    d.complete_appends()
    successor = Driver()
    assert successor.core.begin_load(0)
    successor.core.load_records(0, d.stored[:1])
    successor.core.load_records(0, d.stored[1:])
    successor.take(successor.core.load_finished(0, successor.now))
    group = successor.group()
    assert group.state is GroupState.STABLE and group.generation == 1
    assert list(group.members) == [member] and group.members[member].assignment == b"a"
    assert group.offsets[("t", 1)].offset == 7
    # Its member's session starts at the load: the core asks to be woken when it runs out.
    assert successor.wakeups == [successor.now + SESSION + 1]


def test_the_last_member_leaving_empties_the_group_which_can_then_be_deleted():
    d = Driver()
    d.load()
    member, _ = stable_group_of_one(d)
    with pytest.raises(ApiError, match="NON_EMPTY_GROUP"):
        d.answer(d.send("delete_group", DeleteGroup("g")))
    leave = d.send("leave_group", LeaveGroup("g", (LeavingMember(member, ""),)))
    assert [r.error for r in d.answer(leave)] == [None]
    assert d.group().state is GroupState.EMPTY and d.group().generation == 2
    delete = d.send("delete_group", DeleteGroup("g"))
    d.complete_appends()
    assert d.answer(delete) is None and "g" not in d.core.groups
    assert d.stored[-1][1] is None  # the group's tombstone
    with pytest.raises(ApiError, match="GROUP_ID_NOT_FOUND"):
        d.answer(d.send("delete_group", DeleteGroup("g")))


def test_offsets_of_an_empty_group_expire_after_the_retention():
    d = Driver(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    d.load()
    d.send("commit_offsets", OffsetCommit("g", "", -1, (CommittedOffset("t", 0, 5, 1, ""),)))
    d.complete_appends()
    d.tick(d.now + 59_000)
    assert d.appends == []
    d.tick(d.now + 1_000)
    [expiry] = d.appends
    assert [value for _, value in expiry.records] == [None]
    d.complete_appends()
    assert d.group().offsets == {}


def test_a_request_id_already_waiting_is_refused():
    d = Driver()
    d.load()
    member = d.new_member()
    join = d.join(member)
    with pytest.raises(ValueError, match="already waiting"):
        d.core.heartbeat(join, Heartbeat("g", member, 0), d.now)


def test_a_broken_rule_raises_and_keeps_what_the_step_had_already_answered():
    d = Driver()
    d.load()
    first, _ = stable_group_of_one(d)
    second = d.new_member()
    join2 = d.join(second)
    d.join(first)
    d.answer(join2)
    sync2 = d.send("sync_group", SyncGroup("g", second, 2))  # waits for the leader's
    third = d.new_member()
    d.group().restore(GroupState.DEAD, d.now)  # by hand: no rule leads here with members
    with pytest.raises(CoordinatorBug) as bug:
        d.join(third)  # PreparingRebalance may not follow Dead
    assert isinstance(bug.value.__cause__, IllegalGroupTransition)
    d.take(bug.value.effects)
    with pytest.raises(ApiError, match="REBALANCE_IN_PROGRESS"):
        d.answer(sync2)  # answered before the transition failed, and not lost
    with pytest.raises(ApiError, match="UNKNOWN_SERVER_ERROR: The group coordinator failed"):
        d.answer(max(d.answers))


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 (Kafka's consumer's JoinGroup metadata)."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)  # no user data


def consumer_of(d: Driver, metadata: bytes, protocol_type: str = "consumer") -> str:
    """A Stable group of one member joined with `metadata` as its subscription."""

    def join(member_id: str) -> int:
        return d.send(
            "join_group",
            JoinGroup(
                "g",
                member_id,
                None,
                "c",
                "h",
                SESSION,
                REBALANCE,
                protocol_type,
                (("range", metadata),),
            ),
        )

    first = join("")
    with pytest.raises(MemberIdRequired) as required:
        d.answer(first)
    member = required.value.member_id
    request = join(member)
    d.tick(d.now + DELAY)
    generation = d.answer(request).generation_id
    d.send("sync_group", SyncGroup("g", member, generation, {member: b"a"}))
    d.complete_appends()
    return member


def committed(d: Driver, *partitions: tuple[str, int]) -> None:
    offsets = tuple(CommittedOffset(t, p, 5, 1, "") for t, p in partitions)
    d.send("commit_offsets", OffsetCommit("g", "", -1, offsets))
    d.complete_appends()


def test_offset_delete_removes_the_offsets_of_topics_no_member_subscribes_to():
    d = Driver()
    d.load()
    committed(d, ("t", 0), ("u", 0))
    consumer_of(d, subscription("t"))
    delete = d.send("delete_offsets", OffsetDelete("g", (("t", 0), ("u", 0), ("t", 1))))
    assert delete not in d.answers and ("u", 0) in d.group().offsets  # once stored
    d.complete_appends()
    answer = d.answer(delete)
    assert answer[("t", 0)].error_name == "GROUP_SUBSCRIBED_TO_TOPIC"
    assert answer[("t", 1)].error_name == "GROUP_SUBSCRIBED_TO_TOPIC"
    assert answer[("u", 0)] is None
    assert set(d.group().offsets) == {("t", 0)}
    assert d.stored[-1][1] is None  # u-0's tombstone
    # Nothing left to delete: answered at once, nothing appended.
    again = d.send("delete_offsets", OffsetDelete("g", (("u", 0),)))
    assert d.answer(again) == {("u", 0): None} and d.appends == []


def test_offset_delete_keeps_everything_when_subscriptions_cannot_be_read():
    d = Driver()
    d.load()
    committed(d, ("u", 0))
    consumer_of(d, b"not a subscription")
    answer = d.answer(d.send("delete_offsets", OffsetDelete("g", (("u", 0),))))
    assert answer[("u", 0)].error_name == "GROUP_SUBSCRIBED_TO_TOPIC"
    assert set(d.group().offsets) == {("u", 0)}


def test_offset_delete_of_an_empty_group_deletes_and_of_no_group_is_not_found():
    d = Driver()
    d.load()
    with pytest.raises(ApiError, match="GROUP_ID_NOT_FOUND"):
        d.answer(d.send("delete_offsets", OffsetDelete("g", (("t", 0),))))
    committed(d, ("t", 0), ("t", 1))
    delete = d.send("delete_offsets", OffsetDelete("g", (("t", 0),)))
    d.complete_appends()
    assert d.answer(delete) == {("t", 0): None}
    assert set(d.group().offsets) == {("t", 1)}


def test_offset_delete_refuses_a_group_with_members_that_is_not_a_consumer_group():
    d = Driver()
    d.load()
    committed(d, ("u", 0))
    consumer_of(d, subscription("t"), protocol_type="connect")
    with pytest.raises(ApiError, match="NON_EMPTY_GROUP"):
        d.answer(d.send("delete_offsets", OffsetDelete("g", (("u", 0),))))


def test_an_offset_delete_the_log_refuses_changes_nothing():
    d = Driver()
    d.load()
    committed(d, ("u", 0))
    delete = d.send("delete_offsets", OffsetDelete("g", (("u", 0),)))
    d.complete_appends(ApiError("NOT_LEADER_OR_FOLLOWER", "moved"))
    with pytest.raises(ApiError, match="NOT_COORDINATOR"):
        d.answer(delete)
    assert set(d.group().offsets) == {("u", 0)}


def test_a_sync_for_another_protocol_than_the_generations_is_inconsistent():
    d = Driver()
    d.load()
    member, joined = stable_group_of_one(d)
    for protocol_type, protocol_name in (("connect", None), (None, "roundrobin")):
        sync = SyncGroup("g", member, joined.generation_id, {}, protocol_type, protocol_name)
        with pytest.raises(ApiError, match="INCONSISTENT_GROUP_PROTOCOL"):
            d.answer(d.send("sync_group", sync))
    same = SyncGroup("g", member, joined.generation_id, {}, "consumer", "range")
    assert d.answer(d.send("sync_group", same)) == SyncResult("consumer", "range", b"a")


def test_a_member_older_than_kip_394_joins_at_once_under_the_id_made_for_it():
    """Kafka's JoinGroup v0-3 (no known member id required): the first join is the join,
    answered with the id the coordinator made, as Kafka's requireKnownMemberId=false."""
    d = Driver()
    d.load()
    join = d.send(
        "join_group",
        JoinGroup(
            "g",
            "",
            None,
            "c",
            "h",
            SESSION,
            REBALANCE,
            "consumer",
            (("range", b"s"),),
            require_known_member_id=False,
        ),
    )
    assert join not in d.answers  # a member: it waits the initial delay like any other
    d.tick(d.now + DELAY)
    answer = d.answer(join)
    assert isinstance(answer, JoinResult)
    assert answer.member_id == "c-u1" and answer.leader == "c-u1"
    assert answer.generation_id == 1
    assert d.group().pending_members == {}


@pytest.mark.parametrize("client_id", ["c" * 32_767, "é" * 20_000])  # 32,767 and 40,000 bytes
def test_a_member_id_made_from_a_long_client_id_still_fits_a_kafka_string(client_id):
    """The client id (a Kafka string, up to 32,767 bytes) + "-" + a UUID made a member id
    that JoinGroup's answer could not encode: the Kafka listener closed the connection."""
    d = Driver()
    d.load()
    request = d.send(
        "join_group",
        JoinGroup("g", "", None, client_id, "h", SESSION, REBALANCE, "consumer", (("range", b""),)),
    )
    with pytest.raises(MemberIdRequired) as required:
        d.answer(request)
    member = required.value.member_id
    assert len(member.encode()) <= 32_767 and member.endswith("-u1")
    assert client_id.startswith(member[: -len("-u1")])
