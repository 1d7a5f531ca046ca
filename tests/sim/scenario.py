"""Helpers for scripted runs of the simulated world (test_scenarios.py).

A scenario is a World with no random faults (a seed still drives delays and the cores'
election timers) in which the test itself partitions, crashes and proposes, then waits for
an outcome with a bound. The invariants are checked after every event as in a seeded run;
a wait that runs out fails with the cluster's state and the end of the trace.
"""

from __future__ import annotations

from collections.abc import Callable

from raft.config import RaftConfig
from raft.core import NotLeaderError
from raft.messages import SnapshotId
from tests.sim.cluster import ClusterConfig, SimNode, TickMode
from tests.sim.network import NetworkConfig
from tests.sim.world import World

CALM = NetworkConfig(min_delay_ms=1, max_delay_ms=5)


class ScenarioTimeout(AssertionError):
    pass


def make_world(
    voters: int = 3,
    observers: int = 0,
    seed: int = 1,
    network: NetworkConfig = CALM,
    tick_mode: TickMode = TickMode.WAKEUP,
    raft: RaftConfig | None = None,
) -> World:
    config = ClusterConfig(
        voters=voters, observers=observers, tick_mode=tick_mode, raft=raft or RaftConfig()
    )
    return World(seed, config, network)


def wait_for(world: World, condition: Callable[[], bool], within_ms: int, what: str) -> int:
    """Runs until `condition()` holds; returns how long that took in simulated ms."""
    start = world.now_ms
    if condition() or world.run_for(within_ms, stop=condition):
        return world.now_ms - start
    tail = "\n".join(world.trace.lines(40))
    raise ScenarioTimeout(
        f"not within {within_ms} ms: {what}\n{world.describe()}\nlast trace lines:\n{tail}"
    )


def stable_leader(world: World, within_ms: int = 10_000) -> SimNode:
    """Waits for a leader whose epoch every up voter has joined and whose LeaderChange record
    every up voter has applied, so the cluster is quiet before the scenario's fault."""

    def settled() -> bool:
        leader = world.leader()
        if leader is None or leader.core is None:
            return False
        epoch = leader.core.epoch
        voters = [n for n in world.cluster.up_nodes() if n.is_voter]
        return (
            all(
                n.core is not None and n.core.epoch == epoch and n.applied >= leader.applied
                for n in voters
            )
            and leader.core.high_watermark > 0
        )

    wait_for(world, settled, within_ms, "a settled leader")
    leader = world.leader()
    assert leader is not None
    return leader


def propose(world: World, records: list[bytes], node_id: int | None = None) -> int:
    """Proposes to `node_id`, or to the current leader; returns the last offset."""
    if node_id is None:
        leader = world.leader()
        assert leader is not None, "no leader to propose to"
        node_id = leader.node_id
    try:
        last = world.cluster.propose(node_id, records)
    finally:
        world.after_event()
    return last


def snapshot(world: World, node_id: int, compact: bool = True) -> SnapshotId:
    """The node's state machine snapshots everything it applied; with `compact` the log
    then starts there."""
    node = world.cluster.nodes[node_id]
    try:
        return world.cluster.snapshot(node_id, node.applied, compact)
    finally:
        world.after_event()


def try_propose(world: World, records: list[bytes]) -> bool:
    try:
        propose(world, records)
    except (NotLeaderError, AssertionError):
        return False
    return True


def applied_everywhere(world: World, records: list[bytes], nodes: list[int]) -> Callable[[], bool]:
    """A condition: every record is committed and each of `nodes` has applied it."""

    def done() -> bool:
        offsets = world.checker.offset_of
        if any(r not in offsets for r in records):
            return False
        last = max(offsets[r] for r in records)
        return all(world.cluster.nodes[i].applied > last for i in nodes)

    return done
