"""strom.admin.AdminClient against a real cluster, through broker addresses only: topics,
partitions, configs, cluster and quorum descriptions, elections, reassignments and
consumer groups, with Kafka's error names."""

from __future__ import annotations

import time

import pytest

from strom.admin import AdminClient, ConfigResource, NewTopic
from strom.consumer import Consumer, TopicPartition
from strom.errors import StromError
from strom.producer import Producer
from tests.client.cluster_helpers import FAST, bootstrap


def test_topics_configs_and_descriptions(cluster):
    with AdminClient(bootstrap(cluster)) as admin:
        admin.create_topics(
            [
                NewTopic(
                    "made",
                    num_partitions=2,
                    replication_factor=3,
                    topic_configs={"retention.ms": "60000"},
                ),
                NewTopic("placed", replica_assignments={0: [1, 2], 1: [2, 3]}),
            ]
        )
        with pytest.raises(StromError) as exists:
            admin.create_topics([NewTopic("made", 1, 1)])
        assert exists.value.name == "TOPIC_ALREADY_EXISTS"
        assert {"made", "placed"} <= admin.list_topics()
        [made] = admin.describe_topics(["made"])
        assert len(made.partitions) == 2 and made.configs == {"retention.ms": "60000"}
        assert all(len(p.replicas) == 3 for p in made.partitions)
        [placed] = admin.describe_topics(["placed"])
        assert [p.replicas for p in placed.partitions] == [(1, 2), (2, 3)]
        admin.create_partitions({"made": 4})
        assert len(admin.describe_topics(["made"])[0].partitions) == 4
        resource = ConfigResource("topic", "made")
        admin.incremental_alter_configs(
            resource, set_={"cleanup.policy": "compact"}, delete=["retention.ms"]
        )
        configs = admin.describe_configs(resource)
        assert configs["cleanup.policy"] == "compact" and configs["retention.ms"] == "604800000"
        # Kafka's ConfigEntry, as `strom configs --describe` prints it (strom_tools).
        entries = {e.name: e for e in admin.describe_config_entries(resource)}
        policy = entries["cleanup.policy"]
        assert (policy.value, policy.source, policy.is_sensitive) == (
            "compact",
            "DYNAMIC_TOPIC_CONFIG",
            False,
        )
        assert policy.synonyms[0].source == "DYNAMIC_TOPIC_CONFIG"
        assert entries["retention.ms"].source != "DYNAMIC_TOPIC_CONFIG"
        with pytest.raises(StromError, match="INVALID_CONFIG"):
            admin.incremental_alter_configs(resource, set_={"retention.ms": "soon"})
        cluster_info = admin.describe_cluster()
        assert {b["node_id"] for b in cluster_info["brokers"]} == set(cluster.ids)
        # What `strom cluster describe` prints comes from here (strom_tools uses AdminClient).
        assert cluster_info["metadata_offset"] > 0
        for broker in cluster_info["brokers"]:
            assert broker["broker_epoch"] > 0 and broker["in_controlled_shutdown"] is False
            assert all("://127.0.0.1:" in e for e in broker["endpoints"])
        quorum = admin.describe_metadata_quorum()
        assert quorum["leader_id"] == cluster_info["controller_id"]
        [leader] = [v for v in quorum["voters"] if v["id"] == quorum["leader_id"]]
        assert leader["last_caught_up_timestamp"] > 0 and "last_fetch_timestamp" in leader
        assert admin.elect_leaders("preferred", [("made", 0)]) == {
            TopicPartition("made", 0): "ELECTION_NOT_NEEDED"
        }
        admin.alter_partition_reassignments({("placed", 0): [3, 1]})
        deadline = time.monotonic() + 20
        while admin.list_partition_reassignments() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert admin.describe_topics(["placed"])[0].partitions[0].replicas == (3, 1)
        admin.delete_topics(["placed"])
        assert "placed" not in admin.list_topics()
        with pytest.raises(StromError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            admin.delete_topics(["never-was"])


def test_consumer_group_operations(cluster):
    with AdminClient(bootstrap(cluster)) as admin:
        admin.create_topics([NewTopic("watched", num_partitions=2, replication_factor=3)])
        with Producer(bootstrap(cluster)) as producer:
            for i in range(10):
                producer.send("watched", b"%d" % i, partition=i % 2)
        with Consumer(
            "watched", bootstrap_servers=bootstrap(cluster), group_id="observers", **FAST
        ) as c:
            got = 0
            deadline = time.monotonic() + 20
            while got < 10 and time.monotonic() < deadline:
                got += sum(len(r) for r in c.poll(timeout_ms=200).values())
            c.commit()
            [described] = admin.describe_consumer_groups(["observers"])
            assert described.state == "Stable" and len(described.members) == 1
            assert set(described.members[0].assignment) == {
                TopicPartition("watched", p) for p in (0, 1)
            }
        assert any(g.group_id == "observers" for g in admin.list_consumer_groups())
        assert admin.list_consumer_group_offsets("observers") == {
            TopicPartition("watched", 0): 5,
            TopicPartition("watched", 1): 5,
        }
        admin.alter_consumer_group_offsets("observers", {("watched", 0): 2})
        lag = {x.tp: x.lag for x in admin.consumer_group_lag("observers")}
        assert lag == {TopicPartition("watched", 0): 3, TopicPartition("watched", 1): 0}
        admin.delete_consumer_groups(["observers"])
        assert not any(g.group_id == "observers" for g in admin.list_consumer_groups())
