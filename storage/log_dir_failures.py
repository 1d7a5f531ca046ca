"""Which log directories of a node have failed (Kafka's LogDirFailureChannel). Thread-safe.

The first OSError in any file of a log directory (a segment, an index, a checkpoint, a
producer snapshot) takes the whole directory offline: a disk that failed one write cannot
be trusted with the next, and a half-applied operation must never be answered as done.
From then on every log in it refuses work with KAFKA_STORAGE_ERROR, and the broker learns
of the failure once, through the listeners (it stops serving the directory's partitions, or
halts when no directory is left, as Kafka's broker does). A directory comes back only when
the broker restarts and recovers it.

Logs report from the event loop and from worker threads (checkpoints, compaction), hence
the lock; listeners are called on the reporting thread, outside the lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

Listener = Callable[[str, str], None]  # (log dir, why)


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}  # log dir -> the first error seen there
        self.listeners: list[Listener] = []

    def is_offline(self, log_dir: str) -> bool:
        return log_dir in self._offline

    @property
    def offline_dirs(self) -> dict[str, str]:
        with self._lock:
            return dict(self._offline)

    def mark_offline(self, log_dir: str, why: str) -> bool:
        """Takes `log_dir` offline; returns whether this call did (listeners hear of each
        directory once, however many logs in it fail at the same time)."""
        log_dir = os.path.abspath(log_dir)
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = why
        for listener in list(self.listeners):
            listener(log_dir, why)
        return True
