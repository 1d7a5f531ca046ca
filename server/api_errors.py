"""How an error reaches a client: Kafka's name, a sentence, and whether retrying can help
(docs/architecture.md §7). Every servicer builds its common.proto Error here, so retriability is
decided in one place."""

from __future__ import annotations

from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode
from strom_api.v1 import common_pb2

# Kafka's RetriableException subclasses among the errors Strom answers: the same request
# may succeed later, usually after the client refreshed its metadata.
RETRIABLE = frozenset(
    {
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
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
