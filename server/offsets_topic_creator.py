"""__consumer_offsets created on first use, as Kafka's brokers create it when a group first
needs a coordinator: concurrent callers share one CreateTopics request, and once the
controller has said the topic exists nobody asks again. The broker's metadata image has the
topic a moment after; meanwhile FindCoordinator answers COORDINATOR_NOT_AVAILABLE, and a
request naming 64,285 group keys before would have sent the controller a CreateTopics per
key (the Kafka-protocol fuzzer's seed 19, case 581)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("strom.groups")


class OffsetsTopicCreator:
    def __init__(self, create: Callable[[], Awaitable[bool]]) -> None:
        """`create` asks the controller once; True when the topic exists after it."""
        self._create = create
        self._task: asyncio.Task[bool] | None = None
        self.created = False

    async def __call__(self) -> None:
        if self.created:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._ask())
        # Shielded: a caller that gives up (its request's deadline) leaves the others' ask.
        await asyncio.shield(self._task)

    async def _ask(self) -> bool:
        try:
            self.created = await self._create()
        except Exception:
            log.exception("could not create __consumer_offsets")
        return self.created
