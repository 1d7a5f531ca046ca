"""Produce (key 0, v7-v10) on the Kafka listener: the request converted to
server/requests/produce.py's (each partition's records handed on as the bytes the client
sent: no per-record work here), its answer converted back in the request's version.

Kafka's fields from the shared answer: per partition the error code and message (v8+),
base_offset, log_append_time (-1 unless the topic stamps LogAppendTime), log_start_offset
and, on NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, KIP-951's current_leader with the
leader's endpoint for this listener in node_endpoints (v10 tagged fields);
throttle_time 0 (no quotas). record_errors stays empty: the shared path refuses a batch as a
whole.

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
from server.kafka.versioned import build, nested
from server.request_session import current_session
from server.requests.produce import (
    PartitionProduced,
    ProducePartition,
    ProduceRequest,
    ProduceTopic,
    TopicProduced,
    produce,
)


def produce_request(body: Any) -> ProduceRequest:
    return ProduceRequest(
        int(body.acks),
        millis(body.timeout),
        [
            ProduceTopic(
                str(topic.name),
                # null records: nothing to append, which the replica manager refuses as
                # Kafka's validateRecords does (no record batch)
                [ProducePartition(int(p.index), p.records or b"") for p in topic.partition_data],
            )
            for topic in body.topic_data
        ],
    )


async def produce_api(plane: DataPlane, listener_name: str, request: Request) -> Any:
    shared = produce_request(request.body)
    answer = await produce(plane.replicas, plane.authz, shared, current_session())
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
    return produce_response(request.api_version, answer, plane, listener_name)


def produce_response(
    version: int, answer: list[TopicProduced], plane: DataPlane, listener_name: str
) -> Any:
    response_type = load_response_schema(PRODUCE, version)
    topic_type = nested(response_type, "TopicProduceResponse")
    partition_type = nested(response_type, "PartitionProduceResponse")
    leader_type = nested(response_type, "LeaderIdAndEpoch") if version >= 10 else None
    leaders = []
    topics = []
    for topic in answer:
        partitions = []
        for p in topic.partitions:
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
