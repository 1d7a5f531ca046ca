"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs through the Kafka listener
(issue 20): confluent-kafka's AdminClient (librdkafka: DescribeConfigs v1 with synonyms,
IncrementalAlterConfigs v1, AlterConfigs v2), kafka-python's KafkaAdminClient and raw frames
(v4's config types and documentation); every change seen through Strom's own AdminClient
(gRPC) and the reverse, bad input answered with Kafka's codes and messages."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from strom.admin import AdminClient, NewTopic
from strom.admin import ConfigResource as StromResource
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.kafka_cluster import connect, decode_response, read_frame, request_frame

TIMEOUT = 20
TOPIC, BROKER = 2, 4  # Kafka's ConfigResource.Type ids


@pytest.fixture(scope="module")
def strom_admin(cluster):
    with AdminClient(bootstrap(cluster)) as admin:
        admin.create_topics(
            [NewTopic(n, 1, replication_factor=3) for n in ("cfg-a", "cfg-b", "cfg-c", "cfg-d")]
        )
        yield admin


@pytest.fixture(scope="module")
def confluent(cluster):
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    return ConfluentAdmin({"bootstrap.servers": cluster.kafka_bootstrap()})


def _one(futures: dict):
    (future,) = futures.values()
    return future.result(timeout=TIMEOUT)


def _error_of(futures: dict):
    from confluent_kafka import KafkaException

    (future,) = futures.values()
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT)
    return raised.value.args[0]


def _raw(cluster, body, api_key: int, node: int = 1):
    with connect(f"{cluster.host[node]}:{cluster.kafka_port[node]}") as sock:
        sock.sendall(request_frame(body, 9))
        frame = read_frame(sock)
    assert frame is not None, "the broker closed the connection"
    correlation_id, response = decode_response(frame, api_key, body.__version__)
    assert correlation_id == 9
    return response


def test_confluent_describes_a_topics_configs_with_sources_and_synonyms(
    cluster, confluent, strom_admin
):
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    strom_admin.incremental_alter_configs(
        StromResource("topic", "cfg-a"), set_={"retention.ms": "3600000"}
    )
    configs = _one(confluent.describe_configs([ConfigResource(ResourceType.TOPIC, "cfg-a")]))
    retention = configs["retention.ms"]
    assert retention.value == "3600000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert "retention.ms" in retention.synonyms  # its own value first, then the broker's
    segment = configs["segment.bytes"]
    assert (segment.value, segment.source) == ("1073741824", ConfigSource.DEFAULT_CONFIG.value)
    assert set(configs) == set(strom_admin.describe_configs(StromResource("topic", "cfg-a")))


def test_confluent_incremental_alter_is_seen_through_grpc(cluster, confluent, strom_admin):
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    def alter(*entries, validate_only=False):
        resource = ConfigResource(ResourceType.TOPIC, "cfg-b", incremental_configs=list(entries))
        return confluent.incremental_alter_configs(
            [resource], validate_only=validate_only, request_timeout=TIMEOUT
        )

    set_retention = ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
    _one(alter(set_retention, validate_only=True))
    assert "retention.ms" not in _dynamic(strom_admin, "cfg-b")
    compact = ConfigEntry(
        "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
    )
    _one(alter(set_retention, compact))
    assert _dynamic(strom_admin, "cfg-b") == {
        "retention.ms": "1000",
        "cleanup.policy": "delete,compact",
    }
    _one(alter(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)))
    assert _dynamic(strom_admin, "cfg-b") == {"cleanup.policy": "delete,compact"}

    from confluent_kafka import KafkaError

    bad = _error_of(
        alter(ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET))
    )
    assert bad.code() == KafkaError.INVALID_CONFIG and "retention.ms" in bad.str()


def _dynamic(strom_admin, topic: str) -> dict[str, str]:
    (described,) = strom_admin.describe_topics([topic])
    return dict(described.configs)


def test_confluent_alter_configs_replaces_every_config(cluster, confluent, strom_admin):
    from confluent_kafka.admin import ConfigResource, ResourceType

    strom_admin.incremental_alter_configs(
        StromResource("topic", "cfg-c"), set_={"retention.ms": "5000", "segment.ms": "60000"}
    )
    resource = ConfigResource(ResourceType.TOPIC, "cfg-c", set_config={"retention.bytes": "4096"})
    _one(confluent.alter_configs([resource], request_timeout=TIMEOUT))
    assert _dynamic(strom_admin, "cfg-c") == {"retention.bytes": "4096"}


