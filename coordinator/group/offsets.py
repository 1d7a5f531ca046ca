"""The rules of committed offsets (Kafka's OffsetMetadataManager): which partitions of an
OffsetCommit may be stored, what an OffsetFetch returns, and when an Empty group's offsets
expire. Pure functions; the core (coordinator/group/core.py) appends and answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coordinator.group.messages import CommittedOffset, FetchResult, TopicPartition
from coordinator.group.records import OffsetKey, OffsetValue, offset_key, offset_value
from coordinator.group.state import Group, GroupState
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode


@dataclass(frozen=True, slots=True)
class PreparedCommit:
    values: dict[TopicPartition, OffsetValue]  # to store, then to answer None for
    refused: dict[TopicPartition, ApiError | None]  # answered at once with their error
    records: list[tuple[bytes, bytes | None]]  # the OffsetCommit records of `values`


def prepare_commit(
    group_id: str,
    offsets: tuple[CommittedOffset, ...],
    now_ms: int,
    partition_count: Callable[[str], int],
    metadata_max_bytes: int,
) -> PreparedCommit:
    prepared = PreparedCommit({}, {}, [])
    for o in offsets:
        tp = (o.topic, o.partition)
        refusal = commit_refusal(o, partition_count(o.topic), metadata_max_bytes)
        if refusal is not None:
            prepared.refused[tp] = refusal
            continue
        value = OffsetValue(o.offset, o.leader_epoch, o.metadata, now_ms)
        prepared.values[tp] = value
        key = offset_key(OffsetKey(group_id, o.topic, o.partition))
        prepared.records.append((key, offset_value(value)))
    return prepared


def commit_refusal(
    offset: CommittedOffset, partitions: int, metadata_max_bytes: int
) -> ApiError | None:
    """Kafka's checks: a partition that exists (else a commit could fill the coordinator's
    memory with made-up names), metadata within offset.metadata.max.bytes."""
    topic, partition = offset.topic, offset.partition
    if not 0 <= partition < partitions:
        return ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"This server does not host this topic-partition: {topic}-{partition}.",
        )
    if len(offset.metadata.encode()) > metadata_max_bytes:
        return ApiError(
            ErrorCode.OFFSET_METADATA_TOO_LARGE,
            f"The metadata of the offset for {topic}-{partition} is longer than "
            f"offset.metadata.max.bytes={metadata_max_bytes}.",
        )
    return None


def fetch(group: Group | None, partitions: tuple[TopicPartition, ...] | None) -> FetchResult:
    """The offsets asked for (None where there is none), or every one the group has."""
    offsets = {} if group is None else group.offsets
    if partitions is None:
        return dict(offsets)
    return {tp: offsets.get(tp) for tp in partitions}


def expired(group: Group, now_ms: int, retention_ms: int) -> bool:
    """KIP-211: an Empty group's offsets go offsets.retention.minutes after the later of its
    last state change and its last commit."""
    if group.state is not GroupState.EMPTY or not group.offsets:
        return False
    last_commit = max(v.commit_timestamp for v in group.offsets.values())
    return now_ms - max(group.state_timestamp_ms, last_commit) >= retention_ms
