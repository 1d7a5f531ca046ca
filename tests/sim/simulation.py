"""One seeded run: a safety phase under faults, then a liveness phase with every fault healed.

    safety    the seed's faults (drops, duplicates, delays, partitions, crashes with torn
              writes, resignations) and client proposals for `plan.safety_ms`;
    liveness  the network is healed and reliable, every node is up; within
              `plan.liveness_bound_ms` a leader must be elected and every record proposed in
              this phase must be committed and applied on every node, observers included.
The invariants (invariants.py) are checked after every event of both phases. Whatever goes
wrong, an invariant, an exception out of the core, or a liveness timeout, the run ends with a
failure that names the seed and the command that replays it.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

from raft.config import RaftConfig
from tests.sim.client import Clients
from tests.sim.cluster import ClusterConfig
from tests.sim.faults import Faults
from tests.sim.invariants import InvariantViolation
from tests.sim.known_bugs import classify
from tests.sim.network import NetworkConfig
from tests.sim.plan import Plan
from tests.sim.world import RunawayError, World

LIVENESS_PROBE_MS = 100
LIVENESS_SPREAD_MS = 3_000
TRACE_TAIL = 60


def replay_command(seed: int) -> str:
    return f"python -m tests.sim --seed {seed}"


class SimulationFailure(AssertionError):
    """A failed run; the message names the seed and how to replay it."""


class LivenessFailure(SimulationFailure):
    """The cluster did not converge within the bound after every fault was healed."""


class KnownBugFailure(SimulationFailure):
    """A failed run whose signature is that of a known, unfixed core bug (known_bugs.py)."""


@dataclass(frozen=True, slots=True)
class RunResult:
    seed: int
    failure: str | None
    events: int  # events after which the invariants were checked
    leaders: int  # epochs that had a leader
    committed: int  # entries committed
    sim_ms: int
    known_bug: str | None = None  # the known_bugs.py entry the failure matches
    # How often the run took each snapshot path (Cluster.coverage).
    coverage: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None


class Simulation:
    def __init__(self, plan: Plan, echo: bool = False) -> None:
        self.plan = plan
        self.world: World | None = None
        self.echo = echo
        self._live = False

    def run(self) -> RunResult:
        plan = self.plan
        failure = None
        known_bug = None
        try:
            config = ClusterConfig(
                voters=plan.voters,
                observers=plan.observers,
                tick_mode=plan.tick_mode,
                raft=RaftConfig(
                    fetch_max_entries=plan.fetch_max_entries,
                    fetch_snapshot_max_bytes=plan.fetch_snapshot_max_bytes,
                ),
            )
            self.world = world = World(plan.seed, config, plan.network, echo=self.echo)
            self.faults = Faults(
                plan,
                world.streams["faults"],
                world.queue,
                world.cluster,
                world.network,
                world.trace,
            )
            self.clients = Clients(
                world.streams["clients"],
                world.queue,
                world.cluster,
                world.checker,
                world.trace,
                plan.propose_every_ms,
            )
            self._safety_phase(world)
            self._liveness_phase(world)
            world.checker.check_all(world.cluster)
        except Exception as error:  # noqa: BLE001 - any failure of a run is reported the same way
            bug = None
            if isinstance(error, LivenessFailure):
                bug = classify(self.world)
            elif not isinstance(error, (InvariantViolation, SimulationFailure, RunawayError)):
                # An exception out of the core (one of its own assertions) can be a known bug
                # too; a safety violation (an invariant) never is.
                bug = classify(self.world, error)
            known_bug = bug.name if bug is not None else None
            failure = self._describe_failure(error, known_bug)
        ran = self.world
        return RunResult(
            seed=plan.seed,
            failure=failure,
            events=ran.checker.events_checked if ran else 0,
            leaders=len(ran.checker.leaders) if ran else 0,
            committed=len(ran.checker.committed) if ran else 0,
            sim_ms=ran.now_ms if ran else 0,
            known_bug=known_bug,
            coverage=dict(ran.cluster.coverage) if ran else {},
        )

    # --- phases -----------------------------------------------------------------------------

    def _safety_phase(self, world: World) -> None:
        world.trace.record(f"SAFETY PHASE seed {self.plan.seed}: {self.plan.describe()}")
        self.faults.start()
        self.clients.start()
        world.run_until(self.plan.safety_ms)
        self.faults.stop()
        self.clients.stop()

    def _liveness_phase(self, world: World) -> None:
        world.trace.record("LIVENESS PHASE")
        network = self.plan.network
        world.network.config = NetworkConfig(network.min_delay_ms, network.max_delay_ms)
        self.faults.heal_all()
        world.after_event()
        deadline = world.now_ms + self.plan.liveness_bound_ms
        self.clients.start_liveness(self.plan.liveness_records, LIVENESS_SPREAD_MS)
        world.queue.after(LIVENESS_PROBE_MS, self._probe_liveness)
        if not world.run_until(deadline, stop=lambda: self._live):
            lagging = "; ".join(self.clients.liveness_lagging())
            raise LivenessFailure(
                f"liveness: {self.plan.liveness_bound_ms} ms after every fault healed, still "
                f"{lagging}"
            )

    def _probe_liveness(self) -> None:
        assert self.world is not None
        if not self.clients.liveness_lagging():
            self._live = True
            self.world.trace.record("LIVE: every liveness record committed and applied everywhere")
        else:
            self.world.queue.after(LIVENESS_PROBE_MS, self._probe_liveness)

    # --- failure reports --------------------------------------------------------------------

    def _describe_failure(self, error: Exception, known_bug: str | None) -> str:
        seed = self.plan.seed
        world = self.world
        if isinstance(error, (InvariantViolation, SimulationFailure, RunawayError)):
            what = str(error)
            where = ""
        else:
            # An exception out of the core (IllegalTransitionError, one of its assertions):
            # show where it was raised.
            what = f"{type(error).__name__}: {error}"
            frames = traceback.extract_tb(error.__traceback__)
            where = "\n".join(f"    {f.filename}:{f.lineno} in {f.name}" for f in frames[-4:])
        lines = [
            f"Raft simulation failed, seed {seed}: {what}",
            f"  replay: {replay_command(seed)}   (or: make sim SEED={seed})",
            f"  plan: {self.plan.describe()}",
        ]
        if known_bug is not None:
            lines.insert(1, f"  (the signature of known core bug '{known_bug}', known_bugs.py)")
        if where:
            lines += ["  raised at:", where]
        if world is not None:
            lines.append(f"  at {world.now_ms} ms after {world.events} events; nodes:")
            lines += [f"    {node.describe()}" for node in world.cluster.nodes.values()]
            lines.append(f"  last {TRACE_TAIL} trace lines:")
            lines += ["  " + line for line in world.trace.lines(TRACE_TAIL)]
        return "\n".join(lines)


def run_seed(seed: int, echo: bool = False) -> RunResult:
    return Simulation(Plan.from_seed(seed), echo=echo).run()


def check_seed(seed: int) -> RunResult:
    """Runs a seed; raises KnownBugFailure if it fails with a known bug's signature,
    SimulationFailure (an AssertionError) if it fails otherwise."""
    result = run_seed(seed)
    if result.known_bug is not None:
        raise KnownBugFailure(result.failure)
    if result.failure is not None:
        raise SimulationFailure(result.failure)
    return result
