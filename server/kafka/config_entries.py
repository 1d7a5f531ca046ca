"""Config entries at the Kafka edge: the controller's ConfigSource names (the
DescribeConfigsResponse.Entry `source` string) to Kafka's wire ids. Sans-I/O."""

from __future__ import annotations

# Kafka's DescribeConfigsResponse.ConfigSource ids (CreateTopics v5+ uses the same).
_SOURCE_IDS = {
    "DYNAMIC_TOPIC_CONFIG": 1,
    "DYNAMIC_BROKER_CONFIG": 2,
    "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
    "STATIC_BROKER_CONFIG": 4,
    "DEFAULT_CONFIG": 5,
    "DYNAMIC_BROKER_LOGGER_CONFIG": 6,
    "CLIENT_METRICS_CONFIG": 7,
    "GROUP_CONFIG": 8,
}
UNKNOWN_SOURCE = 0


def source_id(name: str) -> int:
    """Kafka's id of a ConfigSource name (UNKNOWN, 0, for one Kafka does not have)."""
    return _SOURCE_IDS.get(name, UNKNOWN_SOURCE)


# Kafka's DescribeConfigsResponse.ConfigType ids (v3+), by ConfigDef.Type name.
_TYPE_IDS = {
    "BOOLEAN": 1,
    "STRING": 2,
    "INT": 3,
    "SHORT": 4,
    "LONG": 5,
    "DOUBLE": 6,
    "LIST": 7,
    "CLASS": 8,
    "PASSWORD": 9,
}
UNKNOWN_TYPE = 0


def type_id(name: str | None) -> int:
    """Kafka's id of a ConfigDef.Type name (None: UNKNOWN, 0)."""
    return UNKNOWN_TYPE if name is None else _TYPE_IDS.get(name, UNKNOWN_TYPE)
