"""queued.max.request.bytes: the bytes of requests and responses a broker holds at once
(after Kafka's SimpleMemoryPool, non-strict).

Produce requests reserve their record bytes while they are appended and replicated; fetches
reserve what they may read before reading it and keep what they read until the response is
handed over (a FetchStream: until the client asks again, proof it took the last answer). A
reservation waits while the pool is exhausted; like Kafka's non-strict pool it is granted as
soon as anything is free, even if larger than what is free, so a request bigger than the
whole pool still runs alone rather than never. Before this, 20 concurrent 60 MiB produces
took a node to 877 MiB, and 45 stalled FetchStreams asking 100 MiB each killed one.

Event-loop code only (one asyncio.Event, set whenever memory is released); no I/O.
"""

from __future__ import annotations

import asyncio

UNLIMITED = -1


class MemoryPool:
    def __init__(self, capacity: int) -> None:
        """`capacity` bytes; UNLIMITED (-1) for no limit."""
        self.capacity = capacity
        self.in_use = 0
        self.waiting = 0  # reservations waiting for memory (a gauge for metrics)
        self._freed = asyncio.Event()

    @property
    def available(self) -> int:
        if self.capacity == UNLIMITED:
            return 1 << 62
        return self.capacity - self.in_use

    def try_reserve(self, size: int) -> bool:
        if size <= 0:
            return True
        if self.available <= 0:
            return False
        self.in_use += size
        return True

    async def reserve(self, size: int, timeout_s: float) -> bool:
        """Reserves `size` bytes, waiting up to `timeout_s` for any to be free; False if
        none became free in time (nothing is reserved then)."""
        if self.try_reserve(size):
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0)
        self.waiting += 1
        try:
            while self.available <= 0:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                self._freed.clear()
                try:
                    async with asyncio.timeout(remaining):
                        await self._freed.wait()
                except TimeoutError:
                    return False
        finally:
            self.waiting -= 1
        return self.try_reserve(size)

    def adjust(self, reserved: int, used: int) -> None:
        """`reserved` bytes were reserved and `used` are kept: the rest is released, or the
        excess (KIP-74's first batch past the limit) taken too."""
        reserved = max(reserved, 0)
        if used < reserved:
            self.release(reserved - used)
        else:
            self.in_use += used - reserved

    def release(self, size: int) -> None:
        if size <= 0:
            return
        self.in_use = max(self.in_use - size, 0)
        self._freed.set()
