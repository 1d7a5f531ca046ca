"""The lifecycle pump (broker/lifecycle_client.py) against a real ControllerService over gRPC
on loopback: registration, heartbeats and the controlled shutdown's end, and the rule that no
two pumps ever drive the core (a cancelled pump whose RPC answered at that instant must not
go on beside the controlled shutdown's)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest

from broker.controller_routing import ControllerRouting
from broker.lifecycle_client import ForwardRefused, LifecycleClient
from broker.lifecycle_state import BrokerState
from metadata.errors import ApiError
from server.api_errors import error_pb
from strom_api.error_codes import ErrorCode
from strom_api.v1 import controller_pb2, controller_pb2_grpc


class Controller(controller_pb2_grpc.ControllerServiceServicer):
    """Registers every broker at epoch 5, unfences it at once, and lets it go at its third
    heartbeat asking to (as if leaderships took that long to move)."""

    def __init__(self) -> None:
        self.heartbeats: list[controller_pb2.BrokerHeartbeatRequest] = []
        self.shut_down_asked = 0

    async def RegisterBroker(self, request, context):
        return controller_pb2.RegisterBrokerResponse(broker_epoch=5)

    async def BrokerHeartbeat(self, request, context):
        self.heartbeats.append(request)
        self.shut_down_asked += request.want_shut_down
        return controller_pb2.BrokerHeartbeatResponse(
            is_caught_up=True, is_fenced=False, should_shut_down=self.shut_down_asked >= 3
        )


@contextlib.asynccontextmanager
async def controller() -> AsyncIterator[tuple[Controller, str]]:
    server = grpc.aio.server()
    servicer = Controller()
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


def client_of(address: str) -> LifecycleClient:
    client = LifecycleClient(
        broker_id=1,
        cluster_id="c",
        voters={0: address},
        endpoints=[],
        rack=None,
        metadata_offset=lambda: 10,
        heartbeat_interval_ms=50,
    )
    client.ready_to_unfence = True
    return client


async def until(condition, timeout_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_registers_heartbeats_and_is_let_go():
    asyncio.run(registers_heartbeats_and_is_let_go())


async def registers_heartbeats_and_is_let_go():
    async with controller() as (servicer, address):
        client = client_of(address)
        client.start()
        await until(lambda: client.core.state is BrokerState.RUNNING)
        assert client.broker_epoch == 5
        assert await asyncio.wait_for(client.controlled_shutdown(5.0), 5.0)
        assert servicer.heartbeats[-1].want_shut_down
        await client.stop()


def test_a_cancelled_pump_whose_call_answered_does_not_run_beside_the_shutdown():
    """grpc.aio returns an answer that arrives as the awaiting task is cancelled instead of
    raising CancelledError. The pump start() began then went on over the same core as the
    controlled shutdown's: the two found each other's request in flight, one died on it, and
    the node's stop raised and never ended (seen once in CI: a SIGTERM'd node hung)."""
    asyncio.run(cancelled_pump_whose_call_answered())


async def cancelled_pump_whose_call_answered():
    async with controller() as (_servicer, address):
        client = client_of(address)
        client.start()
        await until(lambda: client.core.state is BrokerState.RUNNING)

        call = client._call
        swallowing = asyncio.Event()

        async def answers_despite_cancel(method, request):
            # As grpc.aio's unary call does when the answer races the cancel.
            if not request.want_shut_down and not swallowing.is_set():
                swallowing.set()
                answer = asyncio.ensure_future(call(method, request))
                while True:
                    try:
                        return await asyncio.shield(answer)
                    except asyncio.CancelledError:
                        continue
            return await call(method, request)

        client._call = answers_despite_cancel
        await swallowing.wait()
        assert await asyncio.wait_for(client.controlled_shutdown(5.0), 5.0)
        await asyncio.wait_for(client.stop(), 5.0)
        assert client.core.state is BrokerState.SHUTTING_DOWN


class Standby(Controller):
    """A controller that is not active: every call answered NOT_CONTROLLER naming voter 1."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def _refusal(self) -> controller_pb2.ControllerError:
        self.asked += 1
        error = ApiError(ErrorCode.NOT_CONTROLLER, "This node is not the active controller.")
        return controller_pb2.ControllerError(error=error_pb(error), active_controller_id=1)

    async def RegisterBroker(self, request, context):
        return controller_pb2.RegisterBrokerResponse(error=self._refusal())

    async def AlterPartition(self, request, context):
        return controller_pb2.AlterPartitionResponse(error=self._refusal())


class Active(Controller):
    async def AlterPartition(self, request, context):
        return controller_pb2.AlterPartitionResponse()


