"""Kafka's own clients read Strom's metadata through the Kafka listener (issue 20): kcat
(`-L`), confluent-kafka's AdminClient.list_topics (librdkafka: ApiVersions v3, Metadata
v12/13) and kafka-python, seeing the topics and partitions created through Strom's own
AdminClient over gRPC, with every broker's Kafka endpoint."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from strom_api.v1 import controller_pb2
from tests.kafka_listener.kafka_cluster import TOPICS
from tests.node_integration.node_cluster import wait_until


def test_kcat_lists_the_brokers_topics_and_partitions(cluster):
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (Debian package kcat; .ci/run installs it)")
    result = subprocess.run(
        [kcat, "-L", "-J", "-b", cluster.kafka_bootstrap(), "-m", "10"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    assert sorted((b["id"], b["name"]) for b in listing["brokers"]) == [
        (i, f"127.0.0.1:{cluster.kafka_port[i]}") for i in cluster.ids
    ]
    topics = {t["topic"]: t for t in listing["topics"]}
    assert {name: len(topics[name]["partitions"]) for name in TOPICS} == TOPICS
    for partition in topics["orders"]["partitions"]:
        assert partition["leader"] in cluster.ids
        assert sorted(r["id"] for r in partition["replicas"]) == cluster.ids
        assert sorted(r["id"] for r in partition["isrs"]) == cluster.ids


def test_confluent_kafka_admin_lists_topics(cluster):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap()})
    metadata = admin.list_topics(timeout=20)
    assert metadata.cluster_id == cluster.cluster_id
    assert sorted((b.id, b.host, b.port) for b in metadata.brokers.values()) == [
        (i, "127.0.0.1", cluster.kafka_port[i]) for i in cluster.ids
    ]
    assert metadata.controller_id in cluster.ids
    assert {n: len(metadata.topics[n].partitions) for n in TOPICS} == TOPICS
    orders = metadata.topics["orders"]
    assert orders.error is None
    for partition in orders.partitions.values():
        assert partition.error is None
        assert partition.leader in cluster.ids
        assert sorted(partition.replicas) == sorted(partition.isrs) == cluster.ids

    one = admin.list_topics(topic="payments", timeout=20)
    assert list(one.topics) == ["payments"] and len(one.topics["payments"].partitions) == 1


def test_confluent_kafka_sees_an_unknown_topic_as_unknown(cluster):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {"bootstrap.servers": cluster.kafka_bootstrap(), "allow.auto.create.topics": False}
    )
    metadata = admin.list_topics(topic="no-such-topic", timeout=20)
    error = metadata.topics["no-such-topic"].error
    assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_a_producers_metadata_request_auto_creates_as_the_grpc_one_does(cluster):
    """librdkafka's producer allows auto-creation; auto.create.topics.enable (default true)
    creates the topic with the cluster's defaults, through the same function as gRPC."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap()})

    def created() -> bool:
        topic = admin.list_topics(topic="made-on-demand", timeout=20).topics["made-on-demand"]
        return topic.error is None and len(topic.partitions) > 0

    wait_until(created, 20, "made-on-demand to be auto-created")
    described = cluster.call(
        "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=["made-on-demand"])
    )
    assert described.topics[0].error.code == 0


def test_kafka_python_lists_topics(cluster):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap(), request_timeout_ms=20000)
    try:
        topics = wait_until(lambda: consumer.topics() or None, 20, "kafka-python's topics")
        assert set(TOPICS) <= topics
        assert consumer.partitions_for_topic("orders") == {0, 1, 2}
    finally:
        consumer.close()
