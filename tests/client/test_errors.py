"""strom/errors.py, the client's one error family: names are ErrorCode members (or the
client's own ClientErrorName), which user code may still treat as the plain strings
kafka-python users compare; the class follows the name; a wire code the contract does not
know is Kafka's UNKNOWN_SERVER_ERROR."""

from __future__ import annotations

import pytest

from strom.errors import (
    AuthenticationError,
    ClientErrorName,
    ClosedError,
    KafkaTimeoutError,
    StromError,
    TopicAuthorizationFailedError,
    error_for,
    error_name,
    from_pb,
)
from strom_api.error_codes import ErrorCode
from strom_api.v1 import common_pb2


def test_an_answered_error_is_named_by_member_and_still_reads_as_its_string():
    error = from_pb(common_pb2.Error(code=common_pb2.NOT_LEADER_OR_FOLLOWER, message="moved"))
    assert error.name is ErrorCode.NOT_LEADER_OR_FOLLOWER
    # What user code written against names keeps doing.
    assert error.name == "NOT_LEADER_OR_FOLLOWER"
    assert error.name in {"NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE"}
    assert {"NOT_LEADER_OR_FOLLOWER": "retry"}[error.name] == "retry"
    assert str(error) == "NOT_LEADER_OR_FOLLOWER: moved"
    assert f"{error.name}" == "NOT_LEADER_OR_FOLLOWER"


def test_the_class_follows_the_name_whether_given_as_member_or_string():
    refused = from_pb(common_pb2.Error(code=common_pb2.TOPIC_AUTHORIZATION_FAILED, message="no"))
    assert type(refused) is TopicAuthorizationFailedError
    assert not refused.retriable
    assert type(error_for("TOPIC_AUTHORIZATION_FAILED", "no")) is TopicAuthorizationFailedError
    assert type(error_for(ErrorCode.NOT_COORDINATOR, "moved", True)) is StromError


def test_a_name_given_as_a_string_becomes_its_member_and_an_unknown_one_is_refused():
    error = StromError("MESSAGE_TOO_LARGE", "too big")
    assert error.name is ErrorCode.MESSAGE_TOO_LARGE
    assert StromError("ILLEGAL_STATE", "closed").name is ClientErrorName.ILLEGAL_STATE
    with pytest.raises(ValueError, match="NOT_A_KAFKA_ERROR"):
        StromError("NOT_A_KAFKA_ERROR", "?")


def test_a_wire_code_the_contract_does_not_know_is_unknown_server_error():
    assert error_name(12345) is ErrorCode.UNKNOWN_SERVER_ERROR
    error = from_pb(common_pb2.Error(code=12345, message="new in a later broker"))
    assert error.name is ErrorCode.UNKNOWN_SERVER_ERROR
    assert error.message == "unexpected error code 12345: new in a later broker"


def test_the_client_s_own_names_are_no_kafka_error_code():
    # Kafka has no code for these, so they stay out of common.proto; one that gained a code
    # would move to ErrorCode.
    assert not set(ClientErrorName) & set(ErrorCode)
    assert ClosedError("the producer").name is ClientErrorName.ILLEGAL_STATE
    assert ClosedError("the producer").name == "ILLEGAL_STATE"


def test_authentication_failures_name_sasl_s_code_or_tls_s():
    sasl = AuthenticationError("SASL_AUTHENTICATION_FAILED: bad password")
    assert sasl.name is ErrorCode.SASL_AUTHENTICATION_FAILED
    assert sasl.message == "bad password"
    tls = AuthenticationError("SSL handshake failed")
    assert tls.name is ClientErrorName.SSL_AUTHENTICATION_FAILED
    assert tls.message == "SSL handshake failed"


def test_a_timeout_is_request_timed_out_and_retriable():
    timeout = KafkaTimeoutError("late")
    assert timeout.name is ErrorCode.REQUEST_TIMED_OUT
    assert timeout.retriable
