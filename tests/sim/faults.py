"""The faults of the safety phase: crashes, partitions, resignations and snapshots (with
log compaction), on the seed's schedule.

Each kind of fault is a chain of events: when one fires it does its harm and schedules the
next after an exponentially distributed gap (mean from the Plan). `stop()` ends every chain
and `heal_all()` undoes what is left, which is how the liveness phase begins.

What a fault may hit is chosen among the nodes sorted by id, never by iterating a set, so
the same seed picks the same victims.

A snapshot is not a fault, but it is what makes a follower's catch-up take the FetchSnapshot
path, so it is scheduled the same way. A download is a short window, which faults at random
times seldom hit: when a node starts one, the schedule sometimes aims a crash at it (partway
through, or right after the install) or has its leader take a newer snapshot and compact,
which deletes the snapshot being downloaded.
"""

from __future__ import annotations

import random

from tests.sim.cluster import READY_CRASH_POINTS, Cluster, CrashPoint, SimNode
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
        self.crashes = self.partitions = self.resignations = self.snapshots = 0
        cluster.after_crash = self._schedule_restart
        cluster.download_started = self._download_started

    def start(self) -> None:
        self.active = True
        plan = self.plan
        if plan.crash_every_ms:
            self.queue.after(self._gap(plan.crash_every_ms), self._crash)
        if plan.partition_every_ms:
            self.queue.after(self._gap(plan.partition_every_ms), self._partition)
        if plan.resign_every_ms:
            self.queue.after(self._gap(plan.resign_every_ms), self._resign)
        if plan.snapshot_every_ms:
            self.queue.after(self._gap(plan.snapshot_every_ms), self._snapshot)

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
                point = self.rng.choice(READY_CRASH_POINTS)
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

    # --- snapshots and log compaction --------------------------------------------------------

    def _snapshot(self) -> None:
        if not self.active:
            return
        up = self.cluster.up_nodes()
        if up:
            # Mostly a leader's state machine: compacting its log is what sends followers to
            # FetchSnapshot. A follower compacting its own log matters once it leads.
            leaders = self.cluster.leaders()
            node = self.rng.choice(leaders if leaders and self.rng.random() < 0.7 else up)
            self._take_snapshot(node, self.rng.random() < self.plan.compact)
        self.queue.after(self._gap(self.plan.snapshot_every_ms or 1), self._snapshot)

    def _take_snapshot(self, node: SimNode, compact: bool) -> None:
        """A snapshot at some offset the node's state machine can produce: above its log
        start and the snapshot it loaded, at most what it applied (mostly that)."""
        low = max(node.log.start_offset, node.sm.start) + 1
        high = node.applied
        if node.up and low <= high:
            end = high if self.rng.random() < 0.7 else self.rng.randint(low, high)
            self.snapshots += 1
            self.cluster.snapshot(node.node_id, end, compact)

    def _download_started(self, node_id: int) -> None:
        if not self.active:
            return
        chance = self.rng.random()
        torn = self.rng.random() < self.plan.torn_write
        if self.plan.crash_every_ms and chance < 0.15:
            # Strikes when the download is installed, before the state machine loads it.
            self.crashes += 1
            self.cluster.arm_crash(node_id, CrashPoint.BEFORE_SNAPSHOT_LOAD, torn)
            self.trace.record(f"arm a power cut on node {node_id}: after its snapshot install")
        elif self.plan.crash_every_ms and chance < 0.35:
            # Within a round trip or two, while most downloads of several chunks still run.
            incarnation = self.cluster.nodes[node_id].incarnation
            delay = self.rng.randint(1, 150)
            self.queue.after(delay, self._crash_downloader, node_id, incarnation, torn)
        elif self.plan.snapshot_every_ms and chance < 0.55:
            core = self.cluster.nodes[node_id].core
            assert core is not None
            delay = self.rng.randint(0, 300)
            self.queue.after(delay, self._compact_under_download, core.leader_id)

    def _crash_downloader(self, node_id: int, incarnation: int, torn: bool) -> None:
        """A power cut partway through a download: the partial snapshot is lost, and the
        restarted node starts afresh from its log."""
        node = self.cluster.nodes[node_id]
        if not self.active or node.incarnation != incarnation or node.core is None:
            return
        if node.core.snapshot_fetch is not None:  # else done (or given up) already
            self.crashes += 1
            self.cluster.crash(node_id, torn=torn)
            self._schedule_restart(node_id)

    def _compact_under_download(self, leader_id: int) -> None:
        """The leader serving a download takes a newer snapshot and compacts to it, which
        deletes the snapshot being downloaded (if it applied anything new since)."""
        node = self.cluster.nodes.get(leader_id)
        if self.active and node is not None and node.up:
            self._take_snapshot(node, compact=True)

    # --- graceful resignation ---------------------------------------------------------------

    def _resign(self) -> None:
        if not self.active:
            return
        leaders = self.cluster.leaders()
        if leaders:
            self.resignations += 1
            self.cluster.resign(self.rng.choice(leaders).node_id)
        self.queue.after(self._gap(self.plan.resign_every_ms or 1), self._resign)
