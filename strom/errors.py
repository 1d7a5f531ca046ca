"""The errors the client library raises: Kafka's error name, a sentence, and whether the
same call may succeed if retried, as the broker said it (docs/architecture.md §7).

One family. `StromError` is the base; its `name` is a member of
`strom_api.error_codes.ErrorCode` (Kafka's error codes, common.proto), or of `ClientErrorName`
for the two errors the client raises itself that Kafka has no code for. Both are StrEnums, so
`error.name` is still a str: user code comparing it with "NOT_LEADER_OR_FOLLOWER", printing
it or using it as a dict key keeps working, while the library itself names errors by member
(tests/test_error_names.py keeps string literals out). The subclasses are kafka-python's
names for the errors its users catch by class: `KafkaTimeoutError` when a send or call ran
out of time (`delivery.timeout.ms`, `request.timeout.ms`), `AuthenticationError`, and the
authorization failures, which `error_for` picks by name.
"""

from __future__ import annotations

import enum

from strom_api.error_codes import ErrorCode
from strom_api.v1 import common_pb2


class ClientErrorName(enum.StrEnum):
    """Errors the client raises on its own that are no Kafka error code, so they are kept
    out of common.proto and ErrorCode: they never cross the wire."""

    # Java's IllegalStateException, which Kafka's clients throw for a call the client's
    # state forbids (closed, a partition not assigned); Kafka's protocol has no code for it.
    ILLEGAL_STATE = "ILLEGAL_STATE"
    # Kafka's SslAuthenticationException: a failed TLS handshake, noticed by the client's
    # network layer; unlike SASL_AUTHENTICATION_FAILED (58) it has no error code.
    SSL_AUTHENTICATION_FAILED = "SSL_AUTHENTICATION_FAILED"


ErrorName = ErrorCode | ClientErrorName


def error_member(name: str) -> ErrorName:
    """`name` as its member; ValueError for a name neither enum has. Typed callers pass a
    member already; this keeps untyped ones (user code, tests) honest too, as
    metadata.errors.ApiError does."""
    if name in ErrorCode.__members__:
        return ErrorCode(name)
    if name in ClientErrorName.__members__:
        return ClientErrorName(name)
    raise ValueError(f"{name!r} is neither a Kafka error name (ErrorCode) nor the client's own")


class StromError(Exception):
    def __init__(self, name: ErrorName, message: str, retriable: bool = False) -> None:
        super().__init__(f"{name}: {message}")
        self.name = error_member(name)
        self.message = message
        self.retriable = retriable


class KafkaTimeoutError(StromError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message, retriable=True)


_SASL_ERRORS = frozenset(
    {
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ErrorCode.ILLEGAL_SASL_STATE,
    }
)


def authentication_error_name(message: str) -> tuple[ErrorName, str]:
    """(Kafka's error name, the sentence) of an authentication failure's text: a SASL
    refusal names itself ("SASL_AUTHENTICATION_FAILED: ..."), anything else is TLS's."""
    name, colon, rest = message.partition(": ")
    if colon and name in _SASL_ERRORS:
        return ErrorCode(name), rest
    return ClientErrorName.SSL_AUTHENTICATION_FAILED, message


class AuthenticationError(StromError):
    """The connection could not be authenticated (a TLS handshake or a SASL exchange that
    failed): not retried, as Kafka's clients raise SslAuthenticationException /
    SaslAuthenticationException at once."""

    def __init__(self, message: str) -> None:
        super().__init__(*authentication_error_name(message))


class AuthorizationError(StromError):
    """The cluster's authorizer refused the request (authorizer.class.name, ACLs): not
    retriable, as Kafka's clients raise its AuthorizationException subclasses at once."""

    def __init__(self, name: ErrorName, message: str, retriable: bool = False) -> None:
        # error_for passes the broker's flag; a refusal is final whatever it says.
        super().__init__(name, message, retriable=False)


# kafka-python's names for Kafka's authorization exceptions.
class TopicAuthorizationFailedError(AuthorizationError):
    """The principal may not do that to a topic."""


class GroupAuthorizationFailedError(AuthorizationError):
    """The principal may not do that to a group."""


class ClusterAuthorizationFailedError(AuthorizationError):
    """The principal may not do that to the cluster."""


class TransactionalIdAuthorizationFailedError(AuthorizationError):
    """The principal may not do that to a transactional id."""


_BY_NAME: dict[ErrorName, type[StromError]] = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: TopicAuthorizationFailedError,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: GroupAuthorizationFailedError,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: ClusterAuthorizationFailedError,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: TransactionalIdAuthorizationFailedError,
}


AUTHORIZATION_ERRORS = frozenset(_BY_NAME)


def error_for(name: ErrorName, message: str, retriable: bool = False) -> StromError:
    """The error a broker answered, as the class kafka-python raises for it (StromError
    for the rest)."""
    return _BY_NAME.get(name, StromError)(name, message, retriable)


class ClosedError(StromError):
    def __init__(self, what: str) -> None:
        super().__init__(ClientErrorName.ILLEGAL_STATE, f"{what} is closed.")


def error_name(code: int) -> ErrorCode:
    """The error of a wire code. A code this client's contract does not know (a newer
    broker's) is UNKNOWN_SERVER_ERROR, as Kafka's Errors.forCode takes it."""
    try:
        return ErrorCode(common_pb2.ErrorCode.Name(code))
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def from_pb(error: common_pb2.Error) -> StromError:
    message = error.message
    if error.code not in common_pb2.ErrorCode.values():
        message = f"unexpected error code {error.code}: {message}"
    return error_for(error_name(error.code), message, error.retriable)
