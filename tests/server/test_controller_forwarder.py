"""The broker's forwarding of admin requests to the active controller
(server/controller_forwarder.py), both front ends, with a forward that a controller refused
(broker/lifecycle_client.ForwardRefused) or that no controller answered: the gRPC forwarder
aborts INVALID_ARGUMENT or UNAVAILABLE, the Kafka listener's path raises what its handlers
answer INVALID_REQUEST or REQUEST_TIMED_OUT."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from kio.schema.errors import ErrorCode as KafkaErrorCode

from broker.lifecycle_client import ForwardRefused
from server.controller_forwarder import (
    ControllerRefused,
    NoControllerAnswered,
    authorized_forwarding,
    forwarding_servicer,
)
from server.kafka.controller_answers import not_forwarded
from server.request_authorization import RequestAuthorizer
from strom_api.v1 import controller_pb2


async def refused(method: str, request: Any, timeout_s: float) -> Any:
    raise ForwardRefused("CORRUPT_MESSAGE: a name too long")


async def unanswered(method: str, request: Any, timeout_s: float) -> Any:
    return None


class Aborted(Exception):
    pass


class Context:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


@pytest.mark.parametrize(
    ("forward", "code"),
    [(refused, grpc.StatusCode.INVALID_ARGUMENT), (unanswered, grpc.StatusCode.UNAVAILABLE)],
)
def test_the_grpc_forwarder_passes_a_refusal_on_and_says_when_none_answered(forward, code):
    servicer = forwarding_servicer(forward, timeout_s=1.0)
    request = controller_pb2.DescribeTopicsRequest()
    with pytest.raises(Aborted) as aborted:
        asyncio.run(servicer.DescribeTopics(request, Context()))
    assert aborted.value.args[0] == code


def test_the_kafka_listeners_forward_raises_what_its_handlers_answer():
    request = controller_pb2.DescribeTopicsRequest()
    call = authorized_forwarding(refused, RequestAuthorizer(), timeout_s=1.0)
    with pytest.raises(ControllerRefused) as refusal:
        asyncio.run(call("DescribeTopics", request))
    code, message = not_forwarded(refusal.value.error_name, str(refusal.value))
    assert code == KafkaErrorCode.invalid_request
    assert message is not None and "CORRUPT_MESSAGE: a name too long" in message
    call = authorized_forwarding(unanswered, RequestAuthorizer(), timeout_s=1.0)
    with pytest.raises(NoControllerAnswered) as none:
        asyncio.run(call("DescribeTopics", request))
    assert not_forwarded(none.value.error_name, str(none.value))[0] == (
        KafkaErrorCode.request_timed_out
    )
