"""Faults (nemeses) against a cluster of real node processes, scheduled from a seed.

Kinds:
- kill:            kill -9 of a random node, restarted after `down` seconds;
- kill-leader:     kill -9 of the leader of a random partition of the workload's topic;
- kill-controller: kill -9 of the active controller;
- pause:           SIGSTOP of a random node for longer than the broker session timeout,
                   then SIGCONT (a process that stops and comes back believing it still
                   leads: the classic zombie);
- partition-node:  a random node cut off from every other node (packets dropped both ways,
                   netns.py), the majority/minority split of three;
- partition-leader: the leader of a random partition cut off from the other nodes, while
                   clients still reach it (it must not acknowledge what it cannot replicate);
- partition-controller: the active controller cut off from the other nodes.
At most one node is faulted at a time: with RF 3 and min.insync.replicas=2 that is what
acks=all promises to survive; the next fault waits until the last one healed.
"""

from __future__ import annotations

import random
import signal
import time
from dataclasses import dataclass
from typing import Any

PROCESS_KINDS = ("kill", "kill-leader", "kill-controller", "pause")
NETWORK_KINDS = ("partition-node", "partition-leader", "partition-controller")
KINDS = PROCESS_KINDS + NETWORK_KINDS


@dataclass
class Fault:
    at: float  # monotonic time it began
    kind: str
    node: int
    healed: float = 0.0

    def describe(self, start: float) -> str:
        return (
            f"t={self.at - start:5.1f}s {self.kind:<15} node {self.node}, healed at "
            f"t={self.healed - start:5.1f}s"
        )


@dataclass(frozen=True)
class Step:
    """One planned fault: after `wait` s of calm, `kind` for `down` s."""

    wait: float
    kind: str
    down: float
    pick: float  # in [0, 1): which node, among those the kind can hit


def schedule(seed: int, kinds: tuple[str, ...], duration_s: float, session_s: float) -> list[Step]:
    rng = random.Random(seed)
    steps: list[Step] = []
    used = 0.0  # the first wait is 3 s longer: the workload runs before the first fault
    while True:
        kind = rng.choice(kinds)
        wait = rng.uniform(1.0, 3.0) + (3.0 if not steps else 0.0)
        long = kind == "pause" or kind in NETWORK_KINDS  # past the session timeout
        down = session_s + rng.uniform(0.5, 2.0) if long else rng.uniform(1.0, 4.0)
        if used + wait + down > duration_s - 3:
            return steps
        steps.append(Step(wait, kind, down, rng.random()))
        used += wait + down


class Nemesis:
    """Applies a schedule to a NodeCluster (tests/node_integration/node_cluster.py)."""

    def __init__(
        self, cluster: Any, topic: str, partitions: int, leader_of: Any, network: Any = None
    ) -> None:
        self.cluster = cluster
        self.network = network  # a netns.Network, for the partition kinds
        self.topic = topic
        self.partitions = partitions
        self.leader_of = leader_of  # (topic, partition) -> broker id, or -1
        self.faults: list[Fault] = []
        self.paused: set[int] = set()

    def run(self, steps: list[Step], stop: Any) -> None:
        for step in steps:
            if stop.wait(step.wait):
                return
            node = self._target(step)
            if node is None:
                continue
            fault = Fault(time.monotonic(), step.kind, node)
            self.faults.append(fault)
            if step.kind in NETWORK_KINDS:
                others = {n for n in self.cluster.ids if n != node}
                self.network.partition({node}, others)
                stop.wait(step.down)
                self.network.heal()
            elif step.kind == "pause":
                self.cluster.procs[node].send_signal(signal.SIGSTOP)
                self.paused.add(node)
                stop.wait(step.down)
                self.cluster.procs[node].send_signal(signal.SIGCONT)
                self.paused.discard(node)
            else:
                self.cluster.stop(node, signal.SIGKILL)
                stop.wait(step.down)
                self.cluster.start(node)
            fault.healed = time.monotonic()

    def _target(self, step: Step) -> int | None:
        live = sorted(self.cluster.procs)
        if step.kind in NETWORK_KINDS and self.network is None:
            raise ValueError(f"{step.kind} needs the run's private network (netns.py)")
        if step.kind in ("kill-leader", "partition-leader"):
            partition = int(step.pick * self.partitions)
            leader = self.leader_of(self.topic, partition)
            return leader if leader in live else None
        if step.kind in ("kill-controller", "partition-controller"):
            try:
                return int(self.cluster.active_controller())
            except TimeoutError:
                return None
        return live[int(step.pick * len(live))] if live else None

    def heal(self) -> None:
        """Everything back: the network whole, paused nodes continued, stopped nodes
        started."""
        if self.network is not None:
            self.network.heal()
        for node in list(self.paused):
            self.cluster.procs[node].send_signal(signal.SIGCONT)
            self.paused.discard(node)
        for node in self.cluster.ids:
            if node not in self.cluster.procs:
                self.cluster.start(node)
