"""A group moves only along Kafka's classic-protocol transitions (GroupState.scala's
validPreviousStates); anything else is a coordinator bug and raises."""

from __future__ import annotations

import pytest

from coordinator.group.state import (
    VALID_PREVIOUS,
    Group,
    GroupState,
    IllegalGroupTransition,
    Member,
)

S = GroupState


def test_kafkas_rebalance_cycle_is_legal():
    group = Group("g", 0)
    for state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE):
        group.transition(state, 1)
    group.transition(S.PREPARING_REBALANCE, 2)
    group.transition(S.EMPTY, 3)
    group.transition(S.DEAD, 4)
    assert (group.state, group.state_timestamp_ms) == (S.DEAD, 4)


# Kafka's table (GroupState.scala's validPreviousStates) written out as (from, to) pairs, so
# that a change to VALID_PREVIOUS shows up here as a failing row.
KAFKA_LEGAL = {
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    *((state, S.DEAD) for state in S),
}
ILLEGAL = [(a, b) for a in S for b in S if (a, b) not in KAFKA_LEGAL]


def test_the_table_is_kafkas():
    assert {(a, b) for b, previous in VALID_PREVIOUS.items() for a in previous} == KAFKA_LEGAL
    # e.g. Empty -> Stable (must rebalance first), Stable -> Empty (the last member leaving
    # goes through PreparingRebalance), Dead -> anything but Dead.
    assert len(ILLEGAL) == 25 - len(KAFKA_LEGAL) == 14


@pytest.mark.parametrize(("start", "to"), sorted(KAFKA_LEGAL, key=str))
def test_each_legal_transition_is_taken(start, to):
    group = Group("g", 0)
    group.restore(start, 1)
    group.transition(to, 2)
    assert (group.state, group.state_timestamp_ms) == (to, 2)


@pytest.mark.parametrize(("start", "to"), ILLEGAL)
def test_each_illegal_transition_raises_and_changes_nothing(start, to):
    group = Group("g", 0)
    group.restore(start, 1)
    with pytest.raises(
        IllegalGroupTransition,
        match=f"before moving to {to.value} state. Instead it is in {start.value} state",
    ):
        group.transition(to, 2)
    assert (group.state, group.state_timestamp_ms) == (start, 1)


def test_every_state_has_its_legal_predecessors():
    assert set(VALID_PREVIOUS) == set(GroupState)
    assert VALID_PREVIOUS[S.DEAD] == frozenset(GroupState)


class CountingMember(Member):
    """A member counting how often its protocol names are listed."""

    listed = 0

    def protocol_names(self) -> list[str]:
        CountingMember.listed += 1
        return super().protocol_names()


def member(member_id: str, *names: str) -> Member:
    return CountingMember(
        member_id, None, "c", "h", 10_000, 10_000, "consumer", [(n, b"") for n in names]
    )


def group_of(*members: Member) -> Group:
    return Group("g", 0, members={m.member_id: m for m in members})


def test_the_protocol_is_kafkas_vote_among_those_every_member_supports():
    assert (
        group_of(
            member("a", "range", "roundrobin"), member("b", "roundrobin", "range")
        ).select_protocol()
        == "range"
    )  # a tie: the first member's first
    assert (
        group_of(
            member("a", "x", "sticky", "range"),
            member("b", "range", "sticky"),
            member("c", "sticky"),
        ).select_protocol()
        == "sticky"
    )
    assert (
        group_of(
            member("a", "range", "range", "rr"), member("b", "rr", "range"), member("c", "rr")
        ).select_protocol()
        == "rr"
    )


def test_a_member_listing_a_protocol_thousands_of_times_is_read_once():
    """A JoinGroup listing "range" 20,000 times held the coordinator's loop for 7 s: each
    name was looked up in every member's list, listed anew each time."""
    CountingMember.listed = 0
    many = group_of(member("a", *["range"] * 20_000), member("b", *["x"] * 20_000, "range"))
    assert many.select_protocol() == "range"
    assert CountingMember.listed == 2
