"""The broker's partition-state aggregates, kept as counts that change when a partition's
state does (Kafka's ReplicaManager gauges LeaderCount, UnderReplicatedPartitions,
UnderMinIsrPartitionCount and AtMinIsrPartitionCount).

Computing them at scrape time would walk every replica on each scrape; with thousands of
replicas on a broker that is the scrape's cost, paid on the event loop. Instead each
Partition knows where it stands (`Standing`) and, whenever its role, ISR, replica set or
min.insync.replicas changes, moves its count from the old standing to the new one. A
partition that leads nothing stands nowhere and counts for nothing, so a replica taken out
of service only has to stop leading. Not thread-safe: the event loop owns it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from broker.partition import Partition


class Standing(NamedTuple):
    """Where one replica counts: all False unless this broker leads it."""

    leading: bool = False
    under_replicated: bool = False  # ISR smaller than the replica set
    under_min_isr: bool = False  # ISR below min.insync.replicas
    at_min_isr: bool = False  # ISR exactly min.insync.replicas

    @classmethod
    def of(cls, leading: bool, isr: int, replicas: int, min_isr: int) -> Standing:
        if not leading:
            return NOWHERE
        return cls(True, isr < replicas, isr < min_isr, isr == min_isr)


NOWHERE = Standing()


@dataclass
class ReplicaCounts:
    # The partitions this broker leads: the ISR-expiration task visits these, not every
    # replica (Kafka's maybeShrinkIsr looks at led partitions only).
    led: set[Partition] = field(default_factory=set)
    under_replicated: int = 0
    under_min_isr: int = 0
    at_min_isr: int = 0

    @property
    def leaders(self) -> int:
        return len(self.led)

    def move(self, partition: Partition, before: Standing, after: Standing) -> None:
        if after.leading:
            self.led.add(partition)
        else:
            self.led.discard(partition)
        self.under_replicated += after.under_replicated - before.under_replicated
        self.under_min_isr += after.under_min_isr - before.under_min_isr
        self.at_min_isr += after.at_min_isr - before.at_min_isr
