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
- partition-controller: the active controller cut off from the other nodes;
- crash-unflushed: kill -9 of a random node that also loses the tail of every partition's
                   active segment past its recovery point (node_faults.py), then restart;
- slow-disk:       every fsync of a random node waits 200-500 ms first;
- disk-error:      every write and fsync under a random node's log directory fails with EIO
                   or ENOSPC (node_faults.py); the broker, its only log directory failed,
                   halts as Kafka's does, and is restarted once the disk is healed;
- clock-jump:      a random node's wall clock jumps 1-10 minutes ahead or back, then back.
At most one node is faulted at a time: with RF 3 and min.insync.replicas=2 that is what
acks=all promises to survive; the next fault waits until the last one healed. A crash that
loses unflushed data is a disk loss, not just a process death: it also waits until every
partition is fully replicated again, or it could take the last intact copy of a record
another fault left on two replicas (two disk losses at once, which acks=all never promised
to survive; Kafka does not fsync on acknowledgement either).
"""

from __future__ import annotations

import errno
import random
import signal
import time
from dataclasses import dataclass
from typing import Any

from tests.chaos.node_faults import cut_unflushed

PROCESS_KINDS = ("kill", "kill-leader", "kill-controller", "pause")
NETWORK_KINDS = ("partition-node", "partition-leader", "partition-controller")
NODE_KINDS = ("crash-unflushed", "slow-disk", "disk-error", "clock-jump")
KINDS = PROCESS_KINDS + NETWORK_KINDS + NODE_KINDS


@dataclass
class Fault:
    at: float  # monotonic time it began
    kind: str
    node: int
    healed: float = 0.0
    detail: str = ""

    def describe(self, start: float) -> str:
        return (
            f"t={self.at - start:5.1f}s {self.kind:<15} node {self.node}"
            f"{' (' + self.detail + ')' if self.detail else ''}, healed at "
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
        long = kind in ("pause", "slow-disk", "disk-error", "clock-jump") or kind in NETWORK_KINDS
        down = session_s + rng.uniform(0.5, 2.0) if long else rng.uniform(1.0, 4.0)
        if used + wait + down > duration_s - 3:
            return steps
        steps.append(Step(wait, kind, down, rng.random()))
        used += wait + down


class Nemesis:
    """Applies a schedule to a NodeCluster (tests/node_integration/node_cluster.py)."""

    def __init__(
        self,
        cluster: Any,
        topic: str,
        partitions: int,
        leader_of: Any,
        network: Any = None,
        node_faults: Any = None,
        rng: random.Random | None = None,
        fully_replicated: Any = None,
    ) -> None:
        self.cluster = cluster
        self.network = network  # a netns.Network, for the partition kinds
        self.node_faults = node_faults  # a node_faults.NodeFaults, for slow-disk, clock-jump
        self.rng = rng or random.Random(0)
        self.topic = topic
        self.partitions = partitions
        self.leader_of = leader_of  # (topic, partition) -> broker id, or -1
        self.faults: list[Fault] = []
        self.paused: set[int] = set()
        self.fully_replicated = fully_replicated  # () -> bool: every ISR is every replica

    def run(self, steps: list[Step], stop: Any) -> None:
        for step in steps:
            if stop.wait(step.wait):
                return
            if step.kind == "crash-unflushed" and not self._wait_fully_replicated(stop):
                continue
            node = self._target(step)
            if node is None:
                continue
            fault = Fault(time.monotonic(), step.kind, node)
            self.faults.append(fault)
            if step.kind == "slow-disk":
                delay = self.rng.randint(200, 500)
                fault.detail = f"fsync +{delay} ms"
                self.node_faults.set_fsync_delay(node, delay)
                stop.wait(step.down)
                self.node_faults.set_fsync_delay(node, 0)
            elif step.kind == "disk-error":
                error = self.rng.choice((errno.EIO, errno.ENOSPC))
                fault.detail = f"writes fail with {errno.errorcode[error]}"
                self.node_faults.set_disk_error(node, error, self.cluster.data_dir(node))
                stop.wait(step.down)
                self.node_faults.set_disk_error(node, 0, "")
                if self._restart_if_halted(node):
                    fault.detail += ", broker halted"
            elif step.kind == "clock-jump":
                jump = self.rng.choice((-1, 1)) * self.rng.randint(60, 600)
                fault.detail = f"clock {jump:+d} s"
                self.node_faults.set_clock_offset(node, jump)
                stop.wait(step.down)
                self.node_faults.set_clock_offset(node, 0)
            elif step.kind == "crash-unflushed":
                self.cluster.stop(node, signal.SIGKILL)
                cut = cut_unflushed(self.cluster.data_dir(node), self.rng)
                fault.detail = f"{cut} unflushed bytes cut"
                stop.wait(step.down)
                self.cluster.start(node)
            elif step.kind in NETWORK_KINDS:
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

    def _restart_if_halted(self, node: int) -> bool:
        """Starts the node again if its process exited by itself (a halt)."""
        proc = self.cluster.procs.get(node)
        if proc is None or proc.poll() is None:
            return False
        del self.cluster.procs[node]
        self.cluster.start(node)
        return True

    def _wait_fully_replicated(self, stop: Any, bound_s: float = 60.0) -> bool:
        if self.fully_replicated is None:
            return True
        deadline = time.monotonic() + bound_s
        while time.monotonic() < deadline:
            if self.fully_replicated():
                return True
            if stop.wait(0.2):
                return False
        return False

    def _target(self, step: Step) -> int | None:
        live = sorted(self.cluster.procs)
        if step.kind in NETWORK_KINDS and self.network is None:
            raise ValueError(f"{step.kind} needs the run's private network (netns.py)")
        if step.kind in ("slow-disk", "disk-error", "clock-jump") and self.node_faults is None:
            raise ValueError(f"{step.kind} needs the node fault files (node_faults.py)")
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
        if self.node_faults is not None:
            for node in self.cluster.ids:
                self.node_faults.set_fsync_delay(node, 0)
                self.node_faults.set_clock_offset(node, 0)
                self.node_faults.set_disk_error(node, 0, "")
                self._restart_if_halted(node)
        for node in list(self.paused):
            self.cluster.procs[node].send_signal(signal.SIGCONT)
            self.paused.discard(node)
        for node in self.cluster.ids:
            if node not in self.cluster.procs:
                self.cluster.start(node)
