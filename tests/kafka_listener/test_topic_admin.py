"""CreateTopics, DeleteTopics and CreatePartitions through the Kafka listener (issue 20):
confluent-kafka's AdminClient (librdkafka: CreateTopics v4, DeleteTopics v4,
CreatePartitions v2), kafka-python's KafkaAdminClient (v7, v6, v3) and raw frames for what
the clients do not show (v5+'s configs, deletion by topic id); each result seen through
Strom's own AdminClient (gRPC) and the reverse, and bad input answered with Kafka's codes
and messages."""

from __future__ import annotations

import uuid

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i32Timedelta

from strom.admin import AdminClient, NewTopic
from strom.errors import StromError
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.kafka_cluster import connect, decode_response, read_frame, request_frame
from tests.node_integration.node_cluster import wait_until

TIMEOUT = 20


@pytest.fixture(scope="module")
def strom_admin(cluster):
    with AdminClient(bootstrap(cluster)) as admin:
        yield admin


@pytest.fixture(scope="module")
def confluent(cluster):
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    return ConfluentAdmin({"bootstrap.servers": cluster.kafka_bootstrap()})


def _result(futures: dict, name: str):
    return futures[name].result(timeout=TIMEOUT)


def _error_of(future):
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT)
    return raised.value.args[0]


def _raw(cluster, body, api_key: int, node: int = 1):
    with connect(f"{cluster.host[node]}:{cluster.kafka_port[node]}") as sock:
        sock.sendall(request_frame(body, 7))
        frame = read_frame(sock)
    assert frame is not None, "the broker closed the connection"
    correlation_id, response = decode_response(frame, api_key, body.__version__)
    assert correlation_id == 7
    return response


def _strom_topic(strom_admin, name: str):
    described = strom_admin.describe_topics([name])
    return described[0]


# --- confluent-kafka ----------------------------------------------------------------------


def test_confluent_creates_a_topic_with_configs_seen_by_stroms_admin(
    cluster, confluent, strom_admin
):
    from confluent_kafka.admin import NewTopic as KafkaNewTopic

    topic = KafkaNewTopic(
        "ck-created", num_partitions=4, replication_factor=2, config={"retention.ms": "3600000"}
    )
    assert _result(confluent.create_topics([topic], request_timeout=TIMEOUT), "ck-created") is None
    described = _strom_topic(strom_admin, "ck-created")
    assert len(described.partitions) == 4
    assert {len(p.replicas) for p in described.partitions} == {2}
    assert described.configs == {"retention.ms": "3600000"}


def test_confluent_validate_only_checks_and_creates_nothing(cluster, confluent, strom_admin):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic as KafkaNewTopic

    good = KafkaNewTopic("ck-validated", num_partitions=2, replication_factor=3)
    bad = KafkaNewTopic("ck-bad-config", 1, 1, config={"cleanup.policy": "sometimes"})
    futures = confluent.create_topics([good, bad], validate_only=True, request_timeout=TIMEOUT)
    assert _result(futures, "ck-validated") is None
    assert _error_of(futures["ck-bad-config"]).code() == KafkaError.INVALID_CONFIG
    assert "ck-validated" not in strom_admin.list_topics()


def test_confluent_create_errors_carry_kafkas_codes_and_messages(cluster, confluent):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic as KafkaNewTopic

    futures = confluent.create_topics(
        [
            KafkaNewTopic("orders", 1, 1),  # made by conftest through gRPC
            KafkaNewTopic("ck-too-many-replicas", 1, 4),
            KafkaNewTopic("ck-bad-value", 1, 1, config={"retention.ms": "soon"}),
        ],
        request_timeout=TIMEOUT,
    )
    exists = _error_of(futures["orders"])
    assert exists.code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert exists.str() == "Topic 'orders' already exists."
    factor = _error_of(futures["ck-too-many-replicas"])
    assert factor.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert "only 3 broker(s) are registered" in factor.str()
    config = _error_of(futures["ck-bad-value"])
    assert config.code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in config.str()


def test_confluent_grows_and_deletes_a_topic_made_through_grpc(cluster, confluent, strom_admin):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewPartitions

    strom_admin.create_topics([NewTopic("grpc-made", 1, replication_factor=3)])
    futures = confluent.create_partitions(
        [NewPartitions("grpc-made", 3)], validate_only=True, request_timeout=TIMEOUT
    )
    assert _result(futures, "grpc-made") is None
    assert len(_strom_topic(strom_admin, "grpc-made").partitions) == 1
    futures = confluent.create_partitions([NewPartitions("grpc-made", 3)], request_timeout=TIMEOUT)
    assert _result(futures, "grpc-made") is None
    assert len(_strom_topic(strom_admin, "grpc-made").partitions) == 3
    shrink = confluent.create_partitions([NewPartitions("grpc-made", 2)], request_timeout=TIMEOUT)
    error = _error_of(shrink["grpc-made"])
    assert error.code() == KafkaError.INVALID_PARTITIONS
    assert "higher than the requested 2" in error.str()

    assert (
        _result(confluent.delete_topics(["grpc-made"], request_timeout=TIMEOUT), "grpc-made")
        is None
    )
    assert "grpc-made" not in strom_admin.list_topics()
    again = confluent.delete_topics(["grpc-made"], request_timeout=TIMEOUT)
    assert _error_of(again["grpc-made"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# --- kafka-python -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka_python(cluster):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(), request_timeout_ms=TIMEOUT * 1000
    )
    yield admin
    admin.close()


def test_kafka_python_creates_grows_and_deletes(cluster, kafka_python, strom_admin):
    from kafka.errors import TopicAlreadyExistsError

    kafka_python.create_topics(
        {
            "kp-made": {
                "num_partitions": 2,
                "replication_factor": 3,
                "configs": {"retention.bytes": "1048576"},
            }
        },
        validate_only=True,
    )
    assert "kp-made" not in strom_admin.list_topics()
    result = kafka_python.create_topics(
        {
            "kp-made": {
                "num_partitions": 2,
                "replication_factor": 3,
                "configs": {"retention.bytes": "1048576"},
            }
        }
    )
    (created,) = result["topics"]
    assert created["error_code"] == 0 and created["num_partitions"] == 2
    assert created["replication_factor"] == 3
    configs = created["configs"]  # kafka-python reads the source ids as Kafka's names
    assert configs["retention.bytes"]["value"] == "1048576"
    assert configs["retention.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    described = _strom_topic(strom_admin, "kp-made")
    assert str(uuid.UUID(bytes=_uuid_bytes(created["topic_id"]))) == _as_uuid(described.topic_id)
    assert described.configs == {"retention.bytes": "1048576"}

    with pytest.raises(TopicAlreadyExistsError):
        kafka_python.create_topics({"kp-made": {"num_partitions": 1, "replication_factor": 1}})

    new = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    kafka_python.create_partitions({"kp-made": {"count": 5, "assignments": new}})
    partitions = _strom_topic(strom_admin, "kp-made").partitions
    assert [list(p.replicas) for p in partitions[2:]] == new

    kafka_python.delete_topics(["kp-made"])
    assert "kp-made" not in strom_admin.list_topics()


def _uuid_bytes(value) -> bytes:
    return value.bytes if isinstance(value, uuid.UUID) else uuid.UUID(str(value)).bytes


def _as_uuid(kafka_uuid: str) -> str:
    """Strom's AdminClient shows Kafka's base64 Uuid; the standard form to compare."""
    import base64

    return str(uuid.UUID(bytes=base64.urlsafe_b64decode(kafka_uuid + "==")))


# --- raw frames: what the clients do not show ---------------------------------------------


def _create_request(version: int, name: str, **topic):
    request_type = load_request_schema(19, version)
    module = __import__(request_type.__module__, fromlist=["CreatableTopic"])
    configs = tuple(
        module.CreatableTopicConfig(name=k, value=v) for k, v in topic.pop("configs", {}).items()
    )
    assignments = tuple(
        module.CreatableReplicaAssignment(
            partition_index=i32(p), broker_ids=tuple(i32(b) for b in r)
        )
        for p, r in topic.pop("assignments", {}).items()
    )
    return request_type(
        topics=(
            module.CreatableTopic(
                name=name,
                num_partitions=i32(topic.pop("num_partitions", -1)),
                replication_factor=i16(topic.pop("replication_factor", -1)),
                assignments=assignments,
                configs=configs,
            ),
        ),
        timeout=i32Timedelta.parse(__import__("datetime").timedelta(seconds=TIMEOUT)),
        validate_only=topic.pop("validate_only", False),
    )


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7])
def test_create_topics_every_served_version_with_defaults_and_assignments(cluster, version):
    name = f"raw-v{version}"
    response = _raw(cluster, _create_request(version, name, assignments={0: [1, 2], 1: [2, 3]}), 19)
    (result,) = response.topics
    assert (result.name, result.error_code, result.error_message) == (name, ErrorCode.none, None)
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (2, 2)
        assert {c.name for c in result.configs} >= {"retention.ms", "cleanup.policy"}
    if version >= 7:
        assert result.topic_id.int != 0
    # -1, -1: the cluster's num.partitions and default.replication.factor (1 and 1 here)
    defaults = _raw(cluster, _create_request(version, name + "-defaults"), 19).topics[0]
    assert defaults.error_code == ErrorCode.none
    if version >= 5:
        assert (defaults.num_partitions, defaults.replication_factor) == (1, 1)


