"""Per-log configuration with Kafka's topic-level names, defaults and validation.

`LogConfig.from_properties({"segment.bytes": "1048576"})` takes topic names;
`broker_defaults({"log.segment.bytes": …})` maps the broker-wide `log.*` names onto them, as
Kafka's `log.retention.ms` is the default of the topic's `retention.ms`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from storage.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_message_bytes: int = 1024 * 1024 + 12
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def max_index_entries(self) -> int:
        return self.segment_index_bytes // 8  # offset index entries are 8 bytes

    @property
    def max_time_index_entries(self) -> int:
        return self.segment_index_bytes // 12  # time index entries are 12 bytes

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Applies topic-level configs over `base` (defaults if None); unknown names and bad
        values raise InvalidConfigError naming them."""
        changes: dict[str, Any] = {}
        for name, raw in props.items():
            spec = _SPECS.get(name)
            if spec is None:
                raise InvalidConfigError(f"unknown topic config '{name}'")
            attr, parse, check, rule = spec
            try:
                value = parse(raw)
            except (TypeError, ValueError):
                raise InvalidConfigError(
                    f"invalid value '{raw}' for config '{name}': expected {rule}"
                ) from None
            if not check(value):
                raise InvalidConfigError(
                    f"invalid value '{raw}' for config '{name}': expected {rule}"
                )
            changes[attr] = value
        return replace(base or cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        by_attr = {spec[0]: name for name, spec in _SPECS.items()}
        return {by_attr[f.name]: str(getattr(self, f.name)) for f in fields(self)}


def _int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError(raw)
    return int(raw)


def _policy(raw: Any) -> str:
    parts = sorted(p.strip() for p in str(raw).split(",") if p.strip())
    if (
        not parts
        or any(p not in ("compact", "delete") for p in parts)
        or len(set(parts)) != len(parts)
    ):
        raise ValueError(raw)
    return ",".join(parts)


_SPECS: dict[str, tuple[str, Any, Any, str]] = {
    "segment.bytes": (
        "segment_bytes",
        _int,
        lambda v: 14 <= v <= INT_MAX,
        "an int in [14, 2^31-1]",
    ),
    "segment.ms": ("segment_ms", _int, lambda v: v >= 1, "a long >= 1"),
    "segment.index.bytes": (
        "segment_index_bytes",
        _int,
        lambda v: 8 <= v <= INT_MAX,
        "an int in [8, 2^31-1]",
    ),
    "index.interval.bytes": (
        "index_interval_bytes",
        _int,
        lambda v: 0 <= v <= INT_MAX,
        "an int >= 0",
    ),
    "retention.ms": ("retention_ms", _int, lambda v: v >= -1, "a long >= -1"),
    "retention.bytes": ("retention_bytes", _int, lambda v: v >= -1, "a long >= -1"),
    "cleanup.policy": ("cleanup_policy", _policy, lambda v: True, "delete, compact or both"),
    "delete.retention.ms": ("delete_retention_ms", _int, lambda v: v >= 0, "a long >= 0"),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _int, lambda v: v >= 0, "a long >= 0"),
    "max.message.bytes": ("max_message_bytes", _int, lambda v: 0 <= v <= INT_MAX, "an int >= 0"),
    "flush.messages": ("flush_messages", _int, lambda v: v >= 1, "a long >= 1"),
    "flush.ms": ("flush_ms", _int, lambda v: v >= 0, "a long >= 0"),
}

# Broker-wide names whose value is the default of a topic config (Kafka's LogConfig synonyms).
BROKER_SYNONYMS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "message.max.bytes": "max.message.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
}


# Broker-wide times Kafka also takes in coarser units; the finest one set wins.
UNIT_SYNONYMS = {
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
}


def broker_defaults(props: Mapping[str, Any]) -> LogConfig:
    """The topic defaults a broker's `log.*` settings imply; other keys are ignored here."""
    topic = {BROKER_SYNONYMS[k]: v for k, v in props.items() if k in BROKER_SYNONYMS}
    for name, forms in UNIT_SYNONYMS.items():
        for key, factor in forms:
            if key in props:
                try:
                    value = _int(props[key])
                except (TypeError, ValueError):
                    raise InvalidConfigError(
                        f"invalid value '{props[key]}' for config '{key}': expected a long"
                    ) from None
                topic[name] = -1 if value < 0 else value * factor  # negative: unlimited
                break
    return LogConfig.from_properties(topic)
