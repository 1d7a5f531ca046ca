"""The rules of committed offsets (Kafka's OffsetMetadataManager): which partitions of an
OffsetCommit may be stored, what an OffsetFetch returns, and when an Empty group's offsets
expire. Pure functions; the core (coordinator/group/core.py) appends and answers.
"""

from __future__ import annotations

import struct
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


CONSUMER_PROTOCOL = "consumer"
_VERSION_AND_COUNT = struct.Struct(">hi")
_LENGTH = struct.Struct(">h")


def subscribed_topics(group: Group) -> frozenset[str] | None:
    """The topics a group's members subscribe to, read from their subscriptions (Kafka's
    ConsumerProtocolSubscription, the metadata of the chosen assignor) as Kafka's
    ClassicGroup.computeSubscribedTopics does; None when not known (not a consumer group,
    or a subscription that does not parse): then every topic counts as subscribed."""
    if group.protocol_type != CONSUMER_PROTOCOL and group.members:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        parsed = _subscription_topics(member.metadata_for(group.protocol or ""))
        if parsed is None:
            return None
        topics.update(parsed)
    return frozenset(topics)


def _subscription_topics(data: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version: the topics come first,
    an int16 version, then an array of int16-length strings)."""
    try:
        version, count = _VERSION_AND_COUNT.unpack_from(data)
        if version < 0 or count < 0:
            return None
        at, topics = _VERSION_AND_COUNT.size, []
        for _ in range(count):
            (length,) = _LENGTH.unpack_from(data, at)
            at += _LENGTH.size
            if length < 0 or at + length > len(data):
                return None
            topics.append(data[at : at + length].decode())
            at += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def offset_delete_refusal(group: Group | None, group_id: str) -> ApiError | None:
    """Kafka's ClassicGroup.validateOffsetDelete: a group that exists, and has no members
    unless it is a consumer group (whose subscriptions say which topics are in use)."""
    if group is None or group.state is GroupState.DEAD:
        return ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"The group '{group_id}' does not exist.")
    if group.state is not GroupState.EMPTY and group.protocol_type != CONSUMER_PROTOCOL:
        return ApiError(
            ErrorCode.NON_EMPTY_GROUP,
            f"The group '{group_id}' has active members and is not a consumer group.",
        )
    return None


def expired(group: Group, now_ms: int, retention_ms: int) -> bool:
    """KIP-211: an Empty group's offsets go offsets.retention.minutes after the later of its
    last state change and its last commit."""
    if group.state is not GroupState.EMPTY or not group.offsets:
        return False
    last_commit = max(v.commit_timestamp for v in group.offsets.values())
    return now_ms - max(group.state_timestamp_ms, last_commit) >= retention_ms
