"""LogConfig: Kafka's topic-level names and defaults, validation, and broker synonyms.

Proves the defaults are Kafka's, values parse from strings as a properties file gives them,
unknown names and bad values raise InvalidConfigError naming the key, and broker_defaults
maps the broker-wide `log.*` settings (with Kafka's precedence among the ms / minutes / hours
forms) onto the topic configs they default.
"""

from __future__ import annotations

import pytest

from storage.config import LogConfig, broker_defaults
from storage.errors import InvalidConfigError, StorageError

DAY_MS = 24 * 3600 * 1000

KAFKA_DEFAULTS = {
    "segment.bytes": 1073741824,
    "segment.ms": 7 * DAY_MS,
    "segment.index.bytes": 10485760,
    "index.interval.bytes": 4096,
    "retention.ms": 7 * DAY_MS,
    "retention.bytes": -1,
    "cleanup.policy": "delete",
    "delete.retention.ms": DAY_MS,
    "min.compaction.lag.ms": 0,
    "max.message.bytes": 1048588,
    "flush.messages": 2**63 - 1,
    "flush.ms": 2**63 - 1,
}


def test_defaults_are_kafkas():
    props = LogConfig().to_properties()
    assert props == {k: str(v) for k, v in KAFKA_DEFAULTS.items()}


def test_values_parse_from_strings_and_round_trip():
    config = LogConfig.from_properties(
        {"segment.bytes": "2048", "retention.ms": "-1", "cleanup.policy": "compact"}
    )
    assert (config.segment_bytes, config.retention_ms, config.cleanup_policy) == (
        2048,
        -1,
        "compact",
    )
    assert LogConfig.from_properties(config.to_properties()) == config


def test_from_properties_applies_over_a_base():
    base = LogConfig.from_properties({"segment.bytes": 4096})
    config = LogConfig.from_properties({"retention.bytes": 10}, base=base)
    assert (config.segment_bytes, config.retention_bytes) == (4096, 10)


@pytest.mark.parametrize(
    "raw, policy, compact, delete",
    [
        ("delete", "delete", False, True),
        ("compact", "compact", True, False),
        ("compact,delete", "compact,delete", True, True),
        ("delete, compact", "compact,delete", True, True),
    ],
)
def test_cleanup_policy(raw, policy, compact, delete):
    config = LogConfig.from_properties({"cleanup.policy": raw})
    assert (config.cleanup_policy, config.compact, config.delete) == (policy, compact, delete)


def test_unknown_key():
    with pytest.raises(InvalidConfigError, match="retention.msec"):
        LogConfig.from_properties({"retention.msec": 1})


@pytest.mark.parametrize(
    "key, value",
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", 13),  # below Kafka's minimum of 14
        ("segment.bytes", 2**31),  # an int config
        ("segment.bytes", "1.5"),
        ("segment.bytes", True),
        ("segment.ms", 0),
        ("segment.index.bytes", 2**31),
        ("index.interval.bytes", -1),
        ("retention.ms", -2),
        ("retention.bytes", -2),
        ("delete.retention.ms", -1),
        ("min.compaction.lag.ms", -1),
        ("max.message.bytes", -1),
        ("flush.messages", 0),
        ("flush.ms", -1),
        ("cleanup.policy", "destroy"),
        ("cleanup.policy", "compact,compact"),
        ("cleanup.policy", ""),
        ("cleanup.policy", "Compact"),
        ("retention.ms", None),
    ],
)
def test_bad_values_name_the_key(key, value):
    with pytest.raises(InvalidConfigError) as caught:
        LogConfig.from_properties({key: value})
    assert key in str(caught.value)
    assert isinstance(caught.value, StorageError) and caught.value.error_name == "INVALID_CONFIG"


def test_accepted_edges():
    config = LogConfig.from_properties(
        {
            "segment.bytes": 14,
            "index.interval.bytes": 0,
            "retention.ms": -1,
            "flush.messages": 1,
            "max.message.bytes": 0,
        }
    )
    assert (config.segment_bytes, config.index_interval_bytes) == (14, 0)


@pytest.mark.parametrize(
    "broker_key, attr, value",
    [
        ("log.segment.bytes", "segment_bytes", 4096),
        ("log.roll.ms", "segment_ms", 60_000),
        ("log.index.size.max.bytes", "segment_index_bytes", 4096),
        ("log.index.interval.bytes", "index_interval_bytes", 128),
        ("log.retention.ms", "retention_ms", 3_600_000),
        ("log.retention.bytes", "retention_bytes", 1 << 30),
        ("log.cleanup.policy", "cleanup_policy", "compact"),
        ("log.cleaner.delete.retention.ms", "delete_retention_ms", 1000),
        ("log.cleaner.min.compaction.lag.ms", "min_compaction_lag_ms", 5),
        ("message.max.bytes", "max_message_bytes", 2_000_000),
        ("log.flush.interval.messages", "flush_messages", 10),
        ("log.flush.interval.ms", "flush_ms", 1000),
    ],
)
def test_broker_defaults_map_log_settings(broker_key, attr, value):
    config = broker_defaults({broker_key: str(value), "node.id": "1", "listeners": "x"})
    assert getattr(config, attr) == value


def test_broker_defaults_reject_bad_values_under_the_topic_name():
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        broker_defaults({"log.retention.ms": "soon"})


@pytest.mark.parametrize(
    "props, retention_ms",
    [
        ({"log.retention.hours": "24"}, DAY_MS),
        ({"log.retention.minutes": "30"}, 30 * 60_000),
        ({"log.retention.hours": "24", "log.retention.minutes": "30"}, 30 * 60_000),
        ({"log.retention.minutes": "30", "log.retention.ms": "5"}, 5),
    ],
)
def test_broker_retention_in_hours_and_minutes(props, retention_ms):
    """Kafka's broker config has log.retention.hours (in the stock server.properties),
    log.retention.minutes and log.retention.ms; the most precise one set wins."""
    assert broker_defaults(props).retention_ms == retention_ms


def test_broker_roll_hours():
    """log.roll.hours is Kafka's broker default for segment.ms; log.roll.ms overrides it."""
    assert broker_defaults({"log.roll.hours": "1"}).segment_ms == 3_600_000
    assert broker_defaults({"log.roll.hours": "1", "log.roll.ms": "5"}).segment_ms == 5
