"""What the Spark connector's tests share besides fixtures: topics, producing, deleting."""

from __future__ import annotations

from strom.producer import Producer
from strom.range_reader import SyncCluster, TopicPartition
from strom_api.v1 import client_pb2
from tests.client.cluster_helpers import create_topic


def make_topic(cluster, name, partitions=6, **configs):
    create_topic(cluster, name, partitions=partitions, **configs)


def produce(servers, topic, records):
    """Sends (value, key, partition, timestamp_ms, headers) tuples; returns their metadata."""
    with Producer(servers, linger_ms=2) as producer:
        futures = [
            producer.send(topic, v, key=k, partition=p, timestamp_ms=ts, headers=h)
            for v, k, p, ts, h in records
        ]
        producer.flush()
        return [f.get(timeout=30) for f in futures]


def delete_below(servers, topic, partition, offset):
    """DeleteRecords on the partition's leader: the log then starts at `offset`."""
    with SyncCluster(servers) as cluster:
        cluster.refresh([topic])
        response = cluster.stub(cluster.leader(TopicPartition(topic, partition))).DeleteRecords(
            client_pb2.DeleteRecordsRequest(
                timeout_ms=10_000,
                topics=[
                    client_pb2.DeleteRecordsRequest.Topic(
                        name=topic,
                        partitions=[
                            client_pb2.DeleteRecordsRequest.Partition(
                                partition=partition, offset=offset
                            )
                        ],
                    )
                ],
            ),
            timeout=15,
        )
    assert response.topics[0].partitions[0].error.code == 0, response
