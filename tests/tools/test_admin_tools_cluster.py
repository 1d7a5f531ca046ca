"""The admin tools as a user runs them, `python -m strom_tools ...` subprocesses, against three
combined nodes on loopback (NodeCluster): topics created, listed, described, altered and
deleted; the quorum and the cluster described; Kafka's error lines for what fails; a clear
error when no controller is reachable; and the tools still working after the active
controller is killed."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from strom.producer import Producer
from strom_api.v1 import client_pb2
from tests.data_plane.data_client import DataClient, error_name
from tests.node_integration.node_cluster import NodeCluster
from tests.raft_integration.process_cluster import free_ports, wait_until
from tests.tools.tool_runs import fails, ok


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    nodes = NodeCluster(str(tmp_path_factory.mktemp("admin-tools")), 3)
    try:
        nodes.start_all()

        def all_unfenced() -> bool:
            described = nodes.describe_cluster()
            return described is not None and {
                b.broker_id for b in described.brokers if not b.fenced
            } == {1, 2, 3}

        wait_until(all_unfenced, 30, "three unfenced brokers")
        yield nodes
    finally:
        nodes.stop_all()


CONTROLLERS = [1, 2, 3]  # three combined nodes: each a controller and a broker


def boot(cluster: NodeCluster, option: str = "--bootstrap-controller") -> list[str]:
    return [option, ",".join(f"127.0.0.1:{cluster.controller_port[i]}" for i in CONTROLLERS)]


TOPIC_LINE = re.compile(
    r"Topic: (?P<name>\S+)\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: (?P<count>\d+)"
    r"\tReplicationFactor: (?P<factor>\d+)\tConfigs: (?P<configs>.*)"
)


def test_topics_create_list_describe_alter_delete(cluster: NodeCluster) -> None:
    topics = ["topics", *boot(cluster)]
    create = ["--create", "--topic", "orders", "--partitions", "3", "--replication-factor", "2"]
    created = ok(*topics, *create, "--config", "retention.ms=60000")
    assert created == ["Created topic orders."]
    assert ok(*topics, "--create", "--topic", "audit", "--replica-assignment", "3:1,1:2") == [
        "Created topic audit."
    ]
    assert ok(*topics, "--list") == ["audit", "orders"]

    header, *partitions = ok(*topics, "--describe", "--topic", "orders")
    match = TOPIC_LINE.fullmatch(header)
    assert match is not None, header
    assert match.group("name", "count", "factor", "configs") == (
        "orders",
        "3",
        "2",
        "retention.ms=60000",
    )
    assert len(partitions) == 3
    for pid, line in enumerate(partitions):
        fields = dict(f.split(": ", 1) for f in line.strip("\t").split("\t"))
        assert (fields["Topic"], fields["Partition"]) == ("orders", str(pid))
        replicas = fields["Replicas"].split(",")
        assert len(replicas) == 2 and fields["Leader"] in replicas
        assert sorted(fields["Isr"].split(",")) == sorted(replicas)

    # An explicit assignment: the first replica leads.
    synonym = ["topics", *boot(cluster, "--bootstrap-server")]
    header, *partitions = ok(*synonym, "--describe", "--topic", "audit")
    assert TOPIC_LINE.fullmatch(header) is not None
    assert partitions == [
        "\tTopic: audit\tPartition: 0\tLeader: 3\tReplicas: 3,1\tIsr: 3,1",
        "\tTopic: audit\tPartition: 1\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
    ]
    assert ok(*topics, "--describe", "--under-replicated-partitions") == []

    assert ok(*topics, "--alter", "--topic", "orders", "--partitions", "5") == []
    header = ok(*topics, "--describe", "--topic", "orders")[0]
    assert "\tPartitionCount: 5\t" in header

    assert ok(*topics, "--delete", "--topic", "audit") == []
    assert ok(*topics, "--list") == ["orders"]

    # What fails: one line each, Kafka's error names and wording.
    assert fails(*topics, "--create", "--topic", "orders") == (
        "Error while executing topic command : TOPIC_ALREADY_EXISTS: Topic 'orders' already exists."
    )
    assert fails(*topics, "--create", "--topic", "wide", "--replication-factor", "4").startswith(
        "Error while executing topic command : INVALID_REPLICATION_FACTOR: "
        "Unable to replicate the partition 4 time(s)"
    )
    assert fails(*topics, "--describe", "--topic", "audit") == (
        "Error while executing topic command : UNKNOWN_TOPIC_OR_PARTITION: "
        "Topic 'audit' does not exist as expected"
    )
    assert fails(*topics, "--alter", "--topic", "orders", "--partitions", "2") == (
        "Error while executing topic command : INVALID_PARTITIONS: "
        "Topic currently has 5 partitions, which is higher than the requested 2."
    )
    assert "INVALID_CONFIG" in fails(
        *topics, "--create", "--topic", "bad", "--config", "retention.ms=soon"
    )
    assert ok(*topics, "--list") == ["orders"]


def test_topics_min_isr_filters_and_exclude_internal(cluster: NodeCluster) -> None:
    """--at-min-isr-partitions and --under-min-isr-partitions compare each partition's ISR
    with its topic's min.insync.replicas (asked with DescribeConfigs, as Kafka's tool asks);
    --exclude-internal leaves __consumer_offsets out of --list and --describe."""
    topics = ["topics", *boot(cluster)]
    for name, min_isr in (("guarded", "2"), ("strict", "3")):
        ok(*topics, "--create", "--topic", name, "--partitions", "2", "--replication-factor", "2",
           "--config", f"min.insync.replicas={min_isr}")  # fmt: skip
    wait_until(
        lambda: len(ok(*topics, "--describe", "--topic", "guarded|strict")) == 6,
        20,
        "both topics described",
    )

    def partitions(*flags: str) -> list[str]:
        lines = ok(*topics, "--describe", "--topic", "guarded|strict", *flags)
        return [" ".join(line.split("\t")[1:3]) for line in lines]

    assert partitions("--at-min-isr-partitions") == [
        "Topic: guarded Partition: 0",
        "Topic: guarded Partition: 1",
    ]
    assert partitions("--under-min-isr-partitions") == [
        "Topic: strict Partition: 0",
        "Topic: strict Partition: 1",
    ]

    client = DataClient({1: f"127.0.0.1:{cluster.broker_port[1]}"})

    def offsets_topic_made() -> bool:  # a group's coordinator is asked for: it is created
        found = client.stub(1).FindCoordinator(client_pb2.FindCoordinatorRequest(key="g"))
        return error_name(found.error) == "NONE"

    wait_until(offsets_topic_made, 30, "__consumer_offsets")
    assert "__consumer_offsets" in ok(*topics, "--list")
    assert "__consumer_offsets" not in ok(*topics, "--list", "--exclude-internal")
    described = ok(*topics, "--describe", "--exclude-internal")
    assert not any("__consumer_offsets" in line for line in described)
    assert any("__consumer_offsets" in line for line in ok(*topics, "--describe"))


def test_log_dirs_describe_lists_each_brokers_replicas(cluster: NodeCluster) -> None:
    """kafka-log-dirs.sh --describe: every broker asked (or those of --broker-list), each
    replica of the --topic-list topics listed once per broker holding it, with its size."""
    ok("topics", *boot(cluster), "--create", "--topic", "on-disk", "--partitions", "2",
       "--replication-factor", "2")  # fmt: skip
    brokers = [
        "--bootstrap-server",
        ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in CONTROLLERS),
    ]
    with Producer(brokers[1], acks="all") as producer:
        for _ in range(20):
            producer.send("on-disk", b"x" * 100, partition=0)
        producer.flush()

    def described(*more: str) -> dict[str, Any]:
        lines = ok("log-dirs", *brokers, "--describe", *more)
        assert lines[0] == "Querying brokers for log directories information"
        assert lines[1].startswith("Received log directory information from brokers ")
        assert len(lines) == 3
        return json.loads(lines[2])

    def replicas() -> list[tuple[str, int, int]] | None:
        answer = described("--topic-list", "on-disk")
        found = [
            (p["partition"], p["size"], p["offsetLag"])
            for b in answer["brokers"]
            for d in b["logDirs"]
            if d["error"] is None
            for p in d["partitions"]
        ]
        # Both replicas of partition 0 hold the records (the follower may still be fetching).
        sizes = [size for name, size, _ in found if name == "on-disk-0"]
        return found if len(sizes) == 2 and min(sizes) > 2000 else None

    found = wait_until(replicas, 20, "both replicas of on-disk-0 written")
    assert sorted(name for name, _, _ in found) == [
        "on-disk-0",
        "on-disk-0",
        "on-disk-1",
        "on-disk-1",
    ]
    assert all(lag == 0 for _, _, lag in found)
    assert {size for name, size, _ in found if name == "on-disk-1"} == {0}

    one = described("--broker-list", "2")
    assert [b["broker"] for b in one["brokers"]] == [2] and one["version"] == 1
    assert all(d["logDir"] and d["error"] is None for d in one["brokers"][0]["logDirs"])
    assert (
        "The given brokers do not exist from --broker-list: 9. Current existent brokers: 1,2,3"
        in (fails("log-dirs", *brokers, "--describe", "--broker-list", "9"))
    )


def test_metadata_quorum_describe(cluster: NodeCluster) -> None:
    leader = cluster.active_controller()
    status = ok("metadata-quorum", *boot(cluster), "describe", "--status")
    assert [line.split(":")[0] for line in status] == [
        "ClusterId",
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "MaxFollowerLagTimeMs",
        "CurrentVoters",
        "CurrentObservers",
    ]
    assert status[0] == f"ClusterId:              {cluster.cluster_id}"
    assert status[1] == f"LeaderId:               {leader}"
    assert int(status[3].split()[1]) > 0
    assert status[6:] == ["CurrentVoters:          [1,2,3]", "CurrentObservers:       []"]

    header, *rows = ok("metadata-quorum", *boot(cluster), "describe", "--replication")
    assert header.split() == [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    table = [row.split() for row in rows]
    assert [(int(r[0]), r[5]) for r in table][0] == (leader, "Leader")
    assert sorted(r[5] for r in table) == ["Follower", "Follower", "Leader"]
    assert {int(r[0]) for r in table} == {1, 2, 3}


def test_cluster_describe_and_cluster_id(cluster: NodeCluster) -> None:
    assert ok("cluster", "cluster-id", *boot(cluster)) == [f"Cluster ID: {cluster.cluster_id}"]
    lines = ok("cluster", "describe", *boot(cluster))
    assert lines[0] == f"ClusterId:              {cluster.cluster_id}"
    assert lines[1] == f"ControllerId:           {cluster.active_controller()}"
    brokers = [line.split() for line in lines[5:]]
    assert lines[4].split() == ["BrokerId", "State", "Rack", "BrokerEpoch", "Endpoints"]
    assert [(b[0], b[1], b[2], b[4]) for b in brokers] == [
        (str(i), "unfenced", "null", f"PLAINTEXT://127.0.0.1:{cluster.broker_port[i]}")
        for i in cluster.ids
    ]


def test_no_controller_reachable_is_one_clear_line() -> None:
    port = free_ports(1)[0]
    line = fails("topics", "--bootstrap-controller", f"127.0.0.1:{port}", "--list")
    assert line.startswith(
        f"Error while executing topic command : NETWORK_EXCEPTION: No controller answered at "
        f"127.0.0.1:{port}"
    )
    quorum = ["metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{port}"]
    line = fails(*quorum, "describe", "--status")
    assert line.startswith("Error while executing metadata-quorum command : NETWORK_EXCEPTION")


def test_the_tools_follow_the_new_active_controller_after_a_kill(cluster: NodeCluster) -> None:
    first = cluster.active_controller()
    create = ["--create", "--topic", "spread", "--partitions", "3", "--replication-factor", "3"]
    ok("topics", *boot(cluster), *create)
    cluster.stop(first, signal.SIGKILL)
    # The voters' form, id@host:port: NOT_CONTROLLER's active id leads straight there.
    ids = ",".join(f"{i}@127.0.0.1:{cluster.controller_port[i]}" for i in CONTROLLERS)
    voters = ["--bootstrap-controller", ids]

    status = ok("metadata-quorum", *voters, "describe", "--status")  # waits out the election
    new_leader = int(status[1].split()[1])
    assert new_leader in set(cluster.ids) - {first}

    def first_fenced() -> list[str] | None:
        lines = ok("cluster", "describe", *voters)
        states = {line.split()[0]: line.split()[1] for line in lines[5:]}
        return lines if states[str(first)] == "fenced" else None

    wait_until(first_fenced, 15, f"broker {first} fenced")
    under = wait_until(
        lambda: ok("topics", *voters, "--describe", "--under-replicated-partitions"),
        10,
        "under-replicated partitions",
    )
    assert {line.split("\t")[1] for line in under} >= {"Topic: spread"}
    assert all(f"Leader: {first}\t" not in line for line in under)
