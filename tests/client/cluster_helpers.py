"""What the client-library tests share: a 3-node cluster's addresses, topic creation, a
raw reader, and the broker and consumer settings that keep group tests quick."""

from __future__ import annotations

from typing import Any

from strom_api.v1 import controller_pb2
from tests.data_plane.data_client import DataClient
from tests.node_integration.node_cluster import NodeCluster

# Broker settings: few offsets partitions, a short initial rebalance delay, short sessions.
GROUP_SETTINGS = {
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "100",
    "group.min.session.timeout.ms": "1000",
}
# Consumer settings to match.
FAST: dict[str, Any] = {
    "session_timeout_ms": 3000,
    "heartbeat_interval_ms": 300,
    "auto_offset_reset": "earliest",
}


def started_cluster(base: str) -> NodeCluster:
    cluster = NodeCluster(base, 3, extra=GROUP_SETTINGS)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
    except BaseException:
        cluster.stop_all()
        raise
    return cluster


def create_topic(cluster: NodeCluster, name: str, partitions: int = 3, **configs: str) -> None:
    response = cluster.call(
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=3,
                    configs={"min.insync.replicas": "2", **configs},
                )
            ]
        ),
    )
    assert response.topics[0].error.code == 0, response


def bootstrap(cluster: NodeCluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids)


def reader(cluster: NodeCluster) -> DataClient:
    return DataClient({i: f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids})


def grow_topic(cluster: NodeCluster, name: str, partitions: int) -> None:
    """`topics --alter --partitions`: grows the topic, then waits until each new partition's
    leader knows it leads (so records can be produced to them at once)."""
    response = cluster.call(
        "CreatePartitions", controller_pb2.CreatePartitionsRequest(name=name, count=partitions)
    )
    assert response.error.error.code == 0, response
    client = reader(cluster)
    for partition in range(partitions):
        client.leader(name, partition)
