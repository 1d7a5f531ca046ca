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

from strom.admin import AdminClient, OffsetSpec
from strom.fetcher import TopicPartition
from strom.producer import Producer
from strom_api.v1 import client_pb2
from tests.data_plane.data_client import DataClient, error_name
from tests.node_integration.node_cluster import NodeCluster
from tests.raft_integration.process_cluster import free_ports, wait_until
from tests.tools.tool_runs import fails, ok, run, strom


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


def _wait_for_offsets_topic(cluster: NodeCluster) -> None:
    """__consumer_offsets exists: a group's coordinator asked for creates it."""
    client = DataClient({1: f"127.0.0.1:{cluster.broker_port[1]}"})

    def made() -> bool:
        found = client.stub(1).FindCoordinator(client_pb2.FindCoordinatorRequest(key="g"))
        return error_name(found.error) == "NONE"

    wait_until(made, 30, "__consumer_offsets")


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

    _wait_for_offsets_topic(cluster)
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


def test_delete_records_moves_each_low_watermark(cluster: NodeCluster, tmp_path: Any) -> None:
    """kafka-delete-records.sh: each partition's records below its offset deleted (-1: below
    the high watermark), its new low watermark printed; an offset beyond the high watermark
    and a partition that does not exist are each partition's error, exit 1."""
    ok("topics", *boot(cluster), "--create", "--topic", "trimmed", "--partitions", "2",
       "--replication-factor", "2")  # fmt: skip
    bootstrap = ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in CONTROLLERS)
    with Producer(bootstrap, acks="all") as producer:
        for i in range(14):
            producer.send("trimmed", b"r", partition=0 if i < 10 else 1)
        producer.flush()
    plan = tmp_path / "offsets.json"

    def delete(*partitions: tuple[str, int, int]) -> list[str]:
        entries = [{"topic": t, "partition": p, "offset": o} for t, p, o in partitions]
        plan.write_text(json.dumps({"partitions": entries, "version": 1}))
        command = ["delete-records", "--bootstrap-server", bootstrap]
        return [*command, "--offset-json-file", str(plan)]

    assert ok(*delete(("trimmed", 0, 6), ("trimmed", 1, -1))) == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: trimmed-0\tlow_watermark: 6",
        "partition: trimmed-1\tlow_watermark: 4",
    ]
    with AdminClient(bootstrap) as admin:
        earliest = admin.list_offsets(
            {TopicPartition("trimmed", p): OffsetSpec.earliest() for p in (0, 1)}
        )
        assert [earliest[TopicPartition("trimmed", p)].offset for p in (0, 1)] == [6, 4]

    refused = strom(*delete(("trimmed", 0, 99), ("no-such-topic", 0, 1), ("trimmed", 1, 4)))
    assert refused.returncode == 1, refused.stderr
    lines = refused.stdout.splitlines()
    assert lines[2].startswith("partition: trimmed-0\terror: OFFSET_OUT_OF_RANGE: ")
    assert lines[3].startswith("partition: no-such-topic-0\terror: UNKNOWN_TOPIC_OR_PARTITION: ")
    assert lines[4] == "partition: trimmed-1\tlow_watermark: 4"
    assert "duplicate topic partitions: trimmed-0" in fails(
        *delete(("trimmed", 0, 7), ("trimmed", 0, 8))
    )


def test_delete_records_reads_kafkas_offset_file_and_refuses_the_rest(tmp_path: Any) -> None:
    from strom.errors import StromError
    from strom_tools.delete_records_command import read_offsets

    plan = tmp_path / "offsets.json"
    plan.write_text('{"partitions": [{"topic": "t", "partition": 2, "offset": -1}], "version": 1}')
    assert read_offsets(str(plan)) == {TopicPartition("t", 2): -1}
    for text, said in (
        ("{", "is not valid JSON"),
        ('{"version": 1}', "expected {"),
        ('{"partitions": [{"topic": "t", "partition": 0}]}', "each partition needs"),
        ('{"partitions": [{"topic": "t", "partition": true, "offset": 1}]}', "each partition"),
        ('{"partitions": [{"topic": "t", "partition": 0, "offset": -2}]}', "offset -2 of t-0"),
    ):
        plan.write_text(text)
        with pytest.raises(StromError) as caught:
            read_offsets(str(plan))
        assert caught.value.name == "INVALID_REQUEST" and said in caught.value.message, text


def test_get_offsets_prints_each_partitions_offset_at_a_time(cluster: NodeCluster) -> None:
    """kafka-get-offsets.sh: topic:partition:offset for each partition selected (--topic,
    --partitions or --topic-partitions patterns) at --time; no line where no record is
    that recent."""
    ok("topics", *boot(cluster), "--create", "--topic", "ledger", "--partitions", "3",
       "--replication-factor", "1")  # fmt: skip
    bootstrap = ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in CONTROLLERS)
    base = 1_700_000_000_000
    with Producer(bootstrap, acks="all") as producer:
        for i in range(5):
            producer.send("ledger", b"r", partition=0, timestamp_ms=base + i * 1000)
        for _ in range(2):
            producer.send("ledger", b"r", partition=1)
        producer.flush()
    offsets = ["get-offsets", "--bootstrap-server", bootstrap]
    assert ok(*offsets, "--topic", "ledger") == ["ledger:0:5", "ledger:1:2", "ledger:2:0"]
    assert ok(*offsets, "--topic", "led.*", "--time", "earliest", "--partitions", "0,2") == [
        "ledger:0:0",
        "ledger:2:0",
    ]
    assert ok(*offsets, "--topic-partitions", "ledger:1-,nothing-else:0") == [
        "ledger:1:2",
        "ledger:2:0",
    ]
    # The first record at or after base+2.5 s is offset 3; the largest timestamp is offset 4.
    assert ok(*offsets, "--topic-partitions", "ledger:0", "--time", str(base + 2500)) == [
        "ledger:0:3"
    ]
    assert ok(*offsets, "--topic-partitions", "ledger:-1", "--time", "max-timestamp") == [
        "ledger:0:4"
    ]
    assert "Could not match any topic-partitions with the specified filters" in fails(
        *offsets, "--topic", "ledger", "--partitions", "7"
    )
    # earliest-local is the log start (no tiered storage); latest-tiered has no offset.
    assert ok(*offsets, "--topic", "ledger", "--time", "-4") == [
        "ledger:0:0",
        "ledger:1:0",
        "ledger:2:0",
    ]
    assert ok(*offsets, "--topic", "ledger", "--time", "latest-tiered") == []

    _wait_for_offsets_topic(cluster)
    both = ["--topic", "__consumer_offsets|ledger", "--partitions", "0"]
    assert ok(*offsets, *both)[0].startswith("__consumer_offsets:0:")
    assert ok(*offsets, *both, "--exclude-internal-topics") == ["ledger:0:5"]


def test_get_offsets_refuses_what_kafkas_tool_refuses(capsys: Any) -> None:
    offsets = ["get-offsets", "--bootstrap-server", "127.0.0.1:1"]  # never reached
    for args, said in (
        (["--topic-partitions", "t:0", "--topic", "t"], "cannot be used with --topic"),
        (["--time", "soon"], "Malformed time argument soon. Please use -1 or latest"),
        (["--topic-partitions", "t:x"], "Invalid topic-partition pattern: t:x"),
    ):
        code, out, err = run(capsys, *offsets, *args)
        assert code == 1 and out == "" and said in err, (args, err)


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
