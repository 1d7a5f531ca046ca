"""One seeded run of the controller over the simulated Raft.

    safety    the Raft simulator's faults for the seed (tests/sim/plan.py, faults.py: drops,
              delays, partitions, crashes with torn writes, resignations, snapshots with log
              compaction, snapshot downloads cut short) while the simulated controller runs
              random operations and brokers die and come back;
    liveness  faults healed, brokers that are dead stay dead; within the bound an active
              controller must exist, every dead broker be fenced, every live one registered
              and unfenced, and every node have applied the same offset (so, by (m), hold
              the same image).
The Raft invariants and the metadata ones (checker.py) are checked after every event.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections import Counter
from dataclasses import dataclass, field

from raft.config import RaftConfig
from tests.controller_sim.controller import ControllerConfig, SimController
from tests.controller_sim.world import ControllerWorld
from tests.sim.cluster import ClusterConfig
from tests.sim.faults import Faults
from tests.sim.network import NetworkConfig
from tests.sim.plan import Plan

LIVENESS_BOUND_MS = 40_000
LIVENESS_PROBE_MS = 100
TRACE_TAIL = 60
# A metadata snapshot is a few KB: chunks of a few bytes would make downloads outlast the
# compactions that delete them.
MIN_SNAPSHOT_CHUNK = 256
MAX_SAFETY_MS = 10_000


def replay_command(seed: int) -> str:
    return f".venv/bin/python -m tests.controller_sim --seed {seed} --trace"


def plan_for(seed: int) -> Plan:
    """The Raft simulator's plan for the seed, with bigger snapshot chunks and a shorter
    safety phase (each operation here costs more than a client's proposal)."""
    plan = Plan.from_seed(seed)
    return dataclasses.replace(
        plan,
        safety_ms=min(plan.safety_ms, MAX_SAFETY_MS),
        fetch_snapshot_max_bytes=max(plan.fetch_snapshot_max_bytes, MIN_SNAPSHOT_CHUNK),
    )


@dataclass(frozen=True, slots=True)
class RunResult:
    seed: int
    failure: str | None
    events: int
    sim_ms: int
    operations: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    abandoned: int = 0
    pipelined: int = 0
    activations: int = 0
    coverage: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None


class ControllerSimulationFailure(AssertionError):
    pass


class ControllerSimulation:
    def __init__(self, seed: int, echo: bool = False) -> None:
        self.seed = seed
        self.plan = plan_for(seed)
        self.config = ControllerConfig.from_seed(seed)
        self.echo = echo
        self.world: ControllerWorld | None = None
        self.controller: SimController | None = None

    def run(self) -> RunResult:
        plan = self.plan
        failure = None
        try:
            cluster = ClusterConfig(
                voters=plan.voters,
                observers=plan.observers,
                tick_mode=plan.tick_mode,
                raft=RaftConfig(
                    fetch_max_entries=plan.fetch_max_entries,
                    fetch_snapshot_max_bytes=plan.fetch_snapshot_max_bytes,
                ),
            )
            self.world = world = ControllerWorld(self.seed, cluster, plan.network, echo=self.echo)
            faults = Faults(
                plan,
                world.streams["faults"],
                world.queue,
                world.cluster,
                world.network,
                world.trace,
            )
            self.controller = controller = SimController(
                world, world.streams["controller"], self.config
            )
            world.trace.record(f"SAFETY PHASE seed {self.seed}: {self.describe()}")
            faults.start()
            controller.start(random_ops=True)
            world.run_until(plan.safety_ms)
            faults.stop()
            controller.stop_faults()

            world.trace.record("LIVENESS PHASE")
            net = plan.network
            world.network.config = NetworkConfig(net.min_delay_ms, net.max_delay_ms)
            faults.heal_all()
            world.after_event()
            done = world.run_until(
                world.now_ms + LIVENESS_BOUND_MS, stop=lambda: not controller.lagging()
            )
            if not done:
                raise ControllerSimulationFailure(
                    f"liveness: {LIVENESS_BOUND_MS} ms after every fault healed, still "
                    + "; ".join(controller.lagging())
                )
            world.checker.check_all(world.cluster)
        except Exception as error:  # noqa: BLE001 - every failure is reported the same way
            failure = self._describe_failure(error)
        world_ = self.world
        c = self.controller
        return RunResult(
            seed=self.seed,
            failure=failure,
            events=world_.checker.events_checked if world_ else 0,
            sim_ms=world_.now_ms if world_ else 0,
            operations=dict(c.stats.ops) if c else {},
            errors=dict(c.stats.errors) if c else {},
            abandoned=c.stats.abandoned if c else 0,
            pipelined=c.stats.pipelined if c else 0,
            activations=c.stats.activations if c else 0,
            coverage=dict(world_.cluster.coverage) if world_ else {},
        )

    def describe(self) -> str:
        return f"{self.plan.describe()}; controller: {self.config.describe()}"

    def _describe_failure(self, error: Exception) -> str:
        seed = self.seed
        if isinstance(error, AssertionError):
            what, where = str(error), ""
        else:
            what = f"{type(error).__name__}: {error}"
            frames = traceback.extract_tb(error.__traceback__)
            where = "\n".join(f"    {f.filename}:{f.lineno} in {f.name}" for f in frames[-5:])
        lines = [
            f"Controller simulation failed, seed {seed}: {what}",
            f"  replay: {replay_command(seed)}",
            f"  plan: {self.describe()}",
        ]
        if where:
            lines += ["  raised at:", where]
        world = self.world
        if world is not None:
            lines.append(f"  at {world.now_ms} ms after {world.events} events; nodes:")
            lines += [f"    {node.describe()}" for node in world.cluster.nodes.values()]
            lines.append(f"  last {TRACE_TAIL} trace lines:")
            lines += ["  " + line for line in world.trace.lines(TRACE_TAIL)]
        return "\n".join(lines)


def run_seed(seed: int, echo: bool = False) -> RunResult:
    return ControllerSimulation(seed, echo=echo).run()


def check_seed(seed: int) -> RunResult:
    result = run_seed(seed)
    if result.failure is not None:
        raise ControllerSimulationFailure(result.failure)
    return result


def summarize(results: list[RunResult]) -> str:
    ops: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    coverage: Counter[str] = Counter()
    for r in results:
        ops.update(r.operations)
        errors.update(r.errors)
        coverage.update(r.coverage)
    return (
        f"operations committed: {dict(sorted(ops.items()))}; refused: "
        f"{dict(sorted(errors.items()))}; abandoned on a leader change: "
        f"{sum(r.abandoned for r in results)}; pipelined: {sum(r.pipelined for r in results)}; "
        f"controller activations: "
        f"{sum(r.activations for r in results)}; snapshot paths: {dict(sorted(coverage.items()))}"
    )
