"""The Raft simulator checks the ordering the node ships, not a copy of it (issue 19):
breaking a rule of raft/ready_handler.py, which the simulated nodes run as raft/driver.py
does, makes seeds of the CI range (test_simulation.CI_SEEDS) fail.

The mutation (ready_handler.split_messages): every message of a Ready leaves before the
Ready is durable, not only a leader's entries-only FetchResponses. A follower's next Fetch
then tells the leader it holds entries it has not fsynced yet; a power cut before the fsync
loses them, while the leader, counting that follower, has already committed them:
invariant (j) sees a committed entry left on a minority. Of the 1,000 CI seeds, the three
below catch it (found by running every CI seed with the mutation in place).

A narrower one sends only granted votes before quorum-state is durable. The random power
cuts of the CI seeds do not strike inside that write, so the scenario that does
(test_scenarios.vote_lost_in_a_power_cut) catches it: two leaders in one epoch."""

from __future__ import annotations

import pytest

from raft import ready_handler
from raft.messages import Message, Ready, VoteResponse
from tests.sim.invariants import InvariantViolation
from tests.sim.simulation import run_seed
from tests.sim.test_scenarios import vote_lost_in_a_power_cut
from tests.sim.test_simulation import CI_SEEDS

SEEDS = (525, 642, 920)


_SPLIT = ready_handler.split_messages


def _nothing_waits_for_the_disk(ready: Ready) -> tuple[list[Message], list[Message]]:
    return list(ready.messages), []


def test_sending_before_the_ready_is_durable_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    assert all(seed in CI_SEEDS for seed in SEEDS)
    monkeypatch.setattr(ready_handler, "split_messages", _nothing_waits_for_the_disk)
    failures = {seed: run_seed(seed).failure for seed in SEEDS}
    missed = [seed for seed, failure in failures.items() if failure is None]
    assert not missed, f"the simulator did not notice sends before the fsync on seeds {missed}"
    for failure in failures.values():
        assert failure is not None and "invariant (j) violated" in failure, failure


@pytest.mark.parametrize("seed", SEEDS)
def test_the_same_seeds_pass_with_the_order_intact(seed: int) -> None:
    assert run_seed(seed).failure is None


def _votes_before_the_disk(ready: Ready) -> tuple[list[Message], list[Message]]:
    early, later = _SPLIT(ready)
    votes = [m for m in later if isinstance(m, VoteResponse)]
    return early + votes, [m for m in later if not isinstance(m, VoteResponse)]


def test_a_vote_sent_before_quorum_state_has_it_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ready_handler, "split_messages", _votes_before_the_disk)
    with pytest.raises(InvariantViolation, match=r"invariant \(a\) violated"):
        vote_lost_in_a_power_cut()
