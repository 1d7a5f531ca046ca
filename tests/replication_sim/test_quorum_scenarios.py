"""Controller failover as scripted stories (scenarios.quiet_world: brokers 1, 2, 3, b1 leading
first, no random faults), with every invariant checked after every event as in a seeded run:
the brokers follow the quorum to its new active controller and their calls commit there, and
a controller that comes back fences nobody it had no chance to hear from."""

from __future__ import annotations

import pytest

from metadata.broker_lifecycle import HeartbeatTracker
from tests.replication_sim.quorum import node_of
from tests.replication_sim.scenarios import isr, quiet_world, wait_for
from tests.replication_sim.world import World
from tests.sim.invariants import InvariantViolation


def active_node(world: World) -> int | None:
    found = world.controller.quorum.active()
    return None if found is None else found[0]


def test_brokers_follow_a_failover_and_their_isr_change_commits_on_the_new_controller():
    """The active controller of three crashes. Raft elects another node, whose core becomes
    active once its epoch's first entry is committed; the brokers' calls to the crashed node
    get no answer, the next voter answers NOT_CONTROLLER naming the new leader (or is it),
    and ControllerRouting takes every broker there. b1 then drops b3 from the ISR: its
    AlterPartition commits on the new controller. No broker is fenced on the way: the new
    controller gave every registered broker a full session when it became active."""
    with quiet_world(controllers=3, session_timeout_ms=3_000) as world:
        quorum = world.controller.quorum
        world.run_until(world.now_ms + 1_000)
        first = active_node(world)
        assert first is not None
        quorum.crash(first)
        wait_for(
            world,
            lambda: active_node(world) not in (None, first),
            10_000,
            "another controller is active",
        )
        second = active_node(world)
        assert second is not None
        wait_for(
            world,
            lambda: all(b.link.routing.target == node_of(second) for b in world.brokers.values()),
            5_000,
            f"every broker calls controller {node_of(second)}",
        )
        world.network.cut(1, 3)
        wait_for(world, lambda: isr(world) == {1, 2}, 10_000, "b1 drops b3 from the ISR")
        assert world.controller.stats.isr_changes >= 1
        assert world.controller.stats.fences == 0
        assert not any(b.fenced for b in world.controller.image.cluster.brokers.values())
        quorum.restart(first)
        world.network.heal(1, 3)
        wait_for(world, lambda: isr(world) == {1, 2, 3}, 10_000, "b3 is back in the ISR")


def single_controller_down_longer_than_a_session(echo: bool = False) -> None:
    """The only controller is down for twice a session and comes back: a new incarnation,
    which heard from no broker yet. It becomes active, gives every registered broker a full
    session from then (HeartbeatTracker.reseed), and the brokers' heartbeats reach it within
    it: nobody is fenced."""
    with quiet_world(echo, controllers=1, session_timeout_ms=1_500) as world:
        quorum = world.controller.quorum
        world.run_until(world.now_ms + 1_000)
        quorum.crash(1)
        world.run_until(world.now_ms + 3_000)
        quorum.restart(1)
        wait_for(world, lambda: active_node(world) == 1, 5_000, "the controller is back")
        world.run_until(world.now_ms + 3_000)
        assert world.controller.stats.fences == 0
        assert not any(b.fenced for b in world.controller.image.cluster.brokers.values())


def test_a_controller_back_after_longer_than_a_session_fences_nobody():
    single_controller_down_longer_than_a_session()


def test_the_same_story_without_reseeding_the_sessions_breaks_invariant_t(monkeypatch):
    """Without the product's reseed the restarted controller knows no contact at all and
    fences every broker at its first session check: invariant (t) says so."""
    monkeypatch.setattr(HeartbeatTracker, "reseed", lambda self, image, now_ms: None)
    with pytest.raises(InvariantViolation, match=r"invariant \(t\)"):
        single_controller_down_longer_than_a_session()
