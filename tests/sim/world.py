"""The simulated world: clock, network, cluster and invariant checker, wired together.

`World.run_until` is the event loop: take the next event, run it, check the invariants on
every node it reached. Simulation (seeded random runs) and the scenario tests (scripted
runs) both drive a World, so both check the same invariants after every event.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from raft.roles import Role
from tests.sim.cluster import Cluster, ClusterConfig, SimNode
from tests.sim.events import EventQueue
from tests.sim.invariants import Checker
from tests.sim.network import Network, NetworkConfig
from tests.sim.trace import Trace

# A run that needs more events than this is spinning, not simulating.
MAX_EVENTS = 3_000_000


class RunawayError(AssertionError):
    pass


class World:
    def __init__(
        self,
        seed: int,
        cluster: ClusterConfig,
        network: NetworkConfig,
        echo: bool = False,
    ) -> None:
        self.seed = seed
        master = random.Random(seed)
        # One stream per concern, each drawn from the seed, so that (for instance) one more
        # message drawing a delay does not change which node the next crash hits.
        self.streams = {
            name: random.Random(master.getrandbits(64))
            for name in ("network", "cluster", "faults", "clients")
        }
        self.queue = EventQueue()
        self.trace = Trace(lambda: self.queue.now_ms, echo=echo)
        self.network = Network(self.streams["network"], network)
        self.checker = Checker()
        self.cluster = Cluster(
            cluster, self.streams["cluster"], self.queue, self.network, self.checker, self.trace
        )
        self.events = 0
        self.after_event()  # the state the nodes start in

    @property
    def now_ms(self) -> int:
        return self.queue.now_ms

    def after_event(self) -> None:
        if self.cluster.touched:
            self.checker.after_event(self.cluster)
            self.cluster.touched.clear()

    def run_until(self, end_ms: int, stop: Callable[[], bool] | None = None) -> bool:
        """Runs events up to `end_ms`, checking the invariants after each; returns early (True)
        as soon as `stop()` holds after an event. The clock ends at `end_ms` otherwise."""
        queue = self.queue
        while True:
            at = queue.peek_ms()
            if at is None or at > end_ms:
                queue.now_ms = max(queue.now_ms, end_ms)
                return False
            event = queue.pop()
            assert event is not None
            self.events += 1
            if self.events > MAX_EVENTS:
                raise RunawayError(f"more than {MAX_EVENTS} events: the run is spinning")
            event[2](*event[3])
            self.after_event()
            if stop is not None and stop():
                return True

    def run_for(self, ms: int, stop: Callable[[], bool] | None = None) -> bool:
        return self.run_until(self.now_ms + ms, stop)

    # --- looking at the cluster -------------------------------------------------------------

    def leader(self) -> SimNode | None:
        """The leader of the highest epoch, if any node leads."""
        leaders = self.cluster.leaders()
        if not leaders:
            return None
        return max(leaders, key=lambda n: n.core.epoch if n.core else -1)

    def roles(self) -> dict[int, Role | None]:
        return {i: (n.core.role if n.core else None) for i, n in self.cluster.nodes.items()}

    def describe(self) -> str:
        return "\n".join(n.describe() for n in self.cluster.nodes.values())
