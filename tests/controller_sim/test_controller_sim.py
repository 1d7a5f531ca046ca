"""The controller over the simulated Raft (issue 4's proof): seeded runs, plus scenarios for
broker loss, a controller failover mid-operation and a restart from a snapshot.

Every run checks the Raft invariants of tests/sim and the metadata ones of checker.py after
every event. A failing seed prints the command that replays it. More seeds:
    CONTROLLER_SIM_SEEDS=2000 .venv/bin/pytest -q tests/controller_sim
    .venv/bin/python -m tests.controller_sim --seeds 2000 [--start S]
"""

from __future__ import annotations

import os
import random

import pytest

from metadata.controller_core import ControllerCore
from metadata.image import MetadataImage
from metadata.records import NO_LEADER
from metadata.topic_control import NewTopic, create_topics
from raft.config import RaftConfig
from tests.controller_sim.checker import Operation
from tests.controller_sim.controller import ControllerConfig, SimController
from tests.controller_sim.machine import MetadataStateMachine
from tests.controller_sim.simulation import run_seed, summarize
from tests.controller_sim.world import ControllerWorld, make_controller_world
from tests.sim.cluster import ClusterConfig
from tests.sim.scenario import snapshot, stable_leader, wait_for

SEEDS = int(os.environ.get("CONTROLLER_SIM_SEEDS", "300"))
CHUNK = 25
CHUNKS = [range(s, min(s + CHUNK, SEEDS)) for s in range(0, SEEDS, CHUNK)]


@pytest.mark.parametrize("seeds", CHUNKS, ids=[f"seeds-{r.start}-{r.stop - 1}" for r in CHUNKS])
def test_seeds(seeds: range) -> None:
    results = [run_seed(seed) for seed in seeds]
    failures = [r.failure for r in results if r.failure is not None]
    if failures:
        heads = "\n".join(f.split("\n", 2)[0] + "\n" + f.split("\n", 2)[1] for f in failures)
        pytest.fail(
            f"{len(failures)} of {len(seeds)} seeds failed:\n{heads}\n\nthe first in full:\n"
            + failures[0],
            pytrace=False,
        )
    # The runs must exercise what they claim to: operations commit, leaders change under
    # them, brokers get fenced, snapshots get loaded.
    summary = summarize(results)
    ops: dict[str, int] = {}
    for r in results:
        for kind, n in r.operations.items():
            ops[kind] = ops.get(kind, 0) + n
    for kind in ("register", "heartbeat", "create", "delete", "alter-isr", "fence"):
        assert ops.get(kind, 0) > 0, f"no {kind} committed: {summary}"
    assert sum(r.activations for r in results) > len(seeds), summary
    # Operations overlap: many are proposed while earlier ones are still pending, and
    # some of those are abandoned together when leadership moves.
    assert sum(r.pipelined for r in results) > len(seeds), summary


# --- mutation checks: the seeds catch a broken pipelining rule in the product -----------------


def _renounce_keeping_pending(self: ControllerCore) -> list:  # type: ignore[type-arg]
    """Leadership lost, but the pending writes stay (the image is not reverted)."""
    if self.epoch is not None:
        self._renounced_epoch = self.epoch
    self.epoch = None
    return []