@contextlib.asynccontextmanager
async def serving(servicer) -> AsyncIterator[str]:
    server = grpc.aio.server()
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


def test_a_standbys_not_controller_sends_the_broker_to_the_voter_it_names():
    """The pump follows broker/controller_routing.py: the lowest voter first, a standby's
    NOT_CONTROLLER hint next; once there, later calls go straight to the active controller."""
    asyncio.run(follows_not_controller())


async def follows_not_controller():
    standby, active = Standby(), Active()
    async with serving(standby) as standby_address, serving(active) as active_address:
        client = client_of(standby_address)
        client.voters = {0: standby_address, 1: active_address}
        client.routing = ControllerRouting(client.voters)
        client.start()
        await until(lambda: client.core.state is BrokerState.RUNNING)
        assert standby.asked == 1
        assert client.routing.target == 1
        request = controller_pb2.AlterPartitionRequest()
        answer = await client.call_controller("AlterPartition", request)
        assert answer is not None and not answer.HasField("error")
        assert standby.asked == 1
        await client.stop()


class LargeAnswers(Controller):
    """Answers DescribeTopics with a 6 MB message, as a controller of a large cluster does."""

    async def DescribeTopics(self, request, context):
        topic = controller_pb2.DescribeTopicsResponse.Topic(name="t" * 60, topic_id=bytes(16))
        return controller_pb2.DescribeTopicsResponse(topics=[topic] * 75_000)


def test_a_forwarded_admin_request_takes_an_answer_larger_than_grpcs_default_limit():
    """The broker's channel to the controller takes messages up to 128 MiB: with gRPC's
    default 4 MiB, a DescribeTopics or DescribeConfigs answer of a large cluster was
    refused (RESOURCE_EXHAUSTED) and the request sent again until its deadline."""

    async def scenario() -> None:
        server = grpc.aio.server()
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(LargeAnswers(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        client = client_of(f"127.0.0.1:{port}")
        try:
            response = await client.forward(
                "DescribeTopics", controller_pb2.DescribeTopicsRequest(), timeout_s=2.0
            )
            assert response is not None, client.last_error
            assert response.ByteSize() > 4 * 1024 * 1024
            assert len(response.topics) == 75_000
        finally:
            await client.stop()
            await server.stop(0)

    asyncio.run(scenario())


class Refusing(Controller):
    """Refuses DescribeTopics as its gRPC guard refuses a malformed request."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    async def DescribeTopics(self, request, context):
        self.asked += 1
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "CORRUPT_MESSAGE: a name too long")


def test_a_forwarded_request_the_controller_refuses_is_refused_at_once_not_retried():
    """Before, the broker sent it again until the forward's deadline (30 s for clients)."""

    async def scenario() -> None:
        refusing = Refusing()
        async with serving(refusing) as address:
            client = client_of(address)
            loop = asyncio.get_running_loop()
            start = loop.time()
            with pytest.raises(ForwardRefused, match="CORRUPT_MESSAGE: a name too long"):
                await client.forward(
                    "DescribeTopics", controller_pb2.DescribeTopicsRequest(), timeout_s=10.0
                )
            assert loop.time() - start < 5 and refusing.asked == 1
            await client.stop()

    asyncio.run(scenario())


class Busy(Controller):
    """Refuses DescribeTopics twice as a full request queue does, then answers."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    async def DescribeTopics(self, request, context):
        self.asked += 1
        if self.asked <= 2:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "Concurrent RPC limit exceeded")
        return controller_pb2.DescribeTopicsResponse()


def test_a_forward_larger_than_the_controller_takes_is_refused_and_a_full_queue_retried():
    """A Kafka IncrementalAlterConfigs of 900 KB became 1.39 MB of protobuf, over the
    controller listener's socket.request.max.bytes: gRPC refused it RESOURCE_EXHAUSTED and the
    broker sent it again for 30 s (the Kafka-protocol fuzzer, seed 4 case 370). A full request
    queue's RESOURCE_EXHAUSTED is still tried again."""

    async def scenario() -> None:
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", 1000)])
        busy = Busy()
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(busy, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        client = client_of(f"127.0.0.1:{port}")
        try:
            large = controller_pb2.DescribeTopicsRequest(names=["t" * 100] * 20)
            with pytest.raises(ForwardRefused, match="larger than max"):
                await client.forward("DescribeTopics", large, timeout_s=10.0)
            assert busy.asked == 0
            small = controller_pb2.DescribeTopicsRequest(names=["t"])
            assert await client.forward("DescribeTopics", small, timeout_s=10.0) is not None
            assert busy.asked == 3
        finally:
            await client.stop()
            await server.stop(0)

    asyncio.run(scenario())
