"""Raft settings with Kafka's names (`controller.quorum.*`, `metadata.*`) and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any


class InvalidRaftConfigError(ValueError):
    """An unknown `controller.quorum.*` name or a bad value (Kafka: INVALID_CONFIG)."""


@dataclass(frozen=True, slots=True)
class RaftConfig:
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    append_linger_ms: int = 25
    # How long a leader holds a fetch that finds nothing new (long poll).
    fetch_max_wait_ms: int = 500
    fetch_max_entries: int = 1000
    # The largest FetchSnapshot chunk (Kafka sends up to 8 MiB; gRPC's default message limit
    # is 4 MiB, so 1 MiB chunks leave room).
    fetch_snapshot_max_bytes: int = 1 << 20
    # Log-prefix cleanup (Kafka's metadata.max.retention.bytes): once the metadata log is
    # larger than this, it starts at the latest snapshot. 0: at every snapshot.
    max_retention_bytes: int = 100 * 1024 * 1024

    @property
    def long_poll_ms(self) -> int:
        """How long a leader may hold a fetch: well inside the fetcher's request timeout, or
        the fetcher resends first and a re-parked fetch is never answered."""
        return min(self.fetch_max_wait_ms, self.request_timeout_ms // 2)

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that has not heard from a majority this long resigns (Kafka: 1.5x)."""
        return self.fetch_timeout_ms * 3 // 2

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> RaftConfig:
        changes = {}
        for name, raw in props.items():
            attr = _NAMES.get(name)
            if attr is None:
                raise InvalidRaftConfigError(f"unknown config '{name}'")
            try:
                value = int(raw)
            except (TypeError, ValueError):
                raise InvalidRaftConfigError(
                    f"invalid value '{raw}' for config '{name}': expected a positive integer"
                ) from None
            if value < (0 if attr in _ZERO_ALLOWED else 1):
                raise InvalidRaftConfigError(
                    f"invalid value '{raw}' for config '{name}': expected a positive integer"
                )
            changes[attr] = value
        return replace(cls(), **changes)


_NAMES = {
    "controller.quorum.election.timeout.ms": "election_timeout_ms",
    "controller.quorum.fetch.timeout.ms": "fetch_timeout_ms",
    "controller.quorum.election.backoff.max.ms": "election_backoff_max_ms",
    "controller.quorum.request.timeout.ms": "request_timeout_ms",
    "controller.quorum.append.linger.ms": "append_linger_ms",
    "metadata.max.retention.bytes": "max_retention_bytes",
}
_ZERO_ALLOWED = {"append_linger_ms", "max_retention_bytes"}
