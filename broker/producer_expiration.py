"""Kafka's producer-id expiration task: every producer.id.expiration.check.interval.ms,
each partition forgets the idempotent producers whose last batch is older than
producer.id.expiration.ms (broker/producer_state.py says what forgetting means). Without it
a partition remembers every producer that ever wrote to it, and the broker's memory grows
with the number of producer ids it has seen."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from broker.partition import Partition

log = logging.getLogger(__name__)


def expire_producers(partitions: Iterable[Partition], now_ms: int, expiration_ms: int) -> int:
    forgotten = 0
    for partition in partitions:
        forgotten += partition.producers.remove_expired(now_ms, expiration_ms)
    return forgotten


async def run_producer_expiration(
    partitions: Callable[[], Iterable[Partition]], interval_ms: int, expiration_ms: int
) -> None:
    while True:
        await asyncio.sleep(interval_ms / 1000)
        forgotten = expire_producers(list(partitions()), int(time.time() * 1000), expiration_ms)
        if forgotten:
            log.info("Removed %d expired producer id(s) (producer.id.expiration.ms)", forgotten)
