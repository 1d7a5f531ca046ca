"""ControllerService's admin operations on a broker's listener, forwarded to the active
controller (Kafka's KIP-590 request forwarding), so admin clients and tools need only the
brokers' addresses (--bootstrap-server), as with Kafka. Broker-to-controller operations
(registration, heartbeats, AlterPartition, producer id blocks) are not offered here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from broker.lifecycle_client import ForwardRefused
from server.controller_authorization import authorized_call
from server.request_authorization import RequestAuthorizer
from strom_api.error_codes import ErrorCode
from strom_api.v1 import controller_pb2_grpc

FORWARDED = (
    "CreateTopics",
    "DeleteTopics",
    "CreatePartitions",
    "DescribeCluster",
    "DescribeTopics",
    "DescribeQuorum",
    "ElectLeaders",
    "AlterPartitionReassignments",
    "ListPartitionReassignments",
    "IncrementalAlterConfigs",
    "DescribeConfigs",
    "CreateAcls",
    "DescribeAcls",
    "DeleteAcls",
    "AlterUserScramCredentials",
    "DescribeUserScramCredentials",
)
Forward = Callable[[str, Any, float], Awaitable[Any | None]]


def forwarding_servicer(forward: Forward, timeout_s: float = 30.0) -> Any:
    """A ControllerService servicer whose admin methods forward; the others answer
    UNIMPLEMENTED with a sentence."""

    def make(method: str) -> Callable[..., Awaitable[Any]]:
        async def handler(self: Any, request: Any, context: Any) -> Any:
            try:
                response = await forward(method, request, timeout_s)
            except ForwardRefused as exc:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"the active controller refused {method}: {exc.details}",
                )
            if response is None:
                await context.abort(
                    grpc.StatusCode.UNAVAILABLE,
                    f"no active controller answered {method} within {timeout_s:g} s",
                )
            return response

        handler.__name__ = method
        return handler

    def not_here(method: str) -> Callable[..., Awaitable[Any]]:
        async def handler(self: Any, request: Any, context: Any) -> Any:
            await context.abort(
                grpc.StatusCode.UNIMPLEMENTED,
                f"{method} is a broker-to-controller RPC: brokers send it to a controller's "
                "CONTROLLER listener, not to a broker.",
            )

        handler.__name__ = method
        return handler

    methods = {name: make(name) for name in FORWARDED}
    # The servicer base class raises NotImplementedError for the rest (a traceback logged
    # per call); these answer UNIMPLEMENTED with a sentence instead.
    base = controller_pb2_grpc.ControllerServiceServicer
    for name in dir(base):
        if not name.startswith("_") and name not in methods:
            methods[name] = not_here(name)
    cls = type("ControllerForwarder", (controller_pb2_grpc.ControllerServiceServicer,), methods)
    return cls()


class NotForwarded(Exception):
    """A forwarded request brought no answer; `error_name` is what the client is told."""

    error_name = ErrorCode.REQUEST_TIMED_OUT


class NoControllerAnswered(NotForwarded):
    """No active controller answered a forwarded request in time (Kafka answers
    REQUEST_TIMED_OUT)."""


class ControllerRefused(NotForwarded):
    """The active controller refused the request itself as malformed or out of bounds
    (broker/lifecycle_client.ForwardRefused): INVALID_REQUEST, at once."""

    error_name = ErrorCode.INVALID_REQUEST


ControllerCall = Callable[[str, Any], Awaitable[Any]]


def authorized_forwarding(
    forward: Forward, authz: RequestAuthorizer, timeout_s: float = 30.0
) -> ControllerCall:
    """An admin request of a front end other than gRPC (the Kafka listener) on the very path
    of the gRPC forwarder above: the caller's principal (the request's Session) authorized
    as authorizing(forwarding_servicer(...)) does it, then forwarded to the active
    controller. Raises NoControllerAnswered where the gRPC forwarder answers UNAVAILABLE,
    ControllerRefused where it answers INVALID_ARGUMENT."""

    async def call(method: str, request: Any) -> Any:
        async def serve(allowed: Any) -> Any:
            try:
                response = await forward(method, allowed, timeout_s)
            except ForwardRefused as exc:
                raise ControllerRefused(
                    f"the active controller refused {method}: {exc.details}"
                ) from None
            if response is None:
                raise NoControllerAnswered(
                    f"no active controller answered {method} within {timeout_s:g} s"
                )
            return response

        return await authorized_call(authz, method, request, serve, on_controller=False)

    return call
