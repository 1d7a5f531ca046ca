"""A node whose stop outlasts server.main.SLOW_STOP_S logs where each task waits, so a node
killed for a hung stop (make run's supervisor kills after 60 s) leaves the cause in its log."""

from __future__ import annotations

import asyncio
import logging

import pytest

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
