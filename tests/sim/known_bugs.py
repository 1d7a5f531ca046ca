"""Core bugs the simulator has found and that are not fixed yet.

Each entry says how to recognise a run that failed because of it (`matches`, looking at the
cluster when the run failed; for a bug that shows as one of the core's own assertions rather
than as a liveness failure, also `raised`, the exception's message) and names a few seeds
that show it. An invariant violation is never a known bug. test_simulation.py
- runs those seeds as xfail(strict=True): once the core is fixed they pass, and the strict
  mark turns that into a failure that says "remove the entry";
- tolerates (reports as xfailed) a seed of its CI range that fails *with this signature*, so
  one known bug does not hide behind a red suite every day; any other failure fails.
Delete an entry once its bug is fixed, together with the xfail mark of the scenario test
that reproduces it (test_scenarios.py names the entry), which turns into a regression test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from raft.roles import Role
from tests.sim.cluster import SimNode
from tests.sim.world import World


@dataclass(frozen=True, slots=True)
class KnownBug:
    name: str
    reason: str
    seeds: tuple[int, ...]
    matches: Callable[[World], bool]
    # A pattern the exception out of the core ("Type: message") matches; None: the bug
    # shows as a liveness failure.
    raised: str | None = None


def _settled_but(world: World, stuck: Callable[[SimNode, int], bool]) -> bool:
    """The cluster has a leader and every other up node follows it and has its high
    watermark, except some nodes (at least one) for which `stuck(node, epoch)` holds."""
    leader = world.leader()
    if leader is None or leader.core is None:
        return False
    epoch, hw = leader.core.epoch, leader.core.high_watermark
    odd = 0
    for node in world.cluster.nodes.values():
        core = node.core
        if node is leader or core is None:
            continue
        if core.role is Role.FOLLOWER and core.epoch == epoch and core.leader_id == leader.node_id:
            if core.high_watermark != hw:
                return False
        elif stuck(node, epoch):
            odd += 1
        else:
            return False
    return odd > 0


def _voter_prospective(node: SimNode, epoch: int) -> bool:
    core = node.core
    return (
        node.is_voter
        and core is not None
        and core.role is Role.PROSPECTIVE
        and (core.epoch == epoch)
    )


def _voter_ahead_of_the_leader(node: SimNode, epoch: int) -> bool:
    core = node.core
    return (
        node.is_voter
        and core is not None
        and core.epoch > epoch
        and core.role
        in (
            Role.PROSPECTIVE,
            Role.UNATTACHED,
            Role.CANDIDATE,
        )
    )


def _observer_unattached(node: SimNode, epoch: int) -> bool:
    core = node.core
    return (
        not node.is_voter
        and core is not None
        and core.role is Role.UNATTACHED
        and (core.epoch == epoch)
    )


# None open. Fixed so far (each now guarded by a scenario test in test_scenarios.py):
# - voter-stuck-in-a-later-epoch (seed 8234): a voter that became Candidate in epoch e+1 and
#   lost its VoteRequests stayed in e+1 for good; a pre-vote now moves its receiver to e+1.
# - late-fetch-response-during-snapshot-download (seed 4665, an AssertionError out of
#   _install_snapshot, so recorded with `raised`): a Fetch reached the leader twice, answered
#   with entries, then (after a compaction) with the snapshot; the follower started the
#   download, then took the late entries too, its high watermark passing the snapshot's end.
#   A follower downloading a snapshot now ignores every FetchResponse.
KNOWN_BUGS: tuple[KnownBug, ...] = ()


def known_bug(name: str) -> KnownBug:
    return next(bug for bug in KNOWN_BUGS if bug.name == name)


def classify(world: World | None, error: BaseException | None = None) -> KnownBug | None:
    """The known bug a failed run shows, if any: a liveness failure (no `error`), or the
    exception `error` out of the core."""
    if world is None:
        return None
    raised = None if error is None else f"{type(error).__name__}: {error}"
    for bug in KNOWN_BUGS:
        if (bug.raised is None) != (raised is None):
            continue
        if bug.raised is not None and raised is not None and not re.search(bug.raised, raised):
            continue
        if bug.matches(world):
            return bug
    return None
