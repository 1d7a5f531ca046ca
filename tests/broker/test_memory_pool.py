"""broker/memory_pool.py: queued.max.request.bytes as Kafka's non-strict SimpleMemoryPool."""

from __future__ import annotations

import asyncio

from broker.memory_pool import UNLIMITED, MemoryPool


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_reservation_waits_while_the_pool_is_exhausted_and_gets_in_when_freed():
    async def scenario():
        pool = MemoryPool(100)
        assert await pool.reserve(60, 0)
        assert await pool.reserve(60, 0)  # non-strict: granted while anything is free
        assert pool.available == -20
        waiter = asyncio.create_task(pool.reserve(10, 5))
        await asyncio.sleep(0.05)
        assert not waiter.done() and pool.waiting == 1
        pool.release(60)
        assert await waiter
        assert pool.in_use == 70 and pool.waiting == 0

    run(scenario())


def test_a_reservation_larger_than_the_pool_runs_alone_rather_than_never():
    async def scenario():
        pool = MemoryPool(100)
        assert await pool.reserve(1000, 0)
        assert not await pool.reserve(1, 0.05)  # times out: nothing reserved
        assert pool.in_use == 1000
        pool.release(1000)
        assert pool.in_use == 0

    run(scenario())


def test_adjust_keeps_what_was_used_and_unlimited_never_waits():
    async def scenario():
        pool = MemoryPool(100)
        assert await pool.reserve(50, 0)
        pool.adjust(50, 10)
        assert pool.in_use == 10
        pool.adjust(0, 30)  # KIP-74's first batch past the limit is counted too
        assert pool.in_use == 40
        unlimited = MemoryPool(UNLIMITED)
        assert await unlimited.reserve(1 << 40, 0)

    run(scenario())
