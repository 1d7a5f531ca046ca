"""Produce: each partition's record batches appended by its leader, with the request's acks.

Rules, in the order they apply:
- a partition named twice is answered INVALID_REQUEST, both times, and neither copy written;
- a topic the principal may not WRITE is answered TOPIC_AUTHORIZATION_FAILED, nothing of it
  written;
- the rest waits for room in the broker's request memory (queued.max.request.bytes) up to
  the request's timeout_ms, else every partition is answered REQUEST_TIMED_OUT, nothing
  written;
- the replica manager appends (acks other than 0, 1, -1 refused INVALID_REQUIRED_ACKS,
  each batch validated, acks=-1 waiting at most timeout_ms for the ISR).
With acks=0 the client waits for no answer; the partitions' answers are still returned so
that the front end can tell it the one way Kafka does: by closing the connection when any
partition failed (the Kafka listener; the gRPC servicer answers an empty response).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.loop_slices import LoopSlices
from broker.replica_manager import ProduceResult, ReplicaManager
from broker.request_checks import named_twice
from metadata.errors import ApiError
from metadata.topic_control import INTERNAL_TOPICS
from server.request_authorization import RequestAuthorizer
from server.request_session import Session
from server.requests.partitions import LeaderHint, duplicate_error, leader_hint
from strom_api.error_codes import ErrorCode


@dataclass(frozen=True, slots=True)
class ProducePartition:
    partition: int
    records: bytes  # RecordBatch v2 bytes as the client sent them, handed on whole


@dataclass(frozen=True, slots=True)
class ProduceTopic:
    name: str
    partitions: Sequence[ProducePartition]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    acks: int  # 0, 1 or -1 (all)
    timeout_ms: int
    topics: Sequence[ProduceTopic]


@dataclass(frozen=True, slots=True)
class PartitionProduced:
    partition: int
    error: ApiError | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1  # -1 unless the topic stamps LogAppendTime
    log_start_offset: int = -1
    current_leader: LeaderHint | None = None


@dataclass(frozen=True, slots=True)
class TopicProduced:
    name: str
    partitions: list[PartitionProduced]


async def produce(
    replicas: ReplicaManager,
    authz: RequestAuthorizer,
    request: ProduceRequest,
    session: Session | None,
    appended: Callable[[], None] | None = None,
) -> list[TopicProduced]:
    """Each partition's answer, in the request's order. `appended` is told when only the
    acks=all wait is left (ReplicaManager.produce), or when nothing will be appended."""
    topics = request.topics
    twice = named_twice((t.name, p.partition) for t in topics for p in t.partitions)
    refused = authz.topics("Produce", (t.name for t in topics), session)
    # Kafka's ReplicaManager refuses clients' appends to internal topics: records that are
    # not the group coordinator's own would break its loading of __consumer_offsets. Its
    # writes go to the replica manager directly (broker/group_partitions.py), not here.
    refused.update(
        (t.name, _internal(t.name))
        for t in topics
        if t.name in INTERNAL_TOPICS and t.name not in refused
    )
    batches = [
        (topic.name, p.partition, p.records)
        for topic in topics
        for p in topic.partitions
        if (topic.name, p.partition) not in twice and topic.name not in refused
    ]
    size = sum(len(records) for _, _, records in batches)
    memory = replicas.memory
    if await memory.reserve(size, max(request.timeout_ms, 0) / 1000):
        try:
            results = await replicas.produce(request.acks, request.timeout_ms, batches, appended)
        finally:
            memory.release(size)
    else:
        error = ApiError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"The broker's request memory (queued.max.request.bytes={memory.capacity}) "
            f"stayed full for the request's {request.timeout_ms} ms; nothing was written.",
        )
        results = {(t, p): ProduceResult(error=error) for t, p, _ in batches}
    for topic in topics:
        if topic.name in refused:  # nothing of it written
            for p in topic.partitions:
                results[(topic.name, p.partition)] = ProduceResult(error=refused[topic.name])
    for key in twice:
        results[key] = ProduceResult(error=duplicate_error(*key))
    answered = []
    slices = LoopSlices()
    for topic in topics:
        partitions = []
        for p in topic.partitions:
            partitions.append(
                _answer(replicas, topic.name, p.partition, results[(topic.name, p.partition)])
            )
            await slices.step()
        answered.append(TopicProduced(topic.name, partitions))
    return answered


def _answer(
    replicas: ReplicaManager, topic: str, partition: int, result: ProduceResult
) -> PartitionProduced:
    if result.error is not None:
        return PartitionProduced(
            partition,
            result.error,
            current_leader=leader_hint(replicas, result.error, topic, partition),
        )
    assert result.append is not None
    local = replicas.partitions.get((topic, partition))
    return PartitionProduced(
        partition,
        base_offset=result.append.base_offset,
        log_append_time_ms=result.append.log_append_time_ms,
        log_start_offset=local.log.log_start_offset if local else -1,
    )


def _internal(topic: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
