"""Wall-clock time for the storage engine, injectable so tests can move time by hand."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Milliseconds since the Unix epoch, as Kafka's timestamps are."""
        ...


class SystemClock:
    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms

    def time_ms(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms
