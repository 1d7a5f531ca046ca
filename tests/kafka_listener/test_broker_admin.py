"""DescribeLogDirs and DescribeProducers through the Kafka listener (issue 20): answered by
each broker from its own replicas (server/requests/log_dirs.py, producers.py), read with
kafka-python's describe_log_dirs and describe_producers (v5, v0) after records were written
through Strom's own idempotent producer (gRPC)."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from strom.admin import AdminClient, NewTopic
from strom.producer import Producer
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.kafka_cluster import connect, decode_response, read_frame, request_frame

TIMEOUT = 20


@pytest.fixture(scope="module")
def written(cluster):
    """'ledger' (one partition led by broker 1, replicas 1, 2, 3) with 10 records from an
    idempotent producer."""
    with AdminClient(bootstrap(cluster)) as admin:
        admin.create_topics([NewTopic("ledger", 1, replica_assignments={0: [1, 2, 3]})])
    producer = Producer(bootstrap(cluster), enable_idempotence=True)
    try:
        for i in range(10):
            producer.send("ledger", value=b"x" * 100, key=str(i).encode(), partition=0)
        producer.flush(timeout=TIMEOUT)
    finally:
        producer.close(timeout=TIMEOUT)


@pytest.fixture(scope="module")
def kafka_python(cluster):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(), request_timeout_ms=TIMEOUT * 1000
    )
    yield admin
    admin.close()


def _raw(cluster, body, api_key: int, node: int):
    with connect(f"{cluster.host[node]}:{cluster.kafka_port[node]}") as sock:
        sock.sendall(request_frame(body, 13))
        frame = read_frame(sock)
    assert frame is not None, "the broker closed the connection"
    correlation_id, response = decode_response(frame, api_key, body.__version__)
    assert correlation_id == 13
    return response


def test_describe_log_dirs_shows_each_brokers_replicas_and_volume(cluster, written, kafka_python):
    answers = kafka_python.describe_log_dirs({"ledger": [0]})
    assert sorted(a["broker"] for a in answers) == cluster.ids
    for answer in answers:
        (log_dir,) = answer["log_dirs"]
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"].endswith(f"node{answer['broker']}/data")
        assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
        (topic,) = log_dir["topics"]  # only the partition asked for
        (partition,) = topic["partitions"]
        assert (topic["name"], partition["partition_index"]) == ("ledger", 0)
        assert partition["partition_size"] > 1000  # ten records of 100 bytes, replicated


def test_describe_log_dirs_v5_raw(cluster, written):
    request = load_request_schema(35, 5)(topics=None)
    response = _raw(cluster, request, 35, node=2)
    assert response.error_code == ErrorCode.none
    (log_dir,) = response.results
    assert log_dir.error_code == ErrorCode.none and log_dir.total_bytes >= log_dir.usable_bytes > 0
    sizes = {(t.name, p.partition_index): p for t in log_dir.topics for p in t.partitions}
    assert sizes[("ledger", 0)].partition_size > 1000 and sizes[("ledger", 0)].offset_lag == 0
    assert ("orders", 2) in sizes  # every replica when no topic is named


def test_describe_producers_on_the_leader_and_elsewhere(cluster, written, kafka_python):
    from kafka import TopicPartition

    states = kafka_python.describe_producers([TopicPartition("ledger", 0)])
    (state,) = states[TopicPartition("ledger", 0)].active_producers
    assert (state.producer_epoch, state.last_sequence) == (0, 9)
    assert state.current_transaction_start_offset == -1
    request_type = load_request_schema(61, 0)
    module = __import__(request_type.__module__, fromlist=["TopicRequest"])
    request = request_type(
        topics=(module.TopicRequest(name="ledger", partition_indexes=(i32(0), i32(7))),)
    )
    leader, missing = _raw(cluster, request, 61, node=1).topics[0].partitions
    assert leader.error_code == ErrorCode.none
    (producer,) = leader.active_producers
    assert producer.last_sequence == 9 and producer.producer_epoch >= 0
    assert producer.last_timestamp > 0
    assert (producer.coordinator_epoch, producer.current_txn_start_offset) == (-1, -1)
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    (follower,) = _raw(cluster, request, 61, node=2).topics[0].partitions[:1]
    assert follower.error_code == ErrorCode.not_leader_or_follower


def test_api_versions_advertises_the_broker_apis_over_docs_ranges(cluster):
    """docs/kafka_protocol.md, "Strom serves": DescribeLogDirs 5, DescribeProducers 0."""
    request = load_request_schema(18, 3)(client_software_name="t", client_software_version="1")
    ranges = {
        k.api_key: (k.min_version, k.max_version) for k in _raw(cluster, request, 18, 1).api_keys
    }
    assert (ranges[35], ranges[61]) == ((5, 5), (0, 0))
