"""The errors the client library raises: Kafka's error name, a sentence, and whether the
same call may succeed if retried, as the broker said it (docs/architecture.md §7).

`StromError` is the base; `KafkaTimeoutError` is raised when a send or call ran out of time
(`delivery.timeout.ms`, `request.timeout.ms`), as kafka-python names it.
"""

from __future__ import annotations

from strom_api.v1 import common_pb2


class StromError(Exception):
    def __init__(self, name: str, message: str, retriable: bool = False) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message
        self.retriable = retriable


class KafkaTimeoutError(StromError):
    def __init__(self, message: str) -> None:
        super().__init__("REQUEST_TIMED_OUT", message, retriable=True)


_SASL_ERRORS = ("SASL_AUTHENTICATION_FAILED", "UNSUPPORTED_SASL_MECHANISM", "ILLEGAL_SASL_STATE")


def authentication_error_name(message: str) -> tuple[str, str]:
    """(Kafka's error name, the sentence) of an authentication failure's text: a SASL
    refusal names itself ("SASL_AUTHENTICATION_FAILED: ..."), anything else is TLS's."""
    name, colon, rest = message.partition(": ")
    if colon and name in _SASL_ERRORS:
        return name, rest
    return "SSL_AUTHENTICATION_FAILED", message


class AuthenticationError(StromError):
    """The connection could not be authenticated (a TLS handshake or a SASL exchange that
    failed): not retried, as Kafka's clients raise SslAuthenticationException /
    SaslAuthenticationException at once."""

    def __init__(self, message: str) -> None:
        super().__init__(*authentication_error_name(message))


class AuthorizationError(StromError):
    """The cluster's authorizer refused the request (authorizer.class.name, ACLs): not
    retriable, as Kafka's clients raise its AuthorizationException subclasses at once."""

    def __init__(self, name: str, message: str, retriable: bool = False) -> None:
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


_BY_NAME: dict[str, type[StromError]] = {
    "TOPIC_AUTHORIZATION_FAILED": TopicAuthorizationFailedError,
    "GROUP_AUTHORIZATION_FAILED": GroupAuthorizationFailedError,
    "CLUSTER_AUTHORIZATION_FAILED": ClusterAuthorizationFailedError,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": TransactionalIdAuthorizationFailedError,
}


AUTHORIZATION_ERRORS = frozenset(_BY_NAME)


def error_for(name: str, message: str, retriable: bool = False) -> StromError:
    """The error a broker answered, as the class kafka-python raises for it (StromError
    for the rest)."""
    return _BY_NAME.get(name, StromError)(name, message, retriable)


class ClosedError(StromError):
    def __init__(self, what: str) -> None:
        super().__init__("ILLEGAL_STATE", f"{what} is closed.")


def error_name(code: int) -> str:
    try:
        return common_pb2.ErrorCode.Name(code)
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def from_pb(error: common_pb2.Error) -> StromError:
    return error_for(error_name(error.code), error.message, error.retriable)
