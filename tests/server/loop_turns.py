"""How many turns other tasks got while an awaitable ran: the tests of work done in slices
(server/loop_slices.py) check that the loop ran others meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from server.request_session import Session, enter, leave

T = TypeVar("T")


async def others_ran(work: Awaitable[T]) -> tuple[T, int]:
    """`work`'s result, and the turns a task waiting on the same loop got meanwhile."""
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    started = turns
    try:
        result = await work
    finally:
        task.cancel()
    return result, turns - started


async def others_ran_as(session: Session, work: Awaitable[T]) -> tuple[T, int]:
    """others_ran(work) with `session` as the request's caller (server/request_session.py)."""
    token = enter(session)
    try:
        return await others_ran(work)
    finally:
        leave(token)
