"""Produce (key 0, v3-v10) on the Kafka listener: the request converted to
server/requests/produce.py's (each partition's records handed on as the bytes the client
sent: no per-record work here), its answer converted back in the request's version.

Kafka's fields from the shared answer: per partition the error code and message (v8+),
base_offset, log_append_time (-1 unless the topic stamps LogAppendTime), log_start_offset
(v5+) and, on NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, KIP-951's current_leader with the
leader's endpoint for this listener in node_endpoints (v10 tagged fields);
throttle_time 0 (no quotas). record_errors stays empty: the shared path refuses a batch as a
whole.

A zstd batch in a request older than v7 is refused UNSUPPORTED_COMPRESSION_TYPE and not
handed on, as Kafka's ProduceRequest.validateRecords refuses it (a rule of the request's
version, so of this front end: the shared path has no versions).

acks=0 is answered as Kafka's KafkaApis.handleProduceRequest does: no response at all when
every partition was written, and the connection closed (with a log line naming each
failed partition) when one was not, since a producer that reads no answer learns of the
failure only that way and then refreshes its metadata. acks other than 0, 1, -1 is the
shared path's INVALID_REQUIRED_ACKS per partition, in a response.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.index import load_response_schema
from kio.static.primitive import i32, i64

from broker.loop_slices import LoopSlices
from metadata.errors import ApiError
from server.kafka.apis import PRODUCE
from server.kafka.data_plane import (
    NO_THROTTLE,
    DataPlane,
    code,
    leader_field,
    message,
    millis,
    node_endpoints,
)
from server.kafka.frames import Request
from server.kafka.no_response import CloseConnection
from server.kafka.ordering import ORDERED_PART_DONE
from server.kafka.versioned import build, nested
from server.loop_slices import per_group
from server.request_session import current_session
from server.requests.produce import (
    PartitionProduced,
    ProducePartition,
    ProduceRequest,
    ProduceTopic,
    TopicProduced,
    produce,
)
from strom_api import compression
from strom_api.error_codes import ErrorCode


async def produce_request(body: Any) -> ProduceRequest:
    # In slices of partitions and of topics (100,000 topics of one partition each, too).
    # Null records: nothing to append, which the replica manager refuses as Kafka's
    # validateRecords does (no record batch).
    topics = await per_group(
        ((str(topic.name), topic.partition_data) for topic in body.topic_data),
        lambda _, p: ProducePartition(int(p.index), p.records or b""),
        ProduceTopic,
    )
    return ProduceRequest(int(body.acks), millis(body.timeout), topics)


ZSTD_FROM_VERSION = 7  # KIP-110
_MAGIC_AT = 16  # RecordBatch v2: base offset (8), length (4), partition leader epoch (4)
_ATTRIBUTES_AT = 21  # then magic (1) and CRC (4); the codec is the attributes' low 3 bits


def _zstd_batch(records: bytes) -> bool:
    return (
        len(records) >= _ATTRIBUTES_AT + 2
        and records[_MAGIC_AT] == 2
        and records[_ATTRIBUTES_AT + 1] & 0x07 == compression.ZSTD
    )


def _too_old_for_zstd(topic: str, partition: int) -> ApiError:
    return ApiError(
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        f"Produce requests to {topic}-{partition} older than v{ZSTD_FROM_VERSION} may not "
        "carry zstd-compressed batches.",
    )


async def produce_api(plane: DataPlane, listener_name: str, request: Request) -> Any:
    full = await produce_request(request.body)
    refused = set()
    if request.api_version < ZSTD_FROM_VERSION:
        refused = {
            (t.name, p.partition)
            for t in full.topics
            for p in t.partitions
            if _zstd_batch(p.records)
        }
    shared = full
    if refused:
        shared = ProduceRequest(
            full.acks,
            full.timeout_ms,
            [
                ProduceTopic(
                    t.name, [p for p in t.partitions if (t.name, p.partition) not in refused]
                )
                for t in full.topics
            ],
        )
    # Its appends keep the connection's order; its acks=all wait may overlap the next
    # requests' (server/kafka/connection.py).
    answer = await produce(
        plane.replicas, plane.authz, shared, current_session(), ORDERED_PART_DONE.get()
    )
    if refused:
        answer = [_with_refused(t, a, refused) for t, a in zip(full.topics, answer, strict=True)]
    if shared.acks == 0:
        failed = [
            f"{topic.name}-{p.partition}: {p.error}"
            for topic in answer
            for p in topic.partitions
            if p.error is not None
        ]
        if failed:
            raise CloseConnection(
                "an acks=0 produce request failed for "
                + ", ".join(failed)
                + " (a producer that reads no response is told by the closed connection)"
            )
        return None
    return await produce_response(request.api_version, answer, plane, listener_name)


def _with_refused(
    asked: ProduceTopic, answered: TopicProduced, refused: set[tuple[str, int]]
) -> TopicProduced:
    """The shared answer of a topic with its refused partitions answered in their place."""
    rest = iter(answered.partitions)
    return TopicProduced(
        asked.name,
        [
            PartitionProduced(p.partition, _too_old_for_zstd(asked.name, p.partition))
            if (asked.name, p.partition) in refused
            else next(rest)
            for p in asked.partitions
        ],
    )


async def produce_response(
    version: int, answer: list[TopicProduced], plane: DataPlane, listener_name: str
) -> Any:
    response_type = load_response_schema(PRODUCE, version)
    topic_type = nested(response_type, "TopicProduceResponse")
    partition_type = nested(response_type, "PartitionProduceResponse")
    leader_type = nested(response_type, "LeaderIdAndEpoch") if version >= 10 else None
    leaders = []
    topics = []
    slices = LoopSlices()
    for topic in answer:
        partitions = []
        for p in topic.partitions:
            await slices.step()
            partitions.append(_partition(partition_type, leader_type, p))
            if p.current_leader is not None and p.current_leader.leader_id >= 0:
                leaders.append(p.current_leader.leader_id)
        topics.append(topic_type(name=topic.name, partition_responses=tuple(partitions)))
    endpoints = (
        node_endpoints(
            nested(response_type, "NodeEndpoint"), plane.replicas.image, listener_name, leaders
        )
        if version >= 10
        else ()
    )
    return build(
        response_type,
        responses=tuple(topics),
        throttle_time=NO_THROTTLE,
        node_endpoints=endpoints,
    )


def _partition(
    partition_type: type[Any], leader_type: type[Any] | None, p: PartitionProduced
) -> Any:
    return build(
        partition_type,
        index=i32(p.partition),
        error_code=code(p.error),
        base_offset=i64(p.base_offset),
        log_append_time=_append_time(p.log_append_time_ms),
        log_start_offset=i64(p.log_start_offset),
        record_errors=(),
        error_message=message(p.error),
        current_leader=leader_field(leader_type, p.current_leader) if leader_type else None,
    )


def _append_time(ms: int) -> datetime.datetime | None:
    """kio writes None as Kafka's -1 (CreateTime topics)."""
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
