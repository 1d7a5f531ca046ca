"""A node whose stop outlasts server.main.SLOW_STOP_S logs where each task waits, so a node
killed for a hung stop (make run's supervisor kills after 60 s) leaves the cause in its log."""

from __future__ import annotations

import asyncio
import logging

import pytest
from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from server import main


async def _waits_for_the_controller_forever(never: asyncio.Event) -> None:
    await never.wait()


def test_a_slow_stop_logs_the_stack_of_every_waiting_task(monkeypatch, caplog):
    monkeypatch.setattr(main, "SLOW_STOP_S", 0.01)

    async def scenario() -> None:
        never = asyncio.Event()
        stuck = asyncio.create_task(_waits_for_the_controller_forever(never))
        await main._report_slow_stop(logging.getLogger("strom.server"))
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck

    with caplog.at_level(logging.WARNING, logger="strom.server"):
        asyncio.run(scenario())
    assert "still stopping after 0.01 s" in caplog.text
    assert "_waits_for_the_controller_forever" in caplog.text


class _StuckService(health.HealthServicer):
    """A servicer whose Watch waits for ever: its task is grpc.aio's Cython coroutine."""

    def __init__(self, entered: asyncio.Event) -> None:
        super().__init__()
        self.entered = entered

    async def Watch(self, request, context):  # noqa: N802
        self.entered.set()
        await _waits_in_a_grpc_handler_forever(asyncio.Event())
        yield None


async def _waits_in_a_grpc_handler_forever(never: asyncio.Event) -> None:
    await never.wait()


def test_the_report_goes_through_grpc_tasks_to_the_handler_inside(monkeypatch, caplog):
    # Task.print_stack raises TypeError on grpc.aio's tasks; the report must still be logged,
    # and name the servicer's own coroutine that the RPC task awaits.
    monkeypatch.setattr(main, "SLOW_STOP_S", 0.01)

    async def scenario() -> None:
        entered = asyncio.Event()
        server = aio.server()
        health_pb2_grpc.add_HealthServicer_to_server(_StuckService(entered), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        channel = aio.insecure_channel(f"127.0.0.1:{port}")
        call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        await asyncio.wait_for(entered.wait(), 10)
        try:
            await main._report_slow_stop(logging.getLogger("strom.server"))
        finally:
            call.cancel()
            await channel.close()
            await server.stop(0)

    with caplog.at_level(logging.WARNING, logger="strom.server"):
        asyncio.run(scenario())
    assert "still stopping after 0.01 s" in caplog.text
    assert "_waits_in_a_grpc_handler_forever" in caplog.text
    assert "Watch" in caplog.text
