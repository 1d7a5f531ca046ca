"""Once-per-cause reporting for errors a client keeps getting while it retries.

Kafka's producer logs every retriable produce error ("Got error produce response ... retrying
... Error: NOT_ENOUGH_REPLICAS") at WARN, once per attempt: every `retry.backoff.ms` for up to
`delivery.timeout.ms`, over a thousand identical lines per partition. Strom keeps the line and
drops the flood: per subject (a partition, a request kind) the first error of each cause is
reported, the repeats are not, and a success (or another cause) starts afresh.

No I/O; not thread-safe (one client's event loop owns an instance).
"""

from __future__ import annotations

from collections.abc import Hashable


class RepeatedErrors:
    def __init__(self) -> None:
        self._last: dict[Hashable, str] = {}

    def first_time(self, subject: Hashable, cause: str) -> bool:
        """True when `cause` is new for `subject` (report it); False for a repeat."""
        if self._last.get(subject) == cause:
            return False
        self._last[subject] = cause
        return True

    def cleared(self, subject: Hashable) -> None:
        """`subject` succeeded: its next error is reported again."""
        self._last.pop(subject, None)