def test_a_null_config_value_and_a_topic_named_twice_are_refused(cluster):
    request = _create_request(7, "raw-null", configs={"retention.ms": None})
    (result,) = _raw(cluster, request, 19).topics
    assert result.error_code == ErrorCode.invalid_config
    assert result.error_message == "Null value not supported for topic configs: retention.ms"
    twice = _create_request(7, "raw-twice")
    twice = type(twice)(topics=twice.topics * 2, timeout=twice.timeout, validate_only=False)
    results = _raw(cluster, twice, 19).topics
    assert [(r.name, r.error_code) for r in results] == [("raw-twice", ErrorCode.invalid_request)]


def test_delete_topics_v6_by_topic_id(cluster, strom_admin):
    strom_admin.create_topics([NewTopic("by-id", 1, replication_factor=1)])
    topic_id = uuid.UUID(_as_uuid(_strom_topic(strom_admin, "by-id").topic_id))
    request_type = load_request_schema(20, 6)
    module = __import__(request_type.__module__, fromlist=["DeleteTopicState"])
    unknown = uuid.uuid4()

    def delete(*states):
        request = request_type(
            topics=tuple(module.DeleteTopicState(name=n, topic_id=i) for n, i in states),
            timeout=i32Timedelta.parse(__import__("datetime").timedelta(seconds=TIMEOUT)),
        )
        return {
            (r.name, r.topic_id): (r.error_code, r.error_message)
            for r in _raw(cluster, request, 20).responses
        }

    # every broker's image knows the topic before it is deleted by id
    wait_until(lambda: all(_knows(cluster, n, "by-id") for n in cluster.ids), 20, "by-id known")
    both = delete(("by-id", topic_id))
    assert both == {
        ("by-id", topic_id): (
            ErrorCode.invalid_request,
            "You may not specify both topic name and topic id.",
        )
    }
    answers = delete((None, topic_id), (None, unknown))
    assert answers[("by-id", topic_id)] == (ErrorCode.none, None)
    assert answers[(None, unknown)] == (
        ErrorCode.unknown_topic_id,
        "This server does not host this topic ID.",
    )
    assert "by-id" not in strom_admin.list_topics()


def _knows(cluster, node: int, name: str) -> bool:
    request = load_request_schema(3, 12)(topics=None, include_topic_authorized_operations=False)
    response = _raw(cluster, request, 3, node)
    return any(t.name == name and t.error_code == ErrorCode.none for t in response.topics)


def test_stroms_admin_validate_only_creates_nothing(strom_admin):
    strom_admin.create_topics(
        [NewTopic("grpc-validated", 2, replication_factor=3)], validate_only=True
    )
    assert "grpc-validated" not in strom_admin.list_topics()
    with pytest.raises(StromError) as raised:
        strom_admin.create_topics([NewTopic("orders", 1, replication_factor=1)], validate_only=True)
    assert raised.value.name == "TOPIC_ALREADY_EXISTS"


def test_api_versions_advertises_the_topic_apis_over_docs_ranges(cluster):
    """docs/kafka_protocol.md, "Strom serves": CreateTopics 3-7, DeleteTopics 3-6,
    CreatePartitions 1-3."""
    response = _raw(
        cluster,
        load_request_schema(18, 3)(client_software_name="t", client_software_version="1"),
        18,
    )
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert (ranges[19], ranges[20], ranges[37]) == ((3, 7), (3, 6), (1, 3))
