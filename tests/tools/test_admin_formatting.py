"""What the admin tools print: Kafka's layouts, from the controller's answers."""

from __future__ import annotations

import uuid

from strom.formatting import (
    cluster_description,
    cluster_id_line,
    max_follower_lag,
    pretty_table,
    quorum_replication,
    quorum_status,
    topic_description,
)
from strom.uuids import kafka_uuid_string
from strom_api.v1 import controller_pb2 as cpb
from strom_api.v1 import metadata_pb2 as mpb

Replica = cpb.DescribeQuorumResponse.Replica
Partition = cpb.DescribeTopicsResponse.Partition


def quorum(
    voters: list[Replica], observers: list[Replica] | None = None, leader: int = 2
) -> cpb.DescribeQuorumResponse:
    return cpb.DescribeQuorumResponse(
        leader_id=leader,
        leader_epoch=7,
        high_watermark=120,
        voters=voters,
        observers=observers or [],
    )


def replica(node: int, end: int, fetch: int = -1, caught_up: int = -1) -> Replica:
    return Replica(
        replica_id=node,
        log_end_offset=end,
        last_fetch_timestamp=fetch,
        last_caught_up_timestamp=caught_up,
    )


def test_pretty_table_is_kafkas_tab_separated_padded_columns() -> None:
    assert pretty_table(["A", "Long"], [["xyz", "1"], ["b", "22"]]) == [
        "A  \tLong\t",
        "xyz\t1   \t",
        "b  \t22  \t",
    ]


class TestQuorumStatus:
    def test_kafkas_layout(self) -> None:
        described = quorum(
            [replica(2, 120, 1000, 1000), replica(3, 118, 990, 950), replica(1, 120, 995, 995)],
            [replica(7, 100)],
        )
        assert quorum_status("cluster-1", described) == [
            "ClusterId:              cluster-1",
            "LeaderId:               2",
            "LeaderEpoch:            7",
            "HighWatermark:          120",
            "MaxFollowerLag:         2",
            "MaxFollowerLagTimeMs:   50",
            "CurrentVoters:          [1,2,3]",
            "CurrentObservers:       [7]",
        ]

    def test_lag_time_is_zero_when_nobody_trails_the_leader(self) -> None:
        assert max_follower_lag(quorum([replica(2, 5, 1, 1), replica(1, 5, 1, 1)])) == (0, 0)

    def test_lag_time_is_unknown_without_a_caught_up_time(self) -> None:
        assert max_follower_lag(quorum([replica(2, 9, 1, 1), replica(1, 4)])) == (5, -1)

    def test_no_observers_prints_empty_brackets(self) -> None:
        assert quorum_status("c", quorum([replica(2, 1, 1, 1)]))[-1] == "CurrentObservers:       []"


class TestQuorumReplication:
    def test_leader_then_followers_then_observers(self) -> None:
        described = quorum(
            [replica(2, 120, 1000, 1000), replica(3, 118, 990, 950), replica(1, 120, 995, 995)],
            [replica(7, 100)],
        )
        assert quorum_replication(described) == [
            "NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t",
            "2     \t120         \t0  \t1000              \t1000                 \tLeader  \t",
            "1     \t120         \t0  \t995               \t995                  \tFollower\t",
            "3     \t118         \t2  \t990               \t950                  \tFollower\t",
            "7     \t100         \t20 \t-1                \t-1                   \tObserver\t",
        ]

    def test_human_readable_times(self) -> None:
        described = quorum([replica(2, 5, 1000, 1000), replica(1, 5, 900, -1)])
        rows = [
            line.split("\t")
            for line in quorum_replication(described, human_readable=True, now_ms=1250)
        ]
        assert [r[3].strip() for r in rows[1:]] == ["250 ms ago", "350 ms ago"]
        assert [r[4].strip() for r in rows[1:]] == ["250 ms ago", "-1"]


