"""One 3-node cluster with Kafka protocol listeners per test module, with two topics
created through Strom's own AdminClient (gRPC)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from strom.admin import AdminClient, NewTopic
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.kafka_cluster import (
    TOPICS,
    KafkaCluster,
    connect,
    decode_response,
    read_frame,
    request_frame,
)
from tests.node_integration.node_cluster import wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    base = str(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]))
    # a module may name its own KafkaCluster subclass (other settings) as CLUSTER
    yield from started(getattr(request.module, "CLUSTER", KafkaCluster)(base, 3))


# Brokers whose groups rebalance without the initial delay, allow short sessions and keep
# a small __consumer_offsets: for modules whose real clients join groups.
QUICK_GROUPS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "3",
}


def started(cluster: KafkaCluster) -> Iterator[KafkaCluster]:
    """`cluster` started with the topics of TOPICS, known with leaders by every broker's
    Kafka listener; stopped when the generator is closed."""
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        with AdminClient(bootstrap(cluster)) as admin:
            admin.create_topics(
                NewTopic(name, partitions, replication_factor=3)
                for name, partitions in TOPICS.items()
            )
        for node in cluster.ids:  # each broker's image has them, with leaders
            wait_until(
                lambda n=node: topics_known(cluster, n), 20, f"node {node} to know the topics"
            )
        yield cluster
    finally:
        cluster.stop_all()


def topics_known(cluster: KafkaCluster, node: int) -> bool:
    """Node `node` answers Metadata v12 with every topic of TOPICS, each partition led."""
    request = load_request_schema(3, 12)(topics=None, include_topic_authorized_operations=False)
    try:
        with connect(f"{cluster.host[node]}:{cluster.kafka_port[node]}") as sock:
            sock.sendall(request_frame(request, 1))
            frame = read_frame(sock)
    except OSError:
        return False
    if frame is None:
        return False
    _, response = decode_response(frame, 3, 12)
    known = {
        t.name: len(t.partitions)
        for t in response.topics
        if t.error_code == ErrorCode.none
        and all(p.error_code == ErrorCode.none for p in t.partitions)
    }
    return all(known.get(name) == count for name, count in TOPICS.items())
