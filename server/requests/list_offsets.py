"""ListOffsets: per partition, the offset for a time, or the earliest, latest or
max-timestamp one, from its leader.

Rules:
- a topic the principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED;
- a partition named twice is answered INVALID_REQUEST each time and looked up neither (as
  Kafka answers ListOffsets v1+; the Kafka-protocol fuzzer's 37,500 copies of one partition,
  each read by time, took the loop 1.4 s);
- only the leader answers (NOT_LEADER_OR_FOLLOWER with the leader named, etc.), after
  checking current_leader_epoch;
- timestamp -2 (earliest) is the log start offset, -1 (latest) the high watermark, -3 the
  record with the largest timestamp (KIP-734); a time (>= 0) the first record at or after
  it below the high watermark, answered with that record's own timestamp, else offset and
  timestamp -1; -4 (earliest local, KIP-405) and -5 (latest tiered, KIP-1005) are answered
  as Kafka answers them for a topic without remote storage (Strom has none): the log start
  offset, and offset -1 with epoch -1; any other negative is INVALID_REQUEST;
- the leader epoch answered is the one that wrote the offset (the partition's current one
  when no epoch covers it); a read by time that meets a failed disk answers its storage
  error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.replica_manager import ReplicaManager
from broker.request_checks import named_twice
from metadata.errors import ApiError, kept
from server.loop_slices import per_partition
from server.request_authorization import RequestAuthorizer
from server.request_session import Session
from server.requests.partitions import LeaderHint, duplicate_error, leader_hint
from storage.errors import StorageError
from storage.leader_epoch_cache import UNDEFINED_EPOCH
from storage.log import Log
from strom_api.error_codes import ErrorCode
from strom_api.records import decode_batch

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4  # the first offset on local disk: all of Strom's log
LATEST_TIERED = -5  # the last offset in remote storage: none in Strom


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    partition: int
    timestamp: int  # a time in ms, or LATEST, EARLIEST, MAX_TIMESTAMP
    current_leader_epoch: int = -1  # -1: not checked


@dataclass(frozen=True, slots=True)
class ListOffsetsTopic:
    name: str
    partitions: Sequence[ListOffsetsPartition]


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    topics: Sequence[ListOffsetsTopic]


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    partition: int
    error: ApiError | None = None
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1
    current_leader: LeaderHint | None = None


@dataclass(frozen=True, slots=True)
class TopicOffsets:
    name: str
    partitions: list[PartitionOffset]


async def list_offsets(
    replicas: ReplicaManager,
    authz: RequestAuthorizer,
    request: ListOffsetsRequest,
    session: Session | None,
) -> list[TopicOffsets]:
    """Each partition's answer, in the request's order, worked in slices with the event loop
    let run between them (server/loop_slices.py)."""
    refused = authz.topics("ListOffsets", (t.name for t in request.topics), session)
    twice = named_twice((t.name, p.partition) for t in request.topics for p in t.partitions)

    def answer(name: str, p: ListOffsetsPartition) -> PartitionOffset:
        error = refused.get(name)
        if error is not None:
            return PartitionOffset(p.partition, error)
        if (name, p.partition) in twice:
            return PartitionOffset(p.partition, duplicate_error(name, p.partition))
        return _partition_offset(replicas, name, p)

    return [
        TopicOffsets(name, partitions)
        for name, partitions in await per_partition(request.topics, answer)
    ]


def _partition_offset(
    replicas: ReplicaManager, topic: str, p: ListOffsetsPartition
) -> PartitionOffset:
    try:
        return _lookup(replicas, topic, p)
    except ApiError as exc:
        error = kept(exc)
        return PartitionOffset(
            p.partition, error, current_leader=leader_hint(replicas, error, topic, p.partition)
        )
    except StorageError as exc:  # a read by time met a failed disk
        return PartitionOffset(p.partition, ApiError(exc.error_name, str(exc)))


def _lookup(replicas: ReplicaManager, topic: str, p: ListOffsetsPartition) -> PartitionOffset:
    partition = replicas.leader_partition(topic, p.partition)
    partition.check_epoch(p.current_leader_epoch)
    log = partition.log
    timestamp = -1
    if p.timestamp == LATEST_TIERED:  # UnifiedLog without remote storage: -1, epoch -1
        return PartitionOffset(p.partition)
    if p.timestamp in (EARLIEST, EARLIEST_LOCAL):
        offset = log.log_start_offset
    elif p.timestamp == LATEST:
        offset = log.high_watermark
    elif p.timestamp == MAX_TIMESTAMP:
        found = _max_timestamp_offset(log)
        if found is None:
            return PartitionOffset(p.partition)
        offset, timestamp = found
    elif p.timestamp >= 0:
        found_offset = log.offset_for_timestamp(p.timestamp)
        if found_offset is None or found_offset >= log.high_watermark:
            return PartitionOffset(p.partition)  # no record that recent (below the HW)
        offset = found_offset
        timestamp = _record_timestamp(log, offset)
    else:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"ListOffsets timestamp {p.timestamp} is neither a time nor one of -1 "
            "(latest), -2 (earliest), -3 (max timestamp), -4 (earliest local), -5 (latest "
            "tiered).",
        )
    epoch = log.leader_epochs.epoch_for_offset(offset) if offset < log.log_end_offset else -1
    return PartitionOffset(
        p.partition,
        timestamp=timestamp,
        offset=offset,
        leader_epoch=epoch if epoch != UNDEFINED_EPOCH else partition.leader_epoch,
    )


def _max_timestamp_offset(log: Log) -> tuple[int, int] | None:
    """(offset, timestamp) of the record with the largest timestamp (KIP-734), by the
    segments' time indexes and one batch decoded."""
    best = None
    for segment in log.segments:
        if best is None or segment.largest_timestamp > best.largest_timestamp:
            best = segment
    if best is None or best.largest_timestamp < 0:
        return None
    offset = log.offset_for_timestamp(best.largest_timestamp)
    if offset is None:
        return None
    return offset, best.largest_timestamp


def _record_timestamp(log: Log, offset: int) -> int:
    """The timestamp of the record at `offset` (one batch decoded: ListOffsets by time is
    rare, and Kafka answers with the record's own time)."""
    data = log.read(offset, 1)
    if not data:
        return -1
    header, records = decode_batch(data)
    if header.log_append_time:
        return int(header.max_timestamp)
    for record in records:
        if record.offset == offset:
            return int(record.timestamp)
    return -1