class TestCluster:
    def test_cluster_id_as_kafka_cluster_sh(self) -> None:
        assert cluster_id_line("abc") == "Cluster ID: abc"

    def test_brokers_with_state_rack_and_endpoints(self) -> None:
        def broker(node: int, **kw: object) -> cpb.DescribeClusterResponse.Broker:
            endpoint = mpb.BrokerEndpoint(name="PLAINTEXT", host="10.0.0.1", port=9090 + node)
            return cpb.DescribeClusterResponse.Broker(
                broker_id=node, endpoints=[endpoint], broker_epoch=node * 10, **kw
            )

        described = cpb.DescribeClusterResponse(
            cluster_id="abc",
            controller_id=2,
            metadata_offset=42,
            brokers=[
                broker(3, fenced=True),
                broker(1, rack="eu-1a"),
                broker(2, in_controlled_shutdown=True),
            ],
        )
        assert cluster_description(described) == [
            "ClusterId:              abc",
            "ControllerId:           2",
            "MetadataOffset:         42",
            "Brokers:                3",
            "BrokerId\tState        \tRack \tBrokerEpoch\tEndpoints                \t",
            "1       \tunfenced     \teu-1a\t10         \tPLAINTEXT://10.0.0.1:9091\t",
            "2       \tshutting down\tnull \t20         \tPLAINTEXT://10.0.0.1:9092\t",
            "3       \tfenced       \tnull \t30         \tPLAINTEXT://10.0.0.1:9093\t",
        ]


class TestTopicDescribe:
    topic_id = uuid.UUID("6f1c2a9e-0b7d-4c4e-9a51-3f0d8e2b7c11")

    def topic(self, *partitions: Partition, **configs: str) -> cpb.DescribeTopicsResponse.Topic:
        return cpb.DescribeTopicsResponse.Topic(
            name="orders", topic_id=self.topic_id.bytes, partitions=partitions, configs=configs
        )

    def test_kafka_topics_describe_layout(self) -> None:
        described = self.topic(
            Partition(partition=1, leader=-1, replicas=[2, 3], isr=[]),
            Partition(partition=0, leader=1, replicas=[1, 2], isr=[1, 2]),
            **{"retention.ms": "1000", "cleanup.policy": "compact"},
        )
        tid = kafka_uuid_string(self.topic_id)
        assert topic_description(described) == [
            f"Topic: orders\tTopicId: {tid}\tPartitionCount: 2\tReplicationFactor: 2\t"
            "Configs: cleanup.policy=compact,retention.ms=1000",
            "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
            "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 2,3\tIsr: ",
        ]

    def test_a_reassignment_in_progress_shows_adding_and_removing_replicas(self) -> None:
        moving = Partition(
            partition=0,
            leader=1,
            replicas=[1, 2, 3],
            isr=[1, 2],
            adding_replicas=[3],
            removing_replicas=[2],
        )
        header, line = topic_description(self.topic(moving))
        assert "\tReplicationFactor: 2\t" in header  # the adding replica does not count
        assert line.endswith("\tIsr: 1,2\tAdding Replicas: 3\tRemoving Replicas: 2")
        # 3 replicas less 1 being added: the ISR of 2 is complete
        assert topic_description(self.topic(moving), under_replicated=True) == []

    def test_under_replicated_and_unavailable_filters_drop_the_topic_line(self) -> None:
        described = self.topic(
            Partition(partition=0, leader=1, replicas=[1, 2], isr=[1, 2]),
            Partition(partition=1, leader=2, replicas=[2, 3], isr=[2]),
            Partition(partition=2, leader=3, replicas=[3, 1], isr=[3, 1]),
            Partition(partition=3, leader=-1, replicas=[3, 1], isr=[]),
        )
        under = topic_description(described, under_replicated=True)
        assert [line.split("\t")[2] for line in under] == ["Partition: 1", "Partition: 3"]
        unavailable = topic_description(described, live_brokers={1, 2}, unavailable=True)
        assert [line.split("\t")[2] for line in unavailable] == ["Partition: 2", "Partition: 3"]
