"""Broker defaults a node's server.properties sets reach the requests that rely on them:
`auto.create.topics.enable=false` stops a Metadata request from creating the topics it names,
`num.partitions` is the partition count of a topic created without one (Kafka's -1,
KIP-464), `offsets.topic.segment.bytes` the segment size of `__consumer_offsets`, created
when a group first needs its coordinator, and `replica.high.watermark.checkpoint.interval.ms`
how often high watermarks reach their checkpoint file. One node, as a user would configure
it."""

from __future__ import annotations

import os

from strom_api.v1 import client_pb2, controller_pb2, metadata_pb2
from tests.data_plane.data_client import DataClient, batch, error_name
from tests.node_integration.node_cluster import running_cluster, wait_until


def test_auto_create_disabled_and_num_partitions_reach_their_requests(tmp_path):
    extra = {
        "auto.create.topics.enable": "false",
        "num.partitions": "3",
        "offsets.topic.segment.bytes": "2097152",
        "offsets.topic.replication.factor": "1",
        "replica.high.watermark.checkpoint.interval.ms": "200",
    }
    with running_cluster(str(tmp_path), 1, extra=extra) as cluster:
        client = DataClient({1: f"127.0.0.1:{cluster.broker_port[1]}"})
        asked = client.stub(1).Metadata(
            client_pb2.MetadataRequest(topics=["not-made"], allow_auto_topic_creation=True),
            timeout=10,
        )
        assert error_name(asked.topics[0].error) == "UNKNOWN_TOPIC_OR_PARTITION"
        again = client.metadata(["not-made"])
        assert error_name(again.topics[0].error) == "UNKNOWN_TOPIC_OR_PARTITION"
        created = cluster.call(
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(
                        name="defaults", num_partitions=-1, replication_factor=-1
                    )
                ]
            ),
        )
        assert created.topics[0].error.code == 0, created

        def partitions() -> int:
            return len(client.metadata(["defaults"]).topics[0].partitions)

        wait_until(lambda: partitions() > 0, 20, "the broker to learn the topic")
        assert partitions() == 3

        def coordinator_found() -> bool:
            found = client.stub(1).FindCoordinator(
                client_pb2.FindCoordinatorRequest(key="g"), timeout=10
            )
            return error_name(found.error) == "NONE"

        wait_until(coordinator_found, 30, "__consumer_offsets to be created")
        described = cluster.call(
            "DescribeConfigs",
            controller_pb2.DescribeConfigsRequest(
                resources=[
                    controller_pb2.ConfigResource(
                        type=metadata_pb2.TOPIC, name="__consumer_offsets"
                    )
                ],
                keys=["segment.bytes"],
            ),
        )
        [entry] = described.results[0].entries
        assert entry.value == "2097152"

        # Two checkpoints of a moved high watermark within 4 s: at the default (5 s) the
        # second could not follow the first so soon.
        checkpoint = os.path.join(cluster.data_dir(1), "replication-offset-checkpoint")

        def checkpointed(offset: int) -> bool:
            with open(checkpoint) as f:
                return f"defaults 0 {offset}" in f.read().splitlines()

        for high_watermark in (1, 2):
            answer = client.produce_raw(1, "defaults", 0, batch([b"v%d" % high_watermark]))
            assert error_name(answer.error) == "NONE"
            wait_until(
                lambda hw=high_watermark: checkpointed(hw), 2, "the high watermark checkpointed"
            )
