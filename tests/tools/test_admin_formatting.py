"""What the admin tools print: Kafka's layouts, from the controller's answers."""

from __future__ import annotations

import uuid

from strom.admin import ConfigEntry, ConfigSynonym, PartitionDescription, TopicDescription
from strom.consumer import TopicPartition
from strom.errors import StromError
from strom.uuids import kafka_uuid_string
from strom_tools.formatting import (
    cluster_description,
    cluster_id_line,
    config_entry_line,
    configs_altered,
    configs_header,
    election_lines,
    generated_assignment,
    max_follower_lag,
    pretty_table,
    quorum_replication,
    quorum_status,
    reassignment_cancelled,
    reassignment_json,
    reassignment_started,
    reassignment_status,
    reassignments_list,
    rollback_assignment,
    topic_description,
)


def partition_info(
    partition: int, leader: int, replicas: list[int], isr: list[int], **more: list[int]
) -> PartitionDescription:
    """One partition of AdminClient.describe_topics' answer."""
    extra = {k: tuple(v) for k, v in more.items()}
    return PartitionDescription(partition, leader, 0, tuple(replicas), tuple(isr), **extra)


def quorum(
    voters: list[dict[str, int]], observers: list[dict[str, int]] | None = None, leader: int = 2
) -> dict[str, object]:
    """AdminClient.describe_metadata_quorum's answer."""
    return {
        "leader_id": leader,
        "leader_epoch": 7,
        "high_watermark": 120,
        "voters": voters,
        "observers": observers or [],
    }


