"""DeleteRecords (key 21, v0-v2) on the Kafka listener: the request converted to
server/requests/delete_records.py's (the gRPC ClientService's path, which also writes the
offsets checkpoint before answering), its answer back: per partition Kafka's error code and
the new low watermark. The request's timeout_ms is not waited on: the shared path answers
once the leader moved its log start (followers follow it on their next fetch)."""

from __future__ import annotations

from typing import Any

from kio.index import load_response_schema
from kio.static.primitive import i32, i64

from server.kafka.apis import DELETE_RECORDS
from server.kafka.data_plane import NO_THROTTLE, DataPlane, code
from server.kafka.frames import Request
from server.kafka.versioned import build, nested
from server.loop_slices import per_group
from server.request_session import current_session
from server.requests.delete_records import (
    DeletePartition,
    DeleteRecordsRequest,
    DeleteTopic,
    delete_records,
)


async def delete_records_api(plane: DataPlane, request: Request) -> Any:
    # Both conversions in loop slices of partitions, as the shared path works.
    asked = await per_group(
        ((str(t.name), t.partitions) for t in request.body.topics),
        lambda _, p: DeletePartition(int(p.partition_index), int(p.offset)),
        DeleteTopic,
    )
    answer = await delete_records(
        plane.replicas,
        plane.authz,
        plane.persist_offsets,
        DeleteRecordsRequest(asked),
        current_session(),
    )
    response_type = load_response_schema(DELETE_RECORDS, request.api_version)
    topic_type = nested(response_type, "DeleteRecordsTopicResult")
    partition_type = nested(response_type, "DeleteRecordsPartitionResult")
    topics = await per_group(
        ((t.name, t.partitions) for t in answer),
        lambda _, p: partition_type(
            partition_index=i32(p.partition),
            low_watermark=i64(p.low_watermark),
            error_code=code(p.error),
        ),
        lambda name, partitions: topic_type(name=name, partitions=tuple(partitions)),
    )
    return build(response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))
