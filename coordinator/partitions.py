"""What a coordinator needs from the broker it runs in: its internal topic's partitions to
append to and to read back (Kafka's PartitionWriter and CoordinatorLoader), and their count.
The broker implements it (broker/group_partitions.py); a coordinator imports nothing of the
broker, so the dependency points one way (docs/architecture.md §2).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from metadata.errors import ApiError

# (key, value) records; a None value is a tombstone.
Records = Sequence[tuple[bytes, bytes | None]]


class CoordinatorPartitions(Protocol):
    def partition_count(self, topic: str) -> int:
        """The topic's partitions now (0: it does not exist)."""
        ...

    async def append(
        self, topic: str, index: int, records: Records, timestamp_ms: int, timeout_ms: int
    ) -> ApiError | None:
        """Appends `records` as one batch with acks=all: None once replicated, else the
        partition's error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT...)."""
        ...

    def read(self, topic: str, index: int) -> Iterator[Records]:
        """The partition's records (control batches left out), in offset order, a chunk at a
        time: the caller yields to other work between chunks."""
        ...
