"""Logs refused Raft messages at most once per sender per minute.

A forged or broken peer can send thousands of messages a second; the node logs one line per
sender per interval (with how many more it refused meanwhile), never a traceback, and the
counters in the driver's stats count every one. Used by the driver and the transport (the
core only returns why it refused a message: it does no I/O).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

INTERVAL_S = 60.0
# Senders remembered at once: a flood of made-up ids shares one line per interval beyond it.
MAX_SENDERS = 1024
_OTHERS = -1


class RefusalLog:
    def __init__(
        self,
        log: logging.Logger,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[int, float] = {}  # sender -> when its last line was logged
        self._suppressed: dict[int, int] = {}

    def refused(self, src: int, reason: str) -> None:
        now = self.clock()
        key = self._key(src, now)
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._last[key] = now
        more = self._suppressed.pop(key, 0)
        since = f" ({more} more refused in the last minute)" if more else ""
        self.log.warning("Refused a Raft message from node %d: %s%s", src, reason, since)

    def _key(self, src: int, now: float) -> int:
        if src in self._last or len(self._last) < MAX_SENDERS:
            return src
        for sender, when in list(self._last.items()):
            if now - when >= self.interval_s:
                del self._last[sender]
                self._suppressed.pop(sender, None)
        return src if len(self._last) < MAX_SENDERS else _OTHERS
