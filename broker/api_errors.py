"""How an error reaches a client: Kafka's name, a sentence, and whether retrying can help
(docs/architecture.md §7). Every servicer builds its common.proto Error here, so retriability is
decided in one place."""

from __future__ import annotations

from metadata.errors import ApiError
from strom_api.v1 import common_pb2

# Kafka's RetriableException subclasses among the errors Strom answers: the same request
# may succeed later, usually after the client refreshed its metadata.
RETRIABLE = frozenset(
    {
        "NOT_CONTROLLER",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "REQUEST_TIMED_OUT",
        "CORRUPT_MESSAGE",
        "LEADER_NOT_AVAILABLE",
        "NOT_LEADER_OR_FOLLOWER",
        "NETWORK_EXCEPTION",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "KAFKA_STORAGE_ERROR",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "OFFSET_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
        "REPLICA_NOT_AVAILABLE",
        "BROKER_NOT_AVAILABLE",
        "UNKNOWN_TOPIC_ID",
    }
)


def error_pb(error: ApiError) -> common_pb2.Error:
    return make_error(error.error_name, error.message)


def make_error(name: str, message: str) -> common_pb2.Error:
    return common_pb2.Error(
        code=name,  # an ErrorCode name; protobuf takes enum names
        message=message,
        retriable=name in RETRIABLE,
    )
