"""strom.admin.AdminClient against a real cluster, through broker addresses only: topics,
partitions, configs (one resource or several in one request), cluster and quorum
descriptions, elections, reassignments (per-partition errors, listing by partition,
cancelling), offsets by OffsetSpec and consumer groups, with Kafka's error names."""

from __future__ import annotations

import signal
import time

import pytest

from strom.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    ListOffsetsResultInfo,
    NewTopic,
    OffsetSpec,
)
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
            coordinator = described.coordinator  # Kafka's Node: its id and host:port
            assert described.coordinator_address == f"127.0.0.1:{cluster.broker_port[coordinator]}"
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


def test_list_offsets_by_offset_spec(cluster):
    with AdminClient(bootstrap(cluster)) as admin:
        admin.create_topics([NewTopic("stamped", num_partitions=2, replication_factor=3)])
        base = int(time.time() * 1000) - 60_000
        with Producer(bootstrap(cluster), acks="all") as producer:
            for i in range(5):
                producer.send("stamped", b"%d" % i, partition=0, timestamp_ms=base + i * 1000)
            producer.flush()
        p0, p1 = TopicPartition("stamped", 0), TopicPartition("stamped", 1)
        found = admin.list_offsets(
            {
                p0: OffsetSpec.earliest(),
                ("stamped", 1): OffsetSpec.latest(),
            }
        )
        assert found.keys() == {p0, p1}
        assert (found[p0].offset, found[p0].timestamp) == (0, -1)
        assert (found[p1].offset, found[p1].timestamp) == (0, -1)  # an empty partition
        assert found[p0].leader_epoch is not None and found[p0].leader_epoch >= 0

        def one(spec: OffsetSpec) -> ListOffsetsResultInfo:
            return admin.list_offsets({p0: spec})[p0]

        assert one(OffsetSpec.latest()).offset == 5
        newest = one(OffsetSpec.max_timestamp())
        assert (newest.offset, newest.timestamp) == (4, base + 4000)
        at = one(OffsetSpec.for_timestamp(base + 2500))  # the first record at or after it
        assert (at.offset, at.timestamp) == (3, base + 3000)
        assert one(OffsetSpec.for_timestamp(base + 60_000)) == ListOffsetsResultInfo(-1, -1, None)

        def refused(wanted: dict) -> StromError:
            with pytest.raises(StromError) as raised:
                admin.list_offsets(wanted)
            return raised.value

        unknown = refused({("never-made", 0): OffsetSpec.latest()})
        assert unknown.name == "UNKNOWN_TOPIC_OR_PARTITION"
        beyond = refused({("stamped", 7): OffsetSpec.latest()})
        assert (beyond.name, beyond.message) == (
            "UNKNOWN_TOPIC_OR_PARTITION",
            "Partition stamped-7 does not exist: topic stamped has 2 partitions.",
        )
        assert refused({p0: -1}).name == "INVALID_REQUEST"  # a spec, not a raw timestamp
        with pytest.raises(StromError, match="INVALID_REQUEST: OffsetSpec.for_timestamp"):
            OffsetSpec.for_timestamp(-1)


def test_configs_of_several_resources_in_one_request(cluster):
    topic, broker = ConfigResource("topic", "tuned"), ConfigResource("broker", "1")
    with AdminClient(bootstrap(cluster)) as admin:
        admin.create_topics([NewTopic("tuned", num_partitions=1, replication_factor=3)])
        admin.incremental_alter_configs(
            {
                topic: [
                    AlterConfigOp("retention.ms", "60000"),
                    AlterConfigOp("cleanup.policy", "compact", "APPEND"),
                ],
                broker: [AlterConfigOp("follower.replication.throttled.rate", "1000000")],
            }
        )
        assert admin.describe_configs(topic)["retention.ms"] == "60000"
        assert admin.describe_configs(topic)["cleanup.policy"] == "delete,compact"
        assert admin.describe_configs(broker)["follower.replication.throttled.rate"] == "1000000"
        # Every resource is tried; the one refused is raised.
        with pytest.raises(StromError) as refused:
            admin.incremental_alter_configs(
                {
                    broker: [
                        AlterConfigOp("follower.replication.throttled.rate", op_type="DELETE")
                    ],
                    topic: [AlterConfigOp("retention.ms", "soon")],
                }
            )
        assert refused.value.name == "INVALID_CONFIG"
        assert (
            admin.describe_configs(broker).get("follower.replication.throttled.rate") != "1000000"
        )
        for bad, words in (
            (AlterConfigOp("retention.ms", "1", "REPLACE"), "op_type must be one of"),
            (AlterConfigOp("retention.ms"), "SET needs a value"),
        ):
            with pytest.raises(StromError, match=f"INVALID_REQUEST: .*{words}"):
                admin.incremental_alter_configs({topic: [bad]})
        with pytest.raises(StromError, match="INVALID_REQUEST: set_ and delete go with one"):
            admin.incremental_alter_configs({topic: []}, delete=["retention.ms"])


def test_reassignments_by_partition_with_kafkas_per_partition_errors(cluster):
    moving0, moving1 = TopicPartition("moving", 0), TopicPartition("moving", 1)
    # Brokers 1 and 2 only: broker 3 is paused below.
    servers = ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in (1, 2))
    with AdminClient(servers) as admin:
        admin.create_topics([NewTopic("moving", replica_assignments={0: [1, 2], 1: [2, 1]})])
        errors = admin.alter_partition_reassignments(
            {("moving", 1): [2, 9], ("nowhere", 0): [1], ("moving", 0): None}, as_errors=True
        )
        assert {tp: e.name for tp, e in errors.items() if e is not None} == {
            moving1: "INVALID_REPLICA_ASSIGNMENT",
            TopicPartition("nowhere", 0): "UNKNOWN_TOPIC_OR_PARTITION",
            moving0: "NO_REASSIGNMENT_IN_PROGRESS",  # nothing to cancel
        }
        with pytest.raises(StromError) as raised:
            admin.alter_partition_reassignments({("moving", 1): [2, 9]})
        assert raised.value.name == "INVALID_REPLICA_ASSIGNMENT"

        # Broker 3, paused, cannot catch up: the move of moving-0 to it stays in progress.
        cluster.procs[3].send_signal(signal.SIGSTOP)
        try:
            assert admin.alter_partition_reassignments({("moving", 0): [3, 2]}) is None
            ongoing = {"replicas": [3, 2, 1], "adding": [3], "removing": [1]}
            assert admin.list_partition_reassignments([("moving", 0), ("moving", 1)]) == {
                moving0: ongoing
            }
            assert admin.list_partition_reassignments([("moving", 1)]) == {}
            assert admin.list_partition_reassignments()[moving0] == ongoing
            assert admin.alter_partition_reassignments({("moving", 0): None}, as_errors=True) == {
                moving0: None
            }
            assert admin.list_partition_reassignments([("moving", 0)]) == {}
            # Kafka's revert: the replicas less those being added, in their order (3,2,1).
            assert admin.describe_topics(["moving"])[0].partitions[0].replicas == (2, 1)
        finally:
            cluster.procs[3].send_signal(signal.SIGCONT)
    cluster.wait_for_brokers()
