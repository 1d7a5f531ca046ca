"""OffsetsForLeaderEpoch from a client (KIP-320: a consumer checks, after a leader change,
whether its position is still on the log): per partition, the largest epoch at or below the
one asked and where it ends on the leader.

Rules: a topic the principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED; only
the leader answers, after checking current_leader_epoch; an epoch the leader has no record
of is answered -1, -1; the end offset is never past the leader's log end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.replica_manager import ReplicaManager
from metadata.errors import ApiError, kept
from server.loop_slices import per_partition
from server.request_authorization import RequestAuthorizer
from server.request_session import Session


@dataclass(frozen=True, slots=True)
class EpochPartition:
    partition: int
    leader_epoch: int  # the epoch whose end offset is asked for
    current_leader_epoch: int = -1  # -1: not checked


@dataclass(frozen=True, slots=True)
class EpochTopic:
    name: str
    partitions: Sequence[EpochPartition]


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochRequest:
    topics: Sequence[EpochTopic]


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    partition: int
    error: ApiError | None = None
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class TopicEpochEndOffsets:
    name: str
    partitions: list[EpochEndOffset]


async def offsets_for_leader_epoch(
    replicas: ReplicaManager,
    authz: RequestAuthorizer,
    request: OffsetsForLeaderEpochRequest,
    session: Session | None,
) -> list[TopicEpochEndOffsets]:
    """Each partition's answer, in the request's order, worked in slices with the event loop
    let run between them (server/loop_slices.py)."""
    refused = authz.topics("OffsetsForLeaderEpoch", (t.name for t in request.topics), session)
    return [
        TopicEpochEndOffsets(name, partitions)
        for name, partitions in await per_partition(
            request.topics, lambda name, p: _end_offset(replicas, refused.get(name), name, p)
        )
    ]


def _end_offset(
    replicas: ReplicaManager, refusal: ApiError | None, topic: str, p: EpochPartition
) -> EpochEndOffset:
    if refusal is not None:
        return EpochEndOffset(p.partition, refusal)
    try:
        partition = replicas.leader_partition(topic, p.partition)
        epoch, end = partition.end_offset_for_epoch(p.leader_epoch, p.current_leader_epoch)
    except ApiError as exc:
        return EpochEndOffset(p.partition, kept(exc))
    return EpochEndOffset(p.partition, leader_epoch=epoch, end_offset=end)
