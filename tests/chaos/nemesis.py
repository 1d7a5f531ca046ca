"""Faults (nemeses) against a cluster of real node processes, scheduled from a seed.

Kinds:
- kill:            kill -9 of a random node, restarted after `down` seconds;
- kill-leader:     kill -9 of the leader of a random partition of the workload's topic;
- kill-controller: kill -9 of the active controller;
- pause:           SIGSTOP of a random node for longer than the broker session timeout,
                   then SIGCONT (a process that stops and comes back believing it still
                   leads: the classic zombie).
At most one node is faulted at a time: with RF 3 and min.insync.replicas=2 that is what
acks=all promises to survive; the next fault waits until the last one healed.
"""

from __future__ import annotations

import random
import signal
import time
from dataclasses import dataclass
from typing import Any

KINDS = ("kill", "kill-leader", "kill-controller", "pause")


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
        down = session_s + rng.uniform(0.5, 2.0) if kind == "pause" else rng.uniform(1.0, 4.0)
        if used + wait + down > duration_s - 3:
            return steps
        steps.append(Step(wait, kind, down, rng.random()))
        used += wait + down


class Nemesis:
    """Applies a schedule to a NodeCluster (tests/node_integration/node_cluster.py)."""

    def __init__(self, cluster: Any, topic: str, partitions: int, leader_of: Any) -> None:
        self.cluster = cluster
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
            if step.kind == "pause":
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
        if step.kind == "kill-leader":
            partition = int(step.pick * self.partitions)
            leader = self.leader_of(self.topic, partition)
            return leader if leader in live else None
        if step.kind == "kill-controller":
            try:
                return int(self.cluster.active_controller())
            except TimeoutError:
                return None
        return live[int(step.pick * len(live))] if live else None

    def heal(self) -> None:
        """Everything back: paused nodes continued, stopped nodes started."""
        for node in list(self.paused):
            self.cluster.procs[node].send_signal(signal.SIGCONT)
            self.paused.discard(node)
        for node in self.cluster.ids:
            if node not in self.cluster.procs:
                self.cluster.start(node)
