"""DeleteRecords: per partition, the leader moves its log start up to an offset (-1: the
high watermark) and answers the new low watermark.

Rules: a topic the principal may not DELETE is answered TOPIC_AUTHORIZATION_FAILED; only
the leader answers; an offset past the high watermark is OFFSET_OUT_OF_RANGE; once any log
start moved, the offsets checkpoint is written before the answer, and if that fails every
partition not already refused is answered KAFKA_STORAGE_ERROR: a leader restarting with the
old log start would bring deleted records back with no epoch covering them (found by
tests/replication_sim, seed 4341).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from broker.replica_manager import ReplicaManager
from metadata.errors import ApiError, kept
from server.loop_slices import per_partition
from server.request_authorization import RequestAuthorizer
from server.request_session import Session
from storage.errors import StorageError
from strom_api.error_codes import ErrorCode


@dataclass(frozen=True, slots=True)
class DeletePartition:
    partition: int
    offset: int  # records below it are deleted; -1: up to the high watermark


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    name: str
    partitions: Sequence[DeletePartition]


@dataclass(frozen=True, slots=True)
class DeleteRecordsRequest:
    topics: Sequence[DeleteTopic]


@dataclass(frozen=True, slots=True)
class PartitionLowWatermark:
    partition: int
    error: ApiError | None = None
    low_watermark: int = -1


@dataclass(frozen=True, slots=True)
class TopicLowWatermarks:
    name: str
    partitions: list[PartitionLowWatermark]


async def delete_records(
    replicas: ReplicaManager,
    authz: RequestAuthorizer,
    persist_offsets: Callable[[], Awaitable[None]],
    request: DeleteRecordsRequest,
    session: Session | None,
) -> list[TopicLowWatermarks]:
    """Each partition's answer, in the request's order. `persist_offsets` writes the
    offsets checkpoints (the node's, in a thread)."""
    refused = authz.topics("DeleteRecords", (t.name for t in request.topics), session)
    answer = [
        TopicLowWatermarks(name, partitions)
        for name, partitions in await per_partition(
            request.topics, lambda name, p: _delete(replicas, refused.get(name), name, p)
        )
    ]
    moved = any(p.error is None for topic in answer for p in topic.partitions)
    if not moved:
        return answer
    try:
        await persist_offsets()
    except OSError as exc:
        error = ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"the new log start is not durable: {exc}")
        return [
            TopicLowWatermarks(
                topic.name,
                [p if p.error is not None else replace(p, error=error) for p in topic.partitions],
            )
            for topic in answer
        ]
    return answer


def _delete(
    replicas: ReplicaManager, refusal: ApiError | None, topic: str, p: DeletePartition
) -> PartitionLowWatermark:
    if refusal is not None:
        return PartitionLowWatermark(p.partition, refusal)
    try:
        partition = replicas.leader_partition(topic, p.partition)
        return PartitionLowWatermark(
            p.partition, low_watermark=partition.delete_records_before(p.offset)
        )
    except ApiError as exc:
        return PartitionLowWatermark(p.partition, kept(exc))
    except StorageError as exc:
        return PartitionLowWatermark(p.partition, ApiError(exc.error_name, str(exc)))
