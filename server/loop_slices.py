"""Work on a request's items in slices, letting the event loop run between them.

A request may name hundreds of thousands of partitions within the message size limit (the
fuzzer's DeleteRecords of seed 16, case 324: 248,300 partitions of 9,932 topics, about 2 s
of Python on the loop). Raft, heartbeats, health and every other request share the node's
one event loop, so per-item work yields to them every SLICE items (a few milliseconds)."""

from __future__ import annotations

import asyncio

SLICE = 1000  # items handled between two turns of the event loop


class LoopSlices:
    """Counts items done; every SLICE of them, `step` lets the loop run others."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = 0

    async def step(self, items: int = 1) -> None:
        self._count += items
        if self._count >= SLICE:
            self._count = 0
            await asyncio.sleep(0)
