"""A group moves only along Kafka's classic-protocol transitions (GroupState.scala's
validPreviousStates); anything else is a coordinator bug and raises."""

from __future__ import annotations

import pytest

from broker.group_state import VALID_PREVIOUS, Group, GroupState, IllegalGroupTransition

S = GroupState


def test_kafkas_rebalance_cycle_is_legal():
    group = Group("g", 0)
    for state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE):
        group.transition(state, 1)
    group.transition(S.PREPARING_REBALANCE, 2)
    group.transition(S.EMPTY, 3)
    group.transition(S.DEAD, 4)
    assert (group.state, group.state_timestamp_ms) == (S.DEAD, 4)


@pytest.mark.parametrize(
    ("start", "to"),
    [
        (S.EMPTY, S.STABLE),  # must rebalance first
        (S.STABLE, S.EMPTY),  # the last member leaving goes through PreparingRebalance
        (S.EMPTY, S.COMPLETING_REBALANCE),
        (S.DEAD, S.EMPTY),
        (S.COMPLETING_REBALANCE, S.EMPTY),
    ],
)
def test_other_transitions_raise_and_change_nothing(start, to):
    group = Group("g", 0)
    group.restore(start, 1)
    with pytest.raises(IllegalGroupTransition, match=f"before moving to {to.value}"):
        group.transition(to, 2)
    assert (group.state, group.state_timestamp_ms) == (start, 1)


def test_every_state_has_its_legal_predecessors():
    assert set(VALID_PREVIOUS) == set(GroupState)
    assert VALID_PREVIOUS[S.DEAD] == frozenset(GroupState)
