"""ListOffsets (key 2, v1-v10) and OffsetForLeaderEpoch (key 23, v2-v4) on the Kafka
listener: each request converted to server/requests/list_offsets.py's and leader_epochs.py's
(the ones the gRPC ClientService calls), their answers back in the request's version.

ListOffsets: per partition Kafka's error code, the timestamp and offset and, from v4, the
leader epoch that wrote the offset; current_leader_epoch (v4+) handed on. isolation_level
needs nothing of its own: with no transactions the last stable offset is the high watermark,
which "latest" answers either way. replica_id is not looked at: Strom's followers ask their
leader over ReplicaService, so every caller here is answered as a consumer (offsets below
the high watermark, from the leader). timeout_ms (v10) bounds only remote-storage lookups
in Kafka; Strom has none.

OffsetForLeaderEpoch: per partition the error code, the largest epoch at or below the one
asked and its end offset, after the current_leader_epoch check; a replica's request
(replica_id >= 0, v3+) is answered as a consumer's: it changes nothing on the leader.
"""

from __future__ import annotations

from typing import Any

from kio.index import load_response_schema
from kio.static.primitive import i32, i64

from server.kafka.apis import LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH
from server.kafka.data_plane import NO_THROTTLE, DataPlane, code
from server.kafka.frames import Request
from server.kafka.versioned import build, nested
from server.loop_slices import per_group
from server.request_session import current_session
from server.requests.leader_epochs import (
    EpochPartition,
    EpochTopic,
    OffsetsForLeaderEpochRequest,
    offsets_for_leader_epoch,
)
from server.requests.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
    list_offsets,
)


async def list_offsets_api(plane: DataPlane, request: Request) -> Any:
    # Both conversions in loop slices of partitions, as the shared path works: a request
    # may name 250,000 of them (the Kafka-protocol fuzzer's ListOffsets of 37,500 topics,
    # seed 18 case 390: 0.36 s of the loop converting).
    asked = await per_group(
        ((str(t.name), t.partitions) for t in request.body.topics),
        lambda _, p: ListOffsetsPartition(
            int(p.partition_index),
            int(p.timestamp),
            int(getattr(p, "current_leader_epoch", -1)),  # v4+
        ),
        ListOffsetsTopic,
    )
    answer = await list_offsets(
        plane.replicas, plane.authz, ListOffsetsRequest(asked), current_session()
    )
    response_type = load_response_schema(LIST_OFFSETS, request.api_version)
    topic_type = nested(response_type, "ListOffsetsTopicResponse")
    partition_type = nested(response_type, "ListOffsetsPartitionResponse")
    topics = await per_group(
        ((t.name, t.partitions) for t in answer),
        lambda _, p: build(
            partition_type,
            partition_index=i32(p.partition),
            error_code=code(p.error),
            timestamp=i64(p.timestamp),
            offset=i64(p.offset),
            leader_epoch=i32(p.leader_epoch),
        ),
        lambda name, partitions: topic_type(name=name, partitions=tuple(partitions)),
    )
    return build(response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))


async def offset_for_leader_epoch_api(plane: DataPlane, request: Request) -> Any:
    asked = await per_group(
        ((str(t.topic), t.partitions) for t in request.body.topics),
        lambda _, p: EpochPartition(
            int(p.partition), int(p.leader_epoch), int(p.current_leader_epoch)
        ),
        EpochTopic,
    )
    answer = await offsets_for_leader_epoch(
        plane.replicas, plane.authz, OffsetsForLeaderEpochRequest(asked), current_session()
    )
    response_type = load_response_schema(OFFSET_FOR_LEADER_EPOCH, request.api_version)
    topic_type = nested(response_type, "OffsetForLeaderTopicResult")
    partition_type = nested(response_type, "EpochEndOffset")
    topics = await per_group(
        ((t.name, t.partitions) for t in answer),
        lambda _, p: partition_type(
            error_code=code(p.error),
            partition=i32(p.partition),
            leader_epoch=i32(p.leader_epoch),
            end_offset=i64(p.end_offset),
        ),
        lambda name, partitions: topic_type(topic=name, partitions=tuple(partitions)),
    )
    return build(response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))
