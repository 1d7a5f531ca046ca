"""ReplicaServicer.Fetch (server/replica_service.py) reading its stream one message ahead, over
a real ReplicaManager and partition: a hurry read while a fetch waits answers that fetch at
once; a hurry with no fetch waiting is ignored and never answered; a malformed message read
ahead ends the call from the call's own task."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from broker.replica_wire import HURRY, request_pb
from server.replica_service import ReplicaServicer
from strom_api.v1 import replica_pb2
from tests.broker.test_replica_manager_waits import follower_fetch, leading


async def messages(*steps: Any) -> AsyncIterator[Any]:
    """The follower's side of the stream: messages, and pauses (seconds) between them."""
    for step in steps:
        if isinstance(step, float):
            await asyncio.sleep(step)
        else:
            yield step


async def answers(servicer: ReplicaServicer, requests: AsyncIterator[Any]) -> list[Any]:
    out = []
    async for answer in servicer.Fetch(requests, None):
        out.append(replica_pb2.ReplicaFetchResponse.FromString(answer))
    return out


def test_a_hurry_ends_the_long_poll_of_the_fetch_out_and_one_alone_is_ignored(tmp_path):
    manager, _ = leading(tmp_path, [1])
    servicer = ReplicaServicer(manager)
    parked = request_pb(follower_fetch(0, 60_000))

    async def scenario() -> None:
        start = time.monotonic()
        got = await asyncio.wait_for(
            answers(servicer, messages(HURRY, parked, 0.05, HURRY, 0.05, HURRY)), 5
        )
        assert len(got) == 1, "a hurry was answered"
        assert [p.partition for p in got[0].partitions] == [0]
        assert time.monotonic() - start < 5
        await manager.stop()

    asyncio.run(scenario())


class Refused(Exception):
    pass


def test_what_stops_the_reading_ahead_ends_the_call_while_a_fetch_waits(tmp_path):
    manager, _ = leading(tmp_path, [1])
    servicer = ReplicaServicer(manager)

    async def refusing() -> AsyncIterator[Any]:
        yield request_pb(follower_fetch(0, 60_000))
        await asyncio.sleep(0.05)
        raise Refused("a malformed message")  # as server/rpc_guard's _checked raises

    async def scenario() -> None:
        with pytest.raises(Refused):
            await asyncio.wait_for(answers(servicer, refusing()), 5)
        await asyncio.sleep(0)
        assert manager.purgatory.parked() == [], "the fetch of the ended call stayed parked"
        await manager.stop()

    asyncio.run(scenario())
