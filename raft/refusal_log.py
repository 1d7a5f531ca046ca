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

from raft.rate_limited_log import INTERVAL_S, MAX_CAUSES, RateLimitedLog

MAX_SENDERS = MAX_CAUSES  # beyond it, a flood of made-up ids shares one line per interval


class RefusalLog:
    def __init__(
        self,
        log: logging.Logger,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = RateLimitedLog(log, interval_s, clock, MAX_SENDERS)

    def refused(self, src: int, reason: str) -> None:
        self.limit.log(src, logging.WARNING, "Refused a Raft message from node %d: %s", src, reason)
