"""The node's event-loop lag and GC pause histograms (server/loop_health.py), on a real
loop and real collections."""

from __future__ import annotations

import asyncio
import gc
import time

from prometheus_client import CollectorRegistry

from server.loop_health import LAG_INTERVAL_S, LoopHealth, freeze_loaded_code


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_a_blocked_loop_shows_as_lag_and_a_collection_as_a_pause() -> None:
    registry = CollectorRegistry()

    async def scenario() -> None:
        health = LoopHealth(registry, asyncio.get_running_loop())
        health.start()
        try:
            await asyncio.sleep(LAG_INTERVAL_S * 3)
            quick = sample(registry, "strom_event_loop_lag_seconds_count")
            assert quick >= 2, "the loop was not sampled"
            assert sample(registry, "strom_event_loop_lag_seconds_bucket", le="0.1") == quick
            time.sleep(0.3)  # a blocking call on the loop
            await asyncio.sleep(LAG_INTERVAL_S * 2)
            slow = sample(registry, "strom_event_loop_lag_seconds_count") - sample(
                registry, "strom_event_loop_lag_seconds_bucket", le="0.1"
            )
            assert slow == 1, "the 0.3 s block was not seen as one late callback"
            before = sample(registry, "strom_gc_pause_seconds_count", generation="2")
            gc.collect()
            after = sample(registry, "strom_gc_pause_seconds_count", generation="2")
            assert after == before + 1
        finally:
            health.close()
        assert health._on_gc not in gc.callbacks

    asyncio.run(scenario())


def test_the_loaded_code_is_frozen_out_of_collections_and_counted() -> None:
    registry = CollectorRegistry()
    loop = asyncio.new_event_loop()
    try:
        LoopHealth(registry, loop)
        assert sample(registry, "strom_gc_frozen_objects") == 0
        frozen = freeze_loaded_code()
        try:
            assert frozen > 10_000  # this process's modules, classes and functions at least
            # The gauge reads gc.get_freeze_count() when scraped. A frozen object whose last
            # reference goes (another test's worker thread letting go of one) leaves the
            # count, so in a full run the two differed by 2 once; a handful is allowed.
            assert abs(sample(registry, "strom_gc_frozen_objects") - frozen) <= 100
            later = [[]]  # made after the freeze: tracked, and walked by the next collection
            tracked = gc.get_objects()
            assert len(tracked) < frozen
            assert any(o is later for o in tracked)
        finally:
            gc.unfreeze()  # the rest of the test session collects as before
        assert sample(registry, "strom_gc_frozen_objects") == 0
    finally:
        loop.close()
