"""What the Kafka listener's data-plane handlers (Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch, InitProducerId, DeleteRecords) share: the collaborators the gRPC
ClientService holds, so both front ends call server/requests/ with the same ones, and the
pieces of Kafka's answers every one of them builds the same way (error code and message,
the timeout fields in milliseconds, KIP-951's leader endpoints)."""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i32

from broker.producer_ids import ProducerIdManager
from broker.replica_manager import ReplicaManager
from metadata.errors import ApiError
from metadata.image import MetadataImage
from server.kafka.error_codes import kafka_error_code
from server.kafka.versioned import build
from server.request_authorization import RequestAuthorizer
from server.requests.partitions import LeaderHint

NO_THROTTLE = datetime.timedelta(0)  # Strom has no client quotas: never throttled


@dataclass(frozen=True)
class DataPlane:
    replicas: ReplicaManager
    producer_ids: ProducerIdManager
    authz: RequestAuthorizer
    persist_offsets: Callable[[], Awaitable[None]]  # the offsets checkpoints (DeleteRecords)


def code(error: ApiError | None) -> KafkaErrorCode:
    return kafka_error_code(None if error is None else error.error_name)


def message(error: ApiError | None) -> str | None:
    return None if error is None else error.message


def millis(value: datetime.timedelta) -> int:
    """A kio timedelta field (max_wait, timeout) in Kafka's milliseconds."""
    return round(value.total_seconds() * 1000)


def leader_field(leader_type: type[Any], hint: LeaderHint | None) -> Any:
    """KIP-951's current_leader: -1, -1 (the schema's default) when the answer has none."""
    if hint is None:
        return leader_type()
    return leader_type(leader_id=i32(hint.leader_id), leader_epoch=i32(hint.leader_epoch))


def node_endpoints(
    endpoint_type: type[Any], image: MetadataImage, listener_name: str, leaders: Iterable[int]
) -> tuple[Any, ...]:
    """KIP-951's node_endpoints: each leader named in a current_leader, with its endpoint
    for the listener the request came in on (a broker without one, or fenced, left out, as
    Kafka's getAliveBrokerNode finds none)."""
    out = []
    for broker_id in sorted(set(leaders)):
        broker = image.cluster.brokers.get(broker_id)
        if broker is None or broker.fenced:
            continue
        endpoint = next((e for e in broker.endpoints if e.name == listener_name), None)
        if endpoint is not None:
            out.append(
                build(
                    endpoint_type,
                    node_id=i32(broker_id),
                    host=endpoint.host,
                    port=i32(endpoint.port),
                    rack=broker.rack or None,
                )
            )
    return tuple(out)