def test_unknown_topics_and_bad_configs_get_kafkas_errors(cluster, confluent):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import ConfigResource, ResourceType

    missing = _error_of(confluent.describe_configs([ConfigResource(ResourceType.TOPIC, "no-such")]))
    assert missing.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert missing.str() == "The topic 'no-such' does not exist."
    unknown_broker_key = ConfigResource(ResourceType.BROKER, "1", set_config={"no.such.key": "1"})
    refused = _error_of(confluent.alter_configs([unknown_broker_key], request_timeout=TIMEOUT))
    assert refused.code() == KafkaError.INVALID_CONFIG
    assert refused.str() == "Unknown broker config 'no.such.key'"


def test_confluent_describes_a_brokers_configs(cluster, confluent):
    from confluent_kafka.admin import ConfigResource, ResourceType

    configs = _one(confluent.describe_configs([ConfigResource(ResourceType.BROKER, "1")]))
    assert configs["num.partitions"].is_read_only
    assert not configs["log.retention.ms"].is_read_only


def test_kafka_python_alters_and_describes(cluster, strom_admin):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(), request_timeout_ms=TIMEOUT * 1000
    )
    try:
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "cfg-d", configs={"retention.ms": "7000"})],
            incremental=True,
        )
        assert _dynamic(strom_admin, "cfg-d") == {"retention.ms": "7000"}
        response = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "cfg-d")], include_synonyms=True
        )
        # kafka-python's default config_filter="modified": the dynamic ones only
        (retention,) = response["topic"]["cfg-d"].values()
        assert (retention["value"], retention["config_source"]) == ("7000", "DYNAMIC_TOPIC_CONFIG")
        assert retention["config_type"] == "LONG"
        assert retention["synonyms"][0] == {
            "name": "retention.ms",
            "value": "7000",
            "source": "DYNAMIC_TOPIC_CONFIG",
        }
        # AlterConfigs (not incremental) replaces the topic's configs: kafka-python first
        # describes them and sends the other dynamic ones along, so retention.ms stays
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "cfg-d", configs={"segment.ms": "90000"})],
            incremental=False,
        )
        assert _dynamic(strom_admin, "cfg-d") == {"retention.ms": "7000", "segment.ms": "90000"}
    finally:
        admin.close()


def test_describe_configs_v4_types_documentation_and_keys(cluster, strom_admin):
    request_type = load_request_schema(32, 4)
    module = __import__(request_type.__module__, fromlist=["DescribeConfigsResource"])

    def describe(include_documentation: bool, keys):
        request = request_type(
            resources=(
                module.DescribeConfigsResource(
                    resource_type=i8(TOPIC), resource_name="cfg-a", configuration_keys=keys
                ),
                module.DescribeConfigsResource(
                    resource_type=i8(TOPIC), resource_name="no-such", configuration_keys=None
                ),
            ),
            include_synonyms=False,
            include_documentation=include_documentation,
        )
        return _raw(cluster, request, 32).results

    found, missing = describe(True, ("retention.ms", "cleanup.policy", "no.such.key"))
    assert found.error_code == ErrorCode.none
    entries = {c.name: c for c in found.configs}
    assert set(entries) == {"retention.ms", "cleanup.policy"}
    assert (entries["retention.ms"].config_type, entries["cleanup.policy"].config_type) == (5, 7)
    assert entries["retention.ms"].documentation.startswith("The maximum time a log is retained")
    assert entries["retention.ms"].synonyms == ()
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    (undocumented, _) = describe(False, None)
    assert all(c.documentation is None for c in undocumented.configs)
    assert len(undocumented.configs) > 10


def test_api_versions_advertises_the_config_apis_over_docs_ranges(cluster):
    """docs/kafka_protocol.md, "Strom serves": DescribeConfigs 1-4, AlterConfigs 1-2,
    IncrementalAlterConfigs 1."""
    request = load_request_schema(18, 3)(client_software_name="t", client_software_version="1")
    ranges = {
        k.api_key: (k.min_version, k.max_version) for k in _raw(cluster, request, 18).api_keys
    }
    assert (ranges[32], ranges[33], ranges[44]) == ((1, 4), (1, 2), (1, 1))