MUTANTS = {
    # The three rules of metadata/controller_core.py, each broken once.
    "pending state kept on leadership loss": (
        "renounce",
        _renounce_keeping_pending,
        ("(r)", "(s)", "(p)"),
    ),
    "completed one record before its commit": (
        "is_complete",
        lambda self, pending: pending.last <= self.committed.offset,
        ("(r)",),
    ),
    "computed against the committed image, not the pending one": (
        "image",
        property(lambda self: self.committed),
        ("(s)",),
    ),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_the_seeds_catch_a_broken_pipelining_rule(
    mutant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutation check (issue 19): the simulator runs the product's ControllerCore, so
    breaking one of its rules must fail the CI seeds (they pass intact: test_seeds), with
    the invariant that rule protects."""
    name, broken, letters = MUTANTS[mutant]
    monkeypatch.setattr(ControllerCore, name, broken)
    for seed in range(SEEDS):
        failure = run_seed(seed).failure
        if failure is not None:
            head = failure.split("\n", 1)[0]
            assert any(f"invariant {letter} violated" in head for letter in letters), head
            return
    pytest.fail(f"no seed of {SEEDS} caught the mutant: {mutant}")


# --- scenarios ---------------------------------------------------------------------------------


def _controller(world: ControllerWorld, brokers: int = 3) -> SimController:
    config = ControllerConfig(brokers=brokers, death_every_ms=None, session_timeout_ms=2_000)
    controller = SimController(world, random.Random(7), config)
    controller.start(random_ops=False)
    return controller


def _image(controller: SimController) -> MetadataImage:
    node = controller.active()
    assert node is not None
    sm = node.sm
    assert isinstance(sm, MetadataStateMachine)
    return sm.image


def _converged(world: ControllerWorld, controller: SimController, what: str) -> None:
    wait_for(world, lambda: not controller.lagging(), 20_000, what)


def _create(controller: SimController, name: str, partitions: int, factor: int) -> None:
    topic_id = name.encode().ljust(16, b"-")

    def create(image: MetadataImage, _: int) -> list:  # type: ignore[type-arg]
        records, results = create_topics(
            image, [NewTopic(name, partitions, factor)], topic_id_factory=lambda: topic_id
        )
        assert results[0].error is None, results[0].error
        return records

    controller.submit(f"create {name}", create)


def _registered(world: ControllerWorld, brokers: int) -> SimController:
    stable_leader(world)
    controller = _controller(world, brokers)
    _converged(world, controller, "every broker registered and unfenced")
    return controller


def test_broker_loss_fences_it_and_moves_its_leaderships() -> None:
    world = make_controller_world(seed=11)
    controller = _registered(world, 3)
    _create(controller, "orders", 3, 3)
    wait_for(world, lambda: "orders" in _image(controller).topics.by_name, 5_000, "orders")
    topic = _image(controller).topics.by_name["orders"]
    victim = topic.partitions[0].leader
    assert victim != NO_LEADER
    controller.brokers[victim].alive = False
    _converged(world, controller, f"broker {victim} fenced")
    image = _image(controller)
    assert image.cluster.brokers[victim].fenced
    for p in image.topics.by_name["orders"].partitions.values():
        assert p.leader not in (victim, NO_LEADER)
        assert victim not in p.isr
    assert world.checker.operations_committed > 0


def test_controller_crash_right_after_proposing_leaves_all_or_nothing() -> None:
    world = make_controller_world(seed=12)
    controller = _registered(world, 3)
    crashed: list[Operation] = []

    def crash_leader(node_id: int, op: Operation) -> None:
        if op.kind.startswith("create") and not crashed:
            crashed.append(op)
            world.cluster.crash(node_id)
            world.queue.after(300, world.cluster.restart, node_id)

    controller.after_propose = crash_leader
    _create(controller, "payments", 3, 2)
    wait_for(world, lambda: bool(crashed), 5_000, "the create proposed")
    _converged(world, controller, "a new controller after the crash")
    assert controller.stats.abandoned == 1
    topic = _image(controller).topics.by_name.get("payments")
    assert topic is None or len(topic.partitions) == 3  # never half created
    if topic is None:
        _create(controller, "payments", 3, 2)
        _converged(world, controller, "payments created by the new controller")
    assert len(_image(controller).topics.by_name["payments"].partitions) == 3


def test_failover_while_followers_fetch_an_operation_one_entry_at_a_time() -> None:
    """Followers fetch one entry at a time (fetch.max.entries 1), yet the leader sends an
    operation's records whole: no follower ever holds part of one, so whoever leads next
    commits all of it or none (invariant (p)). Found by this simulator: entries used to
    travel one by one, and a new leader could commit a TopicRecord without its partitions."""
    raft = RaftConfig(fetch_max_entries=1)
    world = make_controller_world(seed=12, cluster=ClusterConfig(voters=3, raft=raft))
    controller = _registered(world, 3)
    proposed: list[tuple[int, Operation]] = []

    def remember(node_id: int, op: Operation) -> None:
        if op.kind.startswith("create") and not proposed:
            proposed.append((node_id, op))

    controller.after_propose = remember
    _create(controller, "clicks", 3, 3)
    wait_for(world, lambda: bool(proposed), 5_000, "the create proposed")
    leader_id, op = proposed[0]

    def partial() -> bool:
        return any(
            n.node_id != leader_id and op.first < n.log.end_offset() <= op.last
            for n in world.cluster.nodes.values()
        )

    def whole_on_a_follower() -> bool:
        assert not partial(), "a follower holds part of an operation"
        return any(
            n.node_id != leader_id and n.log.end_offset() > op.last
            for n in world.cluster.nodes.values()
        )

    wait_for(world, whole_on_a_follower, 5_000, "a follower holding the whole operation")
    world.cluster.crash(leader_id)
    world.after_event()

    def new_controller() -> bool:
        node = controller.active()
        return node is not None and node.node_id != leader_id

    wait_for(world, new_controller, 20_000, "a new active controller")
    world.cluster.restart(leader_id)
    world.after_event()
    _converged(world, controller, "the old leader back")
    topic = _image(controller).topics.by_name.get("clicks")
    assert topic is None or len(topic.partitions) == 3


def test_restart_from_snapshot_reaches_the_same_image() -> None:
    world = make_controller_world(voters=5, seed=13)  # two down still leaves a majority
    controller = _registered(world, 4)
    _create(controller, "logs", 2, 2)
    _converged(world, controller, "logs created")
    leader = world.leader()
    assert leader is not None
    follower, other = [n for n in sorted(world.cluster.nodes) if n != leader.node_id][:2]
    # A follower restarts from its own snapshot plus the log after it.
    snap = snapshot(world, follower, compact=True)
    world.cluster.crash(follower)
    # Another one will be far behind a compacted leader: it must download a snapshot.
    world.cluster.crash(other)
    world.after_event()
    _create(controller, "audit", 3, 2)
    controller.brokers[1].alive = False  # fenced while both are down
    wait_for(
        world,
        lambda: _image(controller).cluster.brokers[1].fenced,
        10_000,
        "broker 1 fenced",
    )
    installed = world.cluster.coverage["snapshots installed"]
    world.cluster.restart(follower)
    world.after_event()
    sm = world.cluster.image(follower)
    assert sm.start == snap.end_offset, "the restarted follower did not load its snapshot"
    snapshot(world, leader.node_id, compact=True)
    world.cluster.restart(other)
    world.after_event()
    _converged(world, controller, "both followers caught up")
    assert world.cluster.coverage["snapshots installed"] > installed
    images = [world.cluster.image(n).image for n in sorted(world.cluster.nodes)]
    assert all(image == images[0] for image in images)
    assert "audit" in images[0].topics.by_name and images[0].cluster.brokers[1].fenced
