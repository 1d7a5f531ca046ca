"""InitProducerId (key 22, v0-v4) on the Kafka listener: an idempotent producer's id and
epoch from server/requests/producer_ids.py, the one the gRPC ClientService calls.

A null transactional id is an idempotent producer's (the shared request's ""); v3+ carry
the producer's id and epoch for KIP-360's epoch bump, older versions -1, -1 (a new id).
"""

from __future__ import annotations

from typing import Any

from kio.index import load_response_schema
from kio.static.primitive import i16, i64

from server.kafka.apis import INIT_PRODUCER_ID
from server.kafka.data_plane import NO_THROTTLE, DataPlane, code
from server.kafka.frames import Request
from server.kafka.versioned import build
from server.request_session import current_session
from server.requests.producer_ids import InitProducerIdRequest, init_producer_id


async def init_producer_id_api(plane: DataPlane, request: Request) -> Any:
    body = request.body
    shared = InitProducerIdRequest(
        str(body.transactional_id or ""),
        int(getattr(body, "producer_id", -1)),
        int(getattr(body, "producer_epoch", -1)),
    )
    answer = await init_producer_id(plane.producer_ids, plane.authz, shared, current_session())
    return build(
        load_response_schema(INIT_PRODUCER_ID, request.api_version),
        throttle_time=NO_THROTTLE,
        error_code=code(answer.error),
        producer_id=i64(answer.producer_id),
        producer_epoch=i16(answer.producer_epoch),
    )
