"""Topic-level configs: Kafka's names, checked before a controller writes them.

The log's own settings (`retention.ms`, `segment.bytes`, `cleanup.policy`, ...) are
storage's LogConfig and are checked by it; the settings the replication and produce paths
read are defined here with Kafka's defaults. `validate_topic_configs` raises ApiError
INVALID_CONFIG naming the key and saying what is expected, as Kafka's AdminClient shows it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from metadata.errors import ApiError
from storage.config import LONG_MAX, LogConfig
from storage.errors import InvalidConfigError
from strom_api.error_codes import ErrorCode


def _long_at_least(low: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return low <= int(value) <= LONG_MAX
        except ValueError:
            return False

    return check


_THROTTLED = re.compile(r"^(\*|\d+:\d+(,\d+:\d+)*)?$")


def _throttled_replicas(value: str) -> bool:
    """Kafka's ThrottledReplicaListValidator: "", "*", or partition:broker pairs."""
    return _THROTTLED.match(value.replace(" ", "")) is not None


def _one_of(*choices: str) -> Callable[[str], bool]:
    return lambda value: value.strip().lower() in choices


# name -> (Kafka's default, check, what the check wants)
REPLICATION_CONFIGS: dict[str, tuple[str, Callable[[str], bool], str]] = {
    "min.insync.replicas": ("1", _long_at_least(1), "an int >= 1"),
    "unclean.leader.election.enable": ("false", _one_of("true", "false"), "true or false"),
    "compression.type": (
        "producer",
        _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        "one of uncompressed, zstd, lz4, snappy, gzip, producer",
    ),
    "message.timestamp.type": (
        "CreateTime",
        lambda v: v in ("CreateTime", "LogAppendTime"),
        "CreateTime or LogAppendTime",
    ),
    "message.timestamp.before.max.ms": (str(LONG_MAX), _long_at_least(0), "a long >= 0"),
    "message.timestamp.after.max.ms": (str(LONG_MAX), _long_at_least(0), "a long >= 0"),
    # Which replicas a reassignment's replication throttle applies to.
    "leader.replication.throttled.replicas": (
        "",
        _throttled_replicas,
        "a list of partition:broker pairs, or *",
    ),
    "follower.replication.throttled.replicas": (
        "",
        _throttled_replicas,
        "a list of partition:broker pairs, or *",
    ),
}


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """Raises ApiError(INVALID_CONFIG) for an unknown name or a bad value."""
    for_storage = {}
    for name, value in configs.items():
        spec = REPLICATION_CONFIGS.get(name)
        if spec is None:
            for_storage[name] = value
            continue
        _, check, wanted = spec
        if not check(value):
            raise ApiError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {name}: {wanted}",
            )
    try:
        LogConfig.from_properties(for_storage)
    except InvalidConfigError as exc:
        raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None
