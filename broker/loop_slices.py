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
    the slice began, `due` says so and begins the next. A hot path asks `due()` (a plain
    call, no coroutine per item) and sleeps only then; `await step()` is the short form."""

    __slots__ = ("_count", "_since")

    def __init__(self) -> None:
        self._count = 0
        self._since = time.perf_counter()

    def due(self, items: int = 1) -> bool:
        self._count += items
        now = time.perf_counter()
        if self._count >= SLICE or now - self._since >= SLICE_SECONDS:
            self._count = 0
            self._since = now
            return True
        return False

    async def step(self, items: int = 1) -> None:
        if self.due(items):
            await asyncio.sleep(0)
            self._since = time.perf_counter()  # the next slice begins when this task runs
