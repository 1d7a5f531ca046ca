"""The faults of the safety phase: crashes, partitions, resignations, on the seed's schedule.

Each kind of fault is a chain of events: when one fires it does its harm and schedules the
next after an exponentially distributed gap (mean from the Plan). `stop()` ends every chain
and `heal_all()` undoes what is left, which is how the liveness phase begins.

What a fault may hit is chosen among the nodes sorted by id, never by iterating a set, so
the same seed picks the same victims.
"""

from __future__ import annotations

import random

from tests.sim.cluster import Cluster, CrashPoint
from tests.sim.events import EventQueue
from tests.sim.network import Network
from tests.sim.plan import Plan
from tests.sim.trace import Trace


class Faults:
    def __init__(
        self,
        plan: Plan,
        rng: random.Random,
        queue: EventQueue,
        cluster: Cluster,
        network: Network,
        trace: Trace,
    ) -> None:
        self.plan = plan
        self.rng = rng
        self.queue = queue
        self.cluster = cluster
        self.network = network
        self.trace = trace
        self.active = False
        self.crashes = self.partitions = self.resignations = 0
        cluster.after_crash = self._schedule_restart

    def start(self) -> None:
        self.active = True
        plan = self.plan
        if plan.crash_every_ms:
            self.queue.after(self._gap(plan.crash_every_ms), self._crash)
        if plan.partition_every_ms:
            self.queue.after(self._gap(plan.partition_every_ms), self._partition)
        if plan.resign_every_ms:
            self.queue.after(self._gap(plan.resign_every_ms), self._resign)

    def stop(self) -> None:
        self.active = False

    def heal_all(self) -> None:
        """Heals the network and restarts every node that is down, at once."""
        self.network.heal()
        for node in self.cluster.nodes.values():
            node.crash_point = None
            if not node.up:
                self.cluster.restart(node.node_id)
        self.trace.record("HEAL everything: network whole, all nodes up")

    def _gap(self, mean_ms: int) -> int:
        return 1 + int(self.rng.expovariate(1.0 / mean_ms))

    # --- crashes ----------------------------------------------------------------------------

    def _crash(self) -> None:
        if not self.active:
            return
        plan = self.plan
        up = [n.node_id for n in self.cluster.up_nodes()]
        if up:
            # Leaders are where most of the interesting state is: hit them more often.
            leaders = [n.node_id for n in self.cluster.leaders()]
            victim = self.rng.choice(leaders if leaders and self.rng.random() < 0.5 else up)
            torn = self.rng.random() < plan.torn_write
            # Between events the driver has carried out every Ready, so nothing is unsynced
            # then: only a power cut inside a Ready can lose or tear writes.
            self.crashes += 1
            if self.rng.random() < plan.crash_in_ready:
                point = self.rng.choice(list(CrashPoint))
                self.cluster.arm_crash(victim, point, torn)
                self.trace.record(f"arm a power cut on node {victim}: {point.value}")
            else:
                self.cluster.crash(victim, torn=torn)
                self._schedule_restart(victim)
        self.queue.after(self._gap(plan.crash_every_ms or 1), self._crash)

    def _schedule_restart(self, node_id: int) -> None:
        low, high = self.plan.restart_after_ms
        self.queue.after(self.rng.randint(low, high), self._restart, node_id)

    def _restart(self, node_id: int) -> None:
        if not self.cluster.nodes[node_id].up:  # heal_all may have restarted it already
            self.cluster.restart(node_id)

    # --- partitions -------------------------------------------------------------------------

    def _partition(self) -> None:
        if not self.active:
            return
        plan = self.plan
        ids = sorted(self.cluster.nodes)
        kind = self.rng.random()
        if kind < 0.4:
            # Isolate one node, the leader half of the time: the check-quorum path.
            leaders = [n.node_id for n in self.cluster.leaders()]
            alone = self.rng.choice(leaders if leaders and self.rng.random() < 0.5 else ids)
            self.network.partition([[alone], [i for i in ids if i != alone]])
        elif kind < 0.8:
            shuffled = ids[:]
            self.rng.shuffle(shuffled)
            cut = self.rng.randint(1, len(ids) - 1)
            self.network.partition([shuffled[:cut], shuffled[cut:]])
        else:
            # One-way links: a node that can send but not hear, or hear but not send.
            for _ in range(self.rng.randint(1, len(ids))):
                src, dst = self.rng.sample(ids, 2)
                self.network.cut_one_way(src, dst)
        self.partitions += 1
        self.trace.record(f"PARTITION {self.network.describe()}")
        low, high = plan.partition_for_ms
        self.queue.after(self.rng.randint(low, high), self._heal_partition)
        self.queue.after(self._gap(plan.partition_every_ms or 1), self._partition)

    def _heal_partition(self) -> None:
        if self.active and not self.network.whole:
            self.network.heal()
            self.trace.record("heal the network")

    # --- graceful resignation ---------------------------------------------------------------

    def _resign(self) -> None:
        if not self.active:
            return
        leaders = self.cluster.leaders()
        if leaders:
            self.resignations += 1
            self.cluster.resign(self.rng.choice(leaders).node_id)
        self.queue.after(self._gap(self.plan.resign_every_ms or 1), self._resign)
