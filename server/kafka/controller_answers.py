"""Reading the controller's answers (strom_api controller.proto messages, as the broker's
forwarder returns them) at the Kafka edge: an Error to Kafka's code and message, and the
answer when no controller answered. Sans-I/O."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode

from metadata.errors import ApiError
from server.kafka.error_codes import kafka_error_code
from strom_api.error_codes import ErrorCode
from strom_api.v1 import common_pb2

Outcome = tuple[KafkaErrorCode, str | None]  # Kafka's error code and error_message

NO_ERROR: Outcome = (KafkaErrorCode.none, None)


def outcome(error: Any) -> Outcome:
    """A common.proto Error (code NONE: no error) as Kafka's code and message."""
    name = ErrorCode(common_pb2.ErrorCode.Name(error.code))
    if name == ErrorCode.NONE:
        return NO_ERROR
    return kafka_error_code(name), error.message or None


def item_outcome(item: Any, field: str = "error") -> Outcome:
    """The outcome of a result message's optional Error field (unset: no error)."""
    return outcome(getattr(item, field)) if item.HasField(field) else NO_ERROR


def whole_outcome(response: Any) -> Outcome | None:
    """The ControllerError refusing a whole request, if any (the items then carry none)."""
    if "error" in response.DESCRIPTOR.fields_by_name and response.HasField("error"):
        return outcome(response.error.error)
    return None


def refusal(error: ApiError) -> Outcome:
    """A refusal the listener makes itself, with a rule it shares with the controller."""
    return kafka_error_code(error.error_name), error.message


def not_forwarded(error_name: ErrorCode, why: str) -> Outcome:
    """A forward that brought no answer (server/controller_forwarder.NotForwarded): no active
    controller answered (the gRPC forwarder answers UNAVAILABLE; Kafka's forwarding broker
    REQUEST_TIMED_OUT), or one refused the request as malformed (INVALID_REQUEST)."""
    return kafka_error_code(error_name), why