def replica(node: int, end: int, fetch: int = -1, caught_up: int = -1) -> dict[str, int]:
    return {
        "id": node,
        "log_end_offset": end,
        "last_fetch_timestamp": fetch,
        "last_caught_up_timestamp": caught_up,
    }


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
        def broker(node: int, **kw: object) -> dict[str, object]:
            """One broker of AdminClient.describe_cluster's answer."""
            state = {"fenced": False, "in_controlled_shutdown": False, "rack": None, **kw}
            return {
                "node_id": node,
                "endpoints": [f"PLAINTEXT://10.0.0.1:{9090 + node}"],
                "broker_epoch": node * 10,
                **state,
            }

        described = {
            "cluster_id": "abc",
            "controller_id": 2,
            "metadata_offset": 42,
            "brokers": [
                broker(3, fenced=True),
                broker(1, rack="eu-1a"),
                broker(2, in_controlled_shutdown=True),
            ],
        }
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

    def topic(self, *partitions: PartitionDescription, **configs: str) -> TopicDescription:
        """AdminClient.describe_topics' answer for one topic."""
        return TopicDescription("orders", kafka_uuid_string(self.topic_id), partitions, configs)

    def test_kafka_topics_describe_layout(self) -> None:
        described = self.topic(
            partition_info(partition=1, leader=-1, replicas=[2, 3], isr=[]),
            partition_info(partition=0, leader=1, replicas=[1, 2], isr=[1, 2]),
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
        moving = partition_info(
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

    def test_a_partition_with_eligible_leader_replicas_shows_them(self) -> None:
        offline = partition_info(
            partition=0, leader=-1, replicas=[1, 2, 3], isr=[], eligible_leader_replicas=[1]
        )
        _, line = topic_description(self.topic(offline))
        assert line.endswith("\tLeader: none\tReplicas: 1,2,3\tIsr: \tElr: 1")

    def test_under_replicated_and_unavailable_filters_drop_the_topic_line(self) -> None:
        described = self.topic(
            partition_info(partition=0, leader=1, replicas=[1, 2], isr=[1, 2]),
            partition_info(partition=1, leader=2, replicas=[2, 3], isr=[2]),
            partition_info(partition=2, leader=3, replicas=[3, 1], isr=[3, 1]),
            partition_info(partition=3, leader=-1, replicas=[3, 1], isr=[]),
        )
        under = topic_description(described, under_replicated=True)
        assert [line.split("\t")[2] for line in under] == ["Partition: 1", "Partition: 3"]
        unavailable = topic_description(described, live_brokers={1, 2}, unavailable=True)
        assert [line.split("\t")[2] for line in unavailable] == ["Partition: 2", "Partition: 3"]

    def test_min_isr_filters_compare_the_isr_with_the_topics_min_insync_replicas(self) -> None:
        described = self.topic(
            partition_info(partition=0, leader=1, replicas=[1, 2, 3], isr=[1, 2, 3]),
            partition_info(partition=1, leader=2, replicas=[2, 3, 1], isr=[2, 3]),
            partition_info(partition=2, leader=3, replicas=[3, 1, 2], isr=[3]),
            partition_info(partition=3, leader=-1, replicas=[1, 2, 3], isr=[1, 2]),
        )

        def chosen(**filters: object) -> list[str]:
            return [line.split("\t")[2] for line in topic_description(described, **filters)]

        # Kafka's isUnderMinIsr counts a partition without a leader too.
        assert chosen(min_isr=2, under_min_isr=True) == ["Partition: 2", "Partition: 3"]
        assert chosen(min_isr=2, at_min_isr=True) == ["Partition: 1", "Partition: 3"]
        assert chosen(min_isr=3, under_min_isr=True) == [
            "Partition: 1",
            "Partition: 2",
            "Partition: 3",
        ]


class TestConfigs:
    @staticmethod
    def entry(
        name: str,
        source: str,
        value: str | None = None,
        is_sensitive: bool = False,
        synonyms: tuple[ConfigSynonym, ...] = (),
    ) -> ConfigEntry:
        return ConfigEntry(name, value, source, is_sensitive, synonyms=tuple(synonyms))

    @staticmethod
    def synonym(name: str, value: str | None, source: str) -> ConfigSynonym:
        return ConfigSynonym(name, value, source)

    def test_a_config_line_as_kafka_configs_sh(self) -> None:
        entry = self.entry(
            name="retention.ms",
            value="1000",
            source="DYNAMIC_TOPIC_CONFIG",
            synonyms=[
                self.synonym(name="retention.ms", value="1000", source="DYNAMIC_TOPIC_CONFIG"),
                self.synonym(name="log.retention.hours", value="168", source="DEFAULT_CONFIG"),
            ],
        )
        assert config_entry_line(entry) == (
            "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
            "DEFAULT_CONFIG:log.retention.hours=168}"
        )

    def test_no_value_and_no_synonyms(self) -> None:
        entry = self.entry(name="log.roll.ms", source="DEFAULT_CONFIG")
        assert config_entry_line(entry) == "  log.roll.ms=null sensitive=false synonyms={}"

    def test_a_sensitive_value_is_never_shown(self) -> None:
        entry = self.entry(
            name="secret",
            value="hunter2",
            source="DYNAMIC_BROKER_CONFIG",
            is_sensitive=True,
            synonyms=[self.synonym(name="secret", value="hunter2", source="DYNAMIC_BROKER_CONFIG")],
        )
        assert config_entry_line(entry) == (
            "  secret=null sensitive=true synonyms={DYNAMIC_BROKER_CONFIG:secret=null}"
        )

    def test_headers_and_completion_lines(self) -> None:
        assert configs_header("topics", "orders", False) == "Dynamic configs for topic orders are:"
        assert configs_header("topics", "orders", True) == "All configs for topic orders are:"
        assert configs_header("brokers", "1", False) == "Dynamic configs for broker 1 are:"
        assert configs_header("brokers", "", True) == (
            "Default configs for brokers in the cluster are:"
        )
        assert configs_altered("topics", "orders") == "Completed updating config for topic orders."
        assert configs_altered("brokers", "") == (
            "Completed updating default config for brokers in the cluster."
        )


def result(
    topic: str, partition: int, error: str = "NONE", message: str = ""
) -> tuple[TopicPartition, StromError | None]:
    """One partition of AdminClient.elect_leaders(as_errors=True)."""
    return TopicPartition(topic, partition), None if error == "NONE" else StromError(error, message)


class TestLeaderElection:
    def test_elected_then_not_needed_then_failures_in_partition_order(self) -> None:
        results = [
            result("b", 0),
            result("a", 10),
            result("a", 2),
            result("a", 1, "ELECTION_NOT_NEEDED", "Leader election not needed"),
            result(
                "c", 0, "PREFERRED_LEADER_NOT_AVAILABLE", "The preferred leader was not available."
            ),
            result("c", 1, "UNKNOWN_TOPIC_OR_PARTITION", "No such partition as c-1"),
        ]
        lines, failed = election_lines("PREFERRED", dict(results))
        assert lines == [
            "Successfully completed leader election (PREFERRED) for partitions a-2, a-10, b-0",
            "Valid replica already elected for partitions a-1",
            "Error completing leader election (PREFERRED) for partition: c-0: "
            "PREFERRED_LEADER_NOT_AVAILABLE: The preferred leader was not available.",
            "Error completing leader election (PREFERRED) for partition: c-1: "
            "UNKNOWN_TOPIC_OR_PARTITION: No such partition as c-1",
        ]
        assert [(tp.topic, error.name) for tp, error in failed] == [
            ("c", "PREFERRED_LEADER_NOT_AVAILABLE"),
            ("c", "UNKNOWN_TOPIC_OR_PARTITION"),
        ]

    def test_nothing_to_say_for_no_results(self) -> None:
        assert election_lines("UNCLEAN", {}) == ([], [])


class TestReassignment:
    def test_kafkas_compact_json_in_partition_order(self) -> None:
        assert reassignment_json({("b", 0): [3], ("a", 1): [2, 1], ("a", 0): [1, 2]}) == (
            '{"version":1,"partitions":['
            '{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
            '{"topic":"a","partition":1,"replicas":[2,1],"log_dirs":["any","any"]},'
            '{"topic":"b","partition":0,"replicas":[3],"log_dirs":["any"]}]}'
        )
        assert reassignment_json({}) == '{"version":1,"partitions":[]}'

    def test_generate_and_rollback_blocks(self) -> None:
        current, proposed = {("a", 0): [1]}, {("a", 0): [2]}
        assert generated_assignment(current, proposed) == [
            "Current partition replica assignment",
            reassignment_json(current),
            "",
            "Proposed partition reassignment configuration",
            reassignment_json(proposed),
        ]
        assert rollback_assignment(current) == [
            "Current partition replica assignment",
            "",
            reassignment_json(current),
            "",
            "Save this to use as the --reassignment-json-file option during rollback",
        ]

    def test_started_and_cancelled_lines(self) -> None:
        assert reassignment_started([("a", 1), ("a", 0)]) == (
            "Successfully started partition reassignments for a-0,a-1"
        )
        assert reassignment_started([("a", 1)]) == (
            "Successfully started partition reassignment for a-1"
        )
        assert reassignment_cancelled([("b", 0), ("a", 3)]) == (
            "Successfully cancelled partition reassignments for: a-3,b-0"
        )

    def test_verify_status(self) -> None:
        targets = {("a", 0): [3, 2], ("a", 1): [1, 2], ("a", 2): [1, 3], ("gone", 0): [1]}
        current = {("a", 1): [1, 2], ("a", 2): [2, 1]}
        assert reassignment_status(targets, {("a", 0)}, current) == [
            "Status of partition reassignment:",
            "Reassignment of partition a-0 is still in progress.",
            "Reassignment of partition a-1 is completed.",
            "There is no active reassignment of partition a-2, but replica set is 2,1 rather "
            "than 1,3.",
            "There is no active reassignment of partition gone-0, but replica set is  rather "
            "than 1.",
        ]

    def test_list(self) -> None:
        # AdminClient.list_partition_reassignments' answer
        ongoing = {
            TopicPartition("b", 0): {"replicas": [3, 2, 1], "adding": [3], "removing": [1]},
            TopicPartition("a", 4): {"replicas": [2, 1], "adding": [], "removing": [1]},
        }
        assert reassignments_list(ongoing) == [
            "Current partition reassignments:",
            "a-4: replicas: 2,1. removing: 1.",
            "b-0: replicas: 3,2,1. adding: 3. removing: 1.",
        ]
        assert reassignments_list({}) == ["No partition reassignments found."]
