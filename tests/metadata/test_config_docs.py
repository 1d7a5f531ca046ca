"""Every config DescribeConfigs shows has Kafka's type (v3+'s config_type) and a sentence of
documentation: a config added to config_control without one fails here."""

from __future__ import annotations

from metadata.config_control import (
    _TOPIC_DEFAULTS,
    DYNAMIC_BROKER_CONFIGS,
    STATIC_BROKER_CONFIGS,
)
from metadata.config_docs import BROKER_CONFIGS, TOPIC_CONFIGS

KAFKA_TYPES = {"BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD"}


def test_every_described_config_has_a_type_and_documentation():
    assert set(TOPIC_CONFIGS) == set(_TOPIC_DEFAULTS)
    assert set(BROKER_CONFIGS) == set(DYNAMIC_BROKER_CONFIGS) | set(STATIC_BROKER_CONFIGS)
    for doc in [*TOPIC_CONFIGS.values(), *BROKER_CONFIGS.values()]:
        assert doc.type in KAFKA_TYPES and doc.documentation.endswith(".")


def test_a_broker_synonym_has_its_topic_configs_type():
    assert BROKER_CONFIGS["log.retention.ms"].type == TOPIC_CONFIGS["retention.ms"].type == "LONG"
    assert BROKER_CONFIGS["log.cleanup.policy"].type == "LIST"
    assert "retention.ms" in BROKER_CONFIGS["log.retention.ms"].documentation
