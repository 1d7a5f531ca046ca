"""The broker's rule for finding the active controller (broker/controller_routing.py), value
in, value out: where each try goes after no answer, after an error naming the Raft leader,
and how many tries a call makes."""

from __future__ import annotations

import pytest

from broker.controller_routing import ControllerRouting


def test_the_first_try_goes_to_the_lowest_voter_and_a_call_makes_voters_plus_one_tries():
    routing = ControllerRouting([3002, 3000, 3001])
    assert routing.target == 3000
    assert routing.attempts == 4
    assert ControllerRouting([7]).attempts == 2


def test_no_answer_moves_on_to_the_next_voter_round_again():
    routing = ControllerRouting([1, 2, 3])
    seen = []
    for _ in range(4):
        routing.no_answer()
        seen.append(routing.target)
    assert seen == [2, 3, 1, 2]


def test_an_error_naming_a_voter_sends_the_next_try_there():
    routing = ControllerRouting([1, 2, 3])
    routing.refused(3)
    assert routing.target == 3
    routing.refused(3)  # the leader asked names itself: not active yet, ask it again
    assert routing.target == 3


def test_an_error_naming_no_voter_moves_on():
    routing = ControllerRouting([1, 2, 3])
    routing.refused(-1)  # no leader known (an election)
    assert routing.target == 2
    routing.refused(9)  # not a voter of this broker's quorum
    assert routing.target == 3


def test_a_forwarded_request_follows_another_voter_at_once_and_else_backs_off():
    routing = ControllerRouting([1, 2, 3])
    assert routing.forward_refused(2) is True
    assert routing.target == 2
    assert routing.forward_refused(2) is False  # named the one just asked: next, after a pause
    assert routing.target == 3
    assert routing.forward_refused(-1) is False
    assert routing.target == 1


def test_no_voters_is_refused():
    with pytest.raises(ValueError, match="at least one controller voter"):
        ControllerRouting([])
