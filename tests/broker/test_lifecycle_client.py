"""The lifecycle pump (broker/lifecycle_client.py) against a real ControllerService over gRPC
on loopback: registration, heartbeats and the controlled shutdown's end, and the rule that no
two pumps ever drive the core (a cancelled pump whose RPC answered at that instant must not
go on beside the controlled shutdown's)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc.aio

from broker.lifecycle_client import LifecycleClient
from broker.lifecycle_state import BrokerState
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
