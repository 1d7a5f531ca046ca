"""Slices of per-item work, the event loop let run between them (the class; the request
helpers built on it are server/loop_slices.py, whose docstring says why).

A request may name hundreds of thousands of items, and every task of a node shares its one
event loop: per-item work yields every SLICE items or SLICE_SECONDS, whichever comes
first (an item may cost a microsecond or a hundred)."""

from __future__ import annotations

import asyncio
import time

SLICE = 1000  # items handled between two turns of the event loop, at most
SLICE_SECONDS = 0.005  # and seconds


class LoopSlices:
    """Counts items done; once SLICE of them are done or SLICE_SECONDS have passed since
    the slice began, `await step()` lets the loop run others, and the next slice begins
    when this task runs again. Not due, a step costs about 90 ns more than a plain
    counter (a coroutine), against microseconds of work per item."""

    __slots__ = ("_count", "_since")

    def __init__(self) -> None:
        self._count = 0
        self._since = time.perf_counter()

    async def step(self, items: int = 1) -> None:
        self._count += items
        if self._count >= SLICE or time.perf_counter() - self._since >= SLICE_SECONDS:
            await asyncio.sleep(0)
            self._count = 0
            self._since = time.perf_counter()
