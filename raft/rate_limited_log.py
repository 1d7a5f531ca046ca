"""A log that says each cause at most once per interval, then how many it held back.

Anyone can send a node thousands of bad messages a second; a line (let alone a traceback)
for each would fill the disk (98,000 fuzzed requests once grew a node's log from 61 KB to
15.6 MB). Used by the Raft driver and transport for refused messages and by the broker's
request guard (server/rpc_guard.py). It lives here, in the lowest layer that logs, so both
share it. Causes are remembered up to `max_causes`; past that, new causes share one line
per interval (a flood of made-up sender ids is one line, not one each).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable

INTERVAL_S = 60.0
MAX_CAUSES = 1024
OTHERS = ("others",)  # the cause new ones share once max_causes are remembered


class RateLimitedLog:
    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        max_causes: int = MAX_CAUSES,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self.max_causes = max_causes
        self._last: dict[Hashable, float] = {}  # cause -> when its last line was logged
        self._held: dict[Hashable, int] = {}  # cause -> lines held back since

    def allow(self, cause: Hashable) -> tuple[bool, int]:
        """(log it now?, how many of this cause were held back before it)."""
        now = self.clock()
        cause = self._slot(cause, now)
        last = self._last.get(cause)
        if last is not None and now - last < self.interval_s:
            self._held[cause] = self._held.get(cause, 0) + 1
            return False, 0
        self._last[cause] = now
        return True, self._held.pop(cause, 0)

    def log(
        self, cause: Hashable, level: int, message: str, *args: object, exc_info: object = None
    ) -> None:
        allowed, held = self.allow(cause)
        if not allowed:
            return
        if held:
            message += f" ({held} more like it in the last {self.interval_s:g} s not logged)"
        self.logger.log(level, message, *args, exc_info=exc_info)  # type: ignore[arg-type]

    def _slot(self, cause: Hashable, now: float) -> Hashable:
        if cause in self._last or len(self._last) < self.max_causes:
            return cause
        for old, when in list(self._last.items()):  # forget causes quiet for an interval
            if now - when >= self.interval_s:
                del self._last[old]
                self._held.pop(old, None)
        return cause if len(self._last) < self.max_causes else OTHERS
