"""A consumer's Fetch: each partition's records from its leader (or, for Kafka's debugging
consumer, from whichever replica this broker holds), after a long poll.

Rules, in the order they apply:
- a partition named twice is answered INVALID_REQUEST, both times, and read once neither;
- a topic the principal may not READ is answered TOPIC_AUTHORIZATION_FAILED;
- the replica manager reads the rest: at most max_bytes in all (KIP-74: the first batch
  may pass it; fetch.max.bytes and the broker's own limit bound it too), partition_max_bytes
  per partition, waiting up to max_wait_ms (at most 60 s) for min_bytes, and only once the
  request memory (queued.max.request.bytes) grants the bytes; current_leader_epoch checked
  (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), reads up to the high watermark.
- Strom has no transactions yet: the last stable offset is the high watermark.

The bytes of records answered stay reserved in the replica manager's memory pool until the
front end has handed the response over and calls `release` (a stream releases the last
answer's when the client asks again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.consumer_reads import FetchItem, FetchResult
from broker.loop_slices import LoopSlices
from broker.replica_manager import ReplicaManager
from broker.request_checks import named_twice
from metadata.errors import ApiError
from server.request_authorization import RequestAuthorizer
from server.request_session import Session
from server.requests.partitions import LeaderHint, duplicate_error, leader_hint

# Kafka's replica id of a debugging consumer: reads a follower's replica too.
DEBUGGING_CONSUMER_ID = -2


@dataclass(frozen=True, slots=True)
class FetchPartition:
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1  # -1: not checked


@dataclass(frozen=True, slots=True)
class FetchTopic:
    name: str
    partitions: Sequence[FetchPartition]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int  # -1 a consumer, -2 Kafka's debugging consumer
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    topics: Sequence[FetchTopic]


@dataclass(frozen=True, slots=True)
class PartitionFetched:
    partition: int
    error: ApiError | None = None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""  # whole batches as the log holds them
    current_leader: LeaderHint | None = None


@dataclass(frozen=True, slots=True)
class TopicFetched:
    name: str
    partitions: list[PartitionFetched]


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    topics: list[TopicFetched]
    held_bytes: int  # the records' bytes, reserved until `release`


async def fetch(
    replicas: ReplicaManager,
    authz: RequestAuthorizer,
    request: FetchRequest,
    session: Session | None,
    api: str = "Fetch",
) -> FetchAnswer:
    """Each partition's answer, in the request's order. `api` names the request in the
    authorizer's log (Fetch, FetchStream)."""
    topics = request.topics
    twice = named_twice((t.name, p.partition) for t in topics for p in t.partitions)
    refused = authz.topics(api, (t.name for t in topics), session)
    slices = LoopSlices()  # a fetch may name 100,000 partitions: others run meanwhile
    items = []
    for topic in topics:
        if topic.name in refused:
            continue
        for p in topic.partitions:
            if (topic.name, p.partition) not in twice:
                items.append(
                    FetchItem(
                        topic.name,
                        p.partition,
                        p.fetch_offset,
                        p.partition_max_bytes,
                        p.current_leader_epoch,
                    )
                )
            await slices.step()
    results = await replicas.fetch(
        items,
        request.max_wait_ms,
        request.min_bytes,
        request.max_bytes,
        any_replica=request.replica_id == DEBUGGING_CONSUMER_ID,
    )
    for topic in topics:
        if topic.name in refused:
            for p in topic.partitions:
                results[(topic.name, p.partition)] = FetchResult(error=refused[topic.name])
    for key in twice:
        results[key] = FetchResult(error=duplicate_error(*key))
    answered = []
    for topic in topics:
        partitions = []
        for p in topic.partitions:
            partitions.append(
                _answer(replicas, topic.name, p.partition, results[(topic.name, p.partition)])
            )
            await slices.step()
        answered.append(TopicFetched(topic.name, partitions))
    return FetchAnswer(answered, sum(len(r.records) for r in results.values()))


def release(replicas: ReplicaManager, answer: FetchAnswer) -> None:
    """The answer was handed over: its records no longer count against the request memory."""
    replicas.memory.release(answer.held_bytes)


def _answer(
    replicas: ReplicaManager, topic: str, partition: int, result: FetchResult
) -> PartitionFetched:
    if result.error is not None:
        return PartitionFetched(
            partition,
            result.error,
            current_leader=leader_hint(replicas, result.error, topic, partition),
        )
    return PartitionFetched(
        partition,
        high_watermark=result.high_watermark,
        last_stable_offset=result.high_watermark,  # no transactions: LSO = HW
        log_start_offset=result.log_start_offset,
        records=result.records,
    )
