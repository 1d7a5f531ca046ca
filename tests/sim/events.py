"""The simulated clock: a queue of events ordered by time.

Time only moves when the next event is taken off the queue; nothing reads a wall clock.
Events at the same millisecond run in the order they were scheduled (a sequence number breaks
ties), so a run never depends on how the heap happens to order equal keys.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

# (at_ms, seq, action, args): a plain tuple, because the heap compares these a great many
# times per run and tuple comparison is the fastest Python has; seq is unique, so the
# comparison never reaches the action.
Event = tuple[int, int, Callable[..., None], tuple[Any, ...]]


class EventQueue:
    def __init__(self) -> None:
        self.now_ms = 0
        self._heap: list[Event] = []
        self._seq = 0

    def at(self, at_ms: int, action: Callable[..., None], *args: Any) -> None:
        """Runs `action(*args)` at `at_ms` (never in the past)."""
        assert at_ms >= self.now_ms, f"event scheduled at {at_ms} ms, now is {self.now_ms} ms"
        self._seq += 1
        heapq.heappush(self._heap, (at_ms, self._seq, action, args))

    def after(self, delay_ms: int, action: Callable[..., None], *args: Any) -> None:
        self.at(self.now_ms + delay_ms, action, *args)

    def pop(self) -> Event | None:
        if not self._heap:
            return None
        event = heapq.heappop(self._heap)
        self.now_ms = event[0]
        return event

    def peek_ms(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
