"""Which broker addresses a client may try now, and when a failed connection is worth a
warning (Kafka's ClusterConnectionStates and NetworkClient's connection warning).

No I/O and no clock of its own: callers pass `now` (time.monotonic()) and say what happened.
Not thread-safe: one client's event loop owns an instance.

Reconnect backoff as Kafka's clients: after the n-th failure in a row an address is not
tried again for `reconnect.backoff.ms * 2**(n-1)`, capped at `reconnect.backoff.max.ms`,
each wait spread by +-20% jitter so that many clients do not retry in step. A success
resets the address.

Warnings, once per cause: the first failure of an outage of an address is a warning
("Connection to node -1 (host:port) could not be established. Broker may not be
available."), as Kafka's NetworkClient words it; the failures that follow while the address
stays down only lengthen its backoff. Kafka warns on every attempt (about once a second at
the default cap); a client that prints the same line 60 times a minute buries the one line
that matters, so Strom warns again only after the address answered once in between.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

JITTER = 0.2  # Kafka's CommonClientConfigs.RECONNECT_BACKOFF_JITTER


@dataclass(slots=True)
class _AddressState:
    failures: int = 0  # in a row, since the last success
    retry_at: float = 0.0  # not tried before this (monotonic seconds)


class ConnectionStates:
    def __init__(
        self,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if reconnect_backoff_ms < 0 or reconnect_backoff_max_ms < 0:
            raise ValueError("reconnect.backoff.ms and reconnect.backoff.max.ms must be >= 0")
        self.initial_s = reconnect_backoff_ms / 1000
        # Kafka: a max below the initial backoff is raised to it.
        self.max_s = max(reconnect_backoff_max_ms, reconnect_backoff_ms) / 1000
        self._jitter = jitter  # uniform in [0, 1)
        self._states: dict[str, _AddressState] = {}
        self.attempts_refused = 0  # failures recorded, for tests and stats

    def can_connect(self, address: str, now: float) -> bool:
        state = self._states.get(address)
        return state is None or now >= state.retry_at

    def retry_at(self, address: str) -> float:
        """When `address` may be tried again (0.0: at once)."""
        state = self._states.get(address)
        return 0.0 if state is None else state.retry_at

    def failures(self, address: str) -> int:
        state = self._states.get(address)
        return 0 if state is None else state.failures

    def backoff_s(self, failures: int) -> float:
        """The wait after the `failures`-th failure in a row, before jitter."""
        if failures <= 0 or self.initial_s == 0:
            return 0.0
        return min(self.initial_s * 2.0 ** min(failures - 1, 62), self.max_s)

    def failed(self, address: str, now: float) -> bool:
        """Records a failed connection; True when it starts an outage (warn about it)."""
        state = self._states.setdefault(address, _AddressState())
        state.failures += 1
        self.attempts_refused += 1
        spread = 1 + JITTER * (2 * self._jitter() - 1)
        state.retry_at = now + self.backoff_s(state.failures) * spread
        return state.failures == 1

    def succeeded(self, address: str) -> None:
        self._states.pop(address, None)


def connection_warning(node_id: int, address: str) -> str:
    """Kafka's NetworkClient warning for a connection that could not be set up."""
    return (
        f"Connection to node {node_id} ({address}) could not be established. "
        "Broker may not be available."
    )
