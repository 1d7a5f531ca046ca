"""The reads of a consumer's fetch (ReplicaManager.fetch's, between its waits): each named
partition's records from its leader, or from whichever replica this broker holds for
Kafka's debugging consumer (`any_replica`), within the response's byte budget, and what
the purgatory needs to know of the read to decide whether the fetch waits on.

Long fetches let the event loop run between slices of partitions (broker/loop_slices.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from broker.loop_slices import LoopSlices
from broker.partition import Partition
from broker.purgatory import ConsumerPartitionRead, ConsumerReadSummary
from broker.replica_stats import ReplicaStats, count
from metadata.errors import ApiError, kept

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class FetchResult:
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class FetchItem:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1


class Replicas(Protocol):
    """The replica manager's look-ups (each raises the ApiError a fetch answers with)."""

    def leader_partition(self, topic: str, index: int) -> Partition: ...
    def local_partition(self, topic: str, index: int) -> Partition: ...


def _partition(replicas: Replicas, item: FetchItem, any_replica: bool) -> Partition:
    if any_replica:
        return replicas.local_partition(item.topic, item.partition)
    return replicas.leader_partition(item.topic, item.partition)


async def read_for_consumers(
    replicas: Replicas, items: Sequence[FetchItem], max_bytes: int, any_replica: bool = False
) -> tuple[dict[TopicPartition, FetchResult], ConsumerReadSummary]:
    """Each partition's answer, and what the purgatory needs of the read: its bytes,
    whether a partition erred, and what it saw of each partition served. A fetch of more
    than SLICE partitions (or 5 ms of reading) lets the loop run between slices: one of its
    partitions written after it was read and before the fetch parks is answered at the next
    write or the fetch's deadline."""
    results: dict[TopicPartition, FetchResult] = {}
    seen: list[ConsumerPartitionRead] = []
    budget = max_bytes
    total = 0
    stopped = False
    slices = LoopSlices()
    for item in items:
        await slices.step()
        key = (item.topic, item.partition)
        try:
            # KIP-74: the response as a whole may exceed max_bytes by the first batch only,
            # so a batch larger than the limits never stalls a consumer.
            limit = max(min(item.max_bytes, budget), 0)
            partition = _partition(replicas, item, any_replica)
            if any_replica:
                records = partition.read_local_replica(item.fetch_offset, limit)
            else:
                records = partition.read_for_consumer(
                    item.fetch_offset, limit, item.current_leader_epoch
                )
            filled = len(records) >= limit
            if budget < max_bytes and len(records) > budget:
                records = b""
        except ApiError as exc:
            results[key] = FetchResult(error=kept(exc))
            stopped = True
            continue
        budget -= len(records)
        total += len(records)
        log_ = partition.log
        results[key] = FetchResult(records, log_.high_watermark, log_.log_start_offset)
        seen.append(
            ConsumerPartitionRead(
                key,
                partition,
                item.fetch_offset,
                partition.leader_epoch,
                partition.is_leader,
                log_.high_watermark,
                filled,
            )
        )
    return results, ConsumerReadSummary(total, stopped, tuple(seen))


async def without_records(
    replicas: Replicas, items: Sequence[FetchItem], any_replica: bool
) -> dict[TopicPartition, FetchResult]:
    """Each partition's answer with no records (memory for them was not to be had)."""
    results: dict[TopicPartition, FetchResult] = {}
    slices = LoopSlices()
    for item in items:
        await slices.step()
        key = (item.topic, item.partition)
        try:
            partition = _partition(replicas, item, any_replica)
        except ApiError as exc:
            results[key] = FetchResult(error=kept(exc))
            continue
        log_ = partition.log
        results[key] = FetchResult(b"", log_.high_watermark, log_.log_start_offset)
    return results


async def counted(
    stats: ReplicaStats, results: dict[TopicPartition, FetchResult]
) -> dict[TopicPartition, FetchResult]:
    """`results`, counted into Kafka's per-topic fetch metrics."""
    slices = LoopSlices()
    for (topic, _), result in results.items():
        await slices.step()
        count(stats.fetch_requests, topic)
        if result.error is not None:
            count(stats.failed_fetch_requests, topic)
        count(stats.bytes_out, topic, len(result.records))
    return results
