"""`strom configs`, `strom leader-election` and `strom reassign-partitions` as a user runs them,
`python -m strom_tools ...` subprocesses, against three combined nodes on loopback
(NodeCluster, with the automatic leader rebalance off so that only the tools move leaders).

A reassignment that must stay in progress adds a replica on a broker paused with SIGSTOP
(it cannot catch up); one that really copies data does so under `--throttle`, and is timed
against it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom_api.v1 import controller_pb2
from tests.data_plane.data_client import DataClient, batch
from tests.node_integration.node_cluster import NodeCluster
from tests.raft_integration.process_cluster import wait_until
from tests.tools.tool_runs import fails, ok, strom

NODES = [1, 2, 3]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    nodes = NodeCluster(
        str(tmp_path_factory.mktemp("admin-tools-2")),
        3,
        # A 6 s broker session, not FAST's 1.5 s: on a loaded machine (two pytest workers
        # on two cores) a broker missed 1.5 s of heartbeats and lost a leadership the test
        # then expected it to hold. The fencing test below still sees a fence in seconds.
        extra={"auto.leader.rebalance.enable": "false", "broker.session.timeout.ms": "6000"},
    )
    try:
        nodes.start_all()
        wait_until(lambda: _unfenced(nodes) == set(NODES), 30, "three unfenced brokers")
        yield nodes
    finally:
        nodes.stop_all()


def _unfenced(nodes: NodeCluster) -> set[int] | None:
    described = nodes.describe_cluster()
    if described is None:
        return None
    return {b.broker_id for b in described.brokers if not b.fenced}


def boot(cluster: NodeCluster) -> list[str]:
    return [
        "--bootstrap-controller",
        ",".join(f"127.0.0.1:{cluster.controller_port[i]}" for i in NODES),
    ]


def partitions(cluster: NodeCluster, topic: str) -> list[dict[str, str]]:
    """kafka-topics.sh --describe's partition lines as fields."""
    lines = ok("topics", *boot(cluster), "--describe", "--topic", topic)[1:]
    return [dict(f.split(": ", 1) for f in line.strip("\t").split("\t")) for line in lines]


def json_file(tmp_path: Path, name: str, document: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def test_configs_alter_and_describe(cluster: NodeCluster) -> None:
    b = boot(cluster)
    ok("topics", *b, "--create", "--topic", "orders", "--partitions", "3")
    topic = ["configs", *b, "--entity-type", "topics", "--entity-name", "orders"]
    add = ["--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]"]
    assert ok(*topic, "--alter", *add) == ["Completed updating config for topic orders."]
    header, *lines = ok(*topic, "--describe")
    assert header == "Dynamic configs for topic orders are:"
    assert [line.split(" synonyms={")[0] for line in lines] == [
        "  cleanup.policy=compact,delete sensitive=false",
        "  retention.ms=1000 sensitive=false",
    ]
    assert lines[1].startswith(
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000"
    )

    default = ["configs", *b, "--entity-type", "brokers", "--entity-default"]
    assert ok(*default, "--alter", "--add-config", "log.retention.ms=5000") == [
        "Completed updating default config for brokers in the cluster."
    ]
    assert ok(*default, "--describe") == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=5000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000}",
    ]
    # Without its own value the topic takes the cluster-wide default's.
    assert ok(*topic, "--alter", "--delete-config", "retention.ms") == [
        "Completed updating config for topic orders."
    ]
    header, *lines = ok(*topic, "--describe", "--all")
    assert header == "All configs for topic orders are:"
    retention = next(line for line in lines if line.startswith("  retention.ms="))
    assert retention.startswith(
        "  retention.ms=5000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000"
    )
    assert len(lines) > 10  # every topic config, defaults included
    assert ok(*default, "--alter", "--delete-config", "log.retention.ms") == [
        "Completed updating default config for brokers in the cluster."
    ]
    assert ok(*default, "--describe") == ["Default configs for brokers in the cluster are:"]

    assert fails(*topic, "--alter", "--delete-config", "retention.ms") == (
        "Error while executing config command : INVALID_CONFIG: Invalid config(s): retention.ms"
    )
    assert fails(*topic, "--alter", "--add-config", "retention.ms=soon").startswith(
        "Error while executing config command : INVALID_CONFIG: "
    )
    assert fails("configs", *b, "--describe", "--topic", "nope") == (
        "Error while executing config command : UNKNOWN_TOPIC_OR_PARTITION: "
        "The topic 'nope' doesn't exist and doesn't have dynamic config."
    )


def test_leader_election_on_a_healthy_cluster_is_not_needed(cluster: NodeCluster) -> None:
    b = boot(cluster)
    ok("topics", *b, "--create", "--topic", "steady", "--partitions", "2")
    preferred = ["leader-election", *b, "--election-type", "preferred"]
    assert ok(*preferred, "--topic", "steady", "--partition", "1") == [
        "Valid replica already elected for partitions steady-1"
    ]
    # Every partition: those that need no election are left out, so nothing is printed.
    assert ok(*preferred, "--all-topic-partitions") == []
    unclean = ["leader-election", *b, "--election-type", "UNCLEAN"]
    assert ok(*unclean, "--topic", "steady", "--partition", "0") == [
        "Valid replica already elected for partitions steady-0"
    ]
    result = strom(*preferred, "--topic", "nope", "--partition", "0")
    assert result.returncode == 1
    assert result.stdout == (
        "Error completing leader election (PREFERRED) for partition: nope-0: "
        "UNKNOWN_TOPIC_OR_PARTITION: No such topic as nope\n"
    )
    assert result.stderr == (
        "Error while executing leader-election command : UNKNOWN_TOPIC_OR_PARTITION: "
        "1 replica(s) could not be elected\n"
    )


def test_reassign_generate_execute_list_verify_cancel(cluster: NodeCluster, tmp_path: Path) -> None:
    b = boot(cluster)
    tool = ["reassign-partitions", *b]
    ok("topics", *b, "--create", "--topic", "moves", "--replica-assignment", "1:2,2:1")

    to_move = json_file(tmp_path, "topics.json", {"topics": [{"topic": "moves"}], "version": 1})
    assert ok(
        *tool, "--generate", "--topics-to-move-json-file", to_move, "--broker-list", "1,2,3"
    ) == [
        "Current partition replica assignment",
        '{"version":1,"partitions":['
        '{"topic":"moves","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"moves","partition":1,"replicas":[2,1],"log_dirs":["any","any"]}]}',
        "",
        "Proposed partition reassignment configuration",
        '{"version":1,"partitions":['
        '{"topic":"moves","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"moves","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}',
    ]

    # moves-0 gains broker 3 (paused with SIGSTOP, so it cannot catch up and the move stays
    # in progress) and loses 1; moves-1 only swaps its preferred leader, which completes at
    # once.
    target = json_file(
        tmp_path,
        "target.json",
        {
            "version": 1,
            "partitions": [
                {"topic": "moves", "partition": 0, "replicas": [3, 2]},
                {"topic": "moves", "partition": 1, "replicas": [1, 2]},
            ],
        },
    )
    file = ["--reassignment-json-file", target]
    cluster.procs[3].send_signal(signal.SIGSTOP)
    try:
        _paused_broker_part(cluster, tool, file, b, tmp_path)
    finally:
        cluster.procs[3].send_signal(signal.SIGCONT)
    cluster.wait_for_brokers()


def _paused_broker_part(
    cluster: NodeCluster, tool: list[str], file: list[str], b: list[str], tmp_path: Path
) -> None:
    assert ok(*tool, "--execute", *file) == [
        "Current partition replica assignment",
        "",
        '{"version":1,"partitions":['
        '{"topic":"moves","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"moves","partition":1,"replicas":[2,1],"log_dirs":["any","any"]}]}',
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started partition reassignments for moves-0,moves-1",
    ]
    assert ok(*tool, "--list") == [
        "Current partition reassignments:",
        "moves-0: replicas: 3,2,1. adding: 3. removing: 1.",
    ]
    assert ok(*tool, "--verify", *file) == [
        "Status of partition reassignment:",
        "Reassignment of partition moves-0 is still in progress.",
        "Reassignment of partition moves-1 is completed.",
    ]
    assert fails(*tool, "--execute", *file).startswith(
        "Error while executing reassign-partitions command : REASSIGNMENT_IN_PROGRESS: "
        "Cannot execute because there is an existing partition assignment."
    )

    # moves-1's new preferred replica (1) is in the ISR but does not lead: a preferred
    # election moves leadership to it. moves-0's (3, being added) is not in the ISR.
    assert partitions(cluster, "moves")[1]["Leader"] == "2"
    election = json_file(
        tmp_path,
        "election.json",
        {"partitions": [{"topic": "moves", "partition": 0}, {"topic": "moves", "partition": 1}]},
    )
    result = strom(
        "leader-election", *b, "--election-type", "preferred", "--path-to-json-file", election
    )
    assert result.returncode == 1
    [moves1, moves0] = result.stdout.splitlines()
    # On a loaded machine broker 2 can miss heartbeats and be fenced between the describe
    # above and the election, moving moves-1's leadership to 1 first: then the tool says
    # so as kafka-leader-election.sh does (ELECTION_NOT_NEEDED).
    assert moves1 in (
        "Successfully completed leader election (PREFERRED) for partitions moves-1",
        "Valid replica already elected for partitions moves-1",
    ), result.stdout
    assert moves0 == (
        "Error completing leader election (PREFERRED) for partition: moves-0: "
        "PREFERRED_LEADER_NOT_AVAILABLE: The preferred leader was not available."
    )
    assert result.stderr == (
        "Error while executing leader-election command : PREFERRED_LEADER_NOT_AVAILABLE: "
        "1 replica(s) could not be elected\n"
    )
    assert partitions(cluster, "moves")[1]["Leader"] == "1"

    assert ok(*tool, "--cancel", *file) == [
        "Successfully cancelled partition reassignment for: moves-0",
        "None of the specified partition moves are active.",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic moves",
    ]
    assert ok(*tool, "--list") == ["No partition reassignments found."]
    moves0 = partitions(cluster, "moves")[0]
    assert sorted(moves0["Replicas"].split(",")) == ["1", "2"]  # broker 3 gone, 1 back
    assert "Adding Replicas" not in moves0
    status = ok(*tool, "--verify", *file)
    assert status == [
        "Status of partition reassignment:",
        f"There is no active reassignment of partition moves-0, but replica set is "
        f"{moves0['Replicas']} rather than 3,2.",
        "Reassignment of partition moves-1 is completed.",
    ]
    assert ok(*tool, "--cancel", *file, "--preserve-throttles") == [
        "None of the specified partition reassignments are active.",
        "None of the specified partition moves are active.",
    ]


THROTTLE = 10 * 1024 * 1024  # bytes/s
BATCHES, RECORDS, RECORD_BYTES = 25, 10, 100_000  # about 24 MiB, batches of 1 MB


def produce_bulk(cluster: NodeCluster, topic: str) -> int:
    """Fills partition 0 of `topic` with BATCHES batches of incompressible records; returns
    the bytes produced."""
    data = DataClient({n: f"127.0.0.1:{cluster.broker_port[n]}" for n in NODES})
    leader = data.leader(topic, 0)
    total = 0
    for _ in range(BATCHES):
        records = batch([os.urandom(RECORD_BYTES) for _ in range(RECORDS)])
        answer = data.produce_raw(leader, topic, 0, records, acks=1)
        assert answer.error.code == 0, answer
        total += len(records)
    return total


def reassignment_done(cluster: NodeCluster, topic: str) -> bool:
    listed = cluster.call(
        "ListPartitionReassignments", controller_pb2.ListPartitionReassignmentsRequest()
    )
    return not any(r.partition.topic == topic for r in listed.reassignments)


def test_a_throttled_reassignment_copies_at_its_rate_and_verify_clears_the_throttle(
    cluster: NodeCluster, tmp_path: Path
) -> None:
    """Kafka's --throttle: the copy of ~24 MiB to a broker that has none of it takes at least
    about bytes/rate (without the throttle it takes well under a second on loopback), and
    --verify removes the throttle configs once the move is done."""
    b = boot(cluster)
    tool = ["reassign-partitions", *b]
    ok("topics", *b, "--create", "--topic", "copied", "--replica-assignment", "1")
    size = produce_bulk(cluster, "copied")
    target = json_file(
        tmp_path,
        "copy.json",
        {"version": 1, "partitions": [{"topic": "copied", "partition": 0, "replicas": [2]}]},
    )
    file = ["--reassignment-json-file", target]
    # Dynamic fetcher settings reach the follower's fetchers too (Kafka's resize message).
    default = ["configs", *b, "--entity-type", "brokers", "--entity-default"]
    ok(*default, "--alter", "--add-config", "num.replica.fetchers=2")
    wait_until(
        lambda: "Resizing fetcher thread pool size from 1 to 2" in cluster.log_text(2),
        10,
        "broker 2 to resize its fetchers",
    )
    leader_rate = ("kafka_server_leaderreplication_byte_rate", ())
    follower_rate = ("kafka_server_followerreplication_byte_rate", ())
    assert cluster.scrape(1)[leader_rate] == cluster.scrape(2)[follower_rate] == 0

    lines = ok(*tool, "--execute", *file, "--throttle", str(THROTTLE))
    start = time.monotonic()
    assert lines[-3:] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.",
        f"The inter-broker throttle limit was set to {THROTTLE} B/s",
        "Successfully started partition reassignment for copied-0",
    ]
    topic_configs = ["configs", *b, "--entity-type", "topics", "--entity-name", "copied"]
    described = "\n".join(ok(*topic_configs, "--describe"))
    assert "leader.replication.throttled.replicas=0:1 " in described
    assert "follower.replication.throttled.replicas=0:2 " in described
    wait_until(lambda: reassignment_done(cluster, "copied"), 60, "the throttled copy")
    elapsed = time.monotonic() - start
    # Rates since the scrapes above: the source as leader and the destination as follower
    # moved the throttled bytes (about size / (elapsed + the time before the execute)).
    assert 0 < cluster.scrape(1)[leader_rate] < 1.5 * THROTTLE
    assert 0 < cluster.scrape(2)[follower_rate] < 1.5 * THROTTLE

    # The leader's bucket starts empty when the throttle is set, and one fetch (1 MiB) may
    # overshoot it: the copy cannot take much less than size/rate; the margin is generous.
    assert elapsed >= 0.7 * size / THROTTLE, f"{size} bytes copied in {elapsed:.2f} s"
    assert elapsed < 4 * size / THROTTLE + 5, f"far slower than the throttle: {elapsed:.2f} s"
    assert partitions(cluster, "copied")[0]["Replicas"] == "2"

    assert ok(*tool, "--verify", *file) == [
        "Status of partition reassignment:",
        "Reassignment of partition copied-0 is completed.",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic copied",
    ]
    assert ok(*topic_configs, "--describe") == ["Dynamic configs for topic copied are:"]
    ok(*default, "--alter", "--delete-config", "num.replica.fetchers")
    for node in NODES:
        broker = ["configs", *b, "--entity-type", "brokers", "--entity-name", str(node)]
        assert "throttled" not in "\n".join(ok(*broker, "--describe"))


def test_preferred_election_around_a_broker_restart(cluster: NodeCluster) -> None:
    b = boot(cluster)
    victim = next(n for n in NODES if n != cluster.active_controller())  # the quorum stays
    others = [n for n in NODES if n != victim]
    assignment = ":".join(str(n) for n in [victim, *others])
    ok("topics", *b, "--create", "--topic", "lead", "--replica-assignment", assignment)
    elect = ["leader-election", *b, "--election-type", "preferred"]
    one = ["--topic", "lead", "--partition", "0"]
    assert ok(*elect, *one) == ["Valid replica already elected for partitions lead-0"]

    cluster.stop(victim, signal.SIGKILL)
    wait_until(lambda: victim not in (_unfenced(cluster) or {victim}), 15, "the broker fenced")
    [p0] = wait_until(
        lambda: [p for p in partitions(cluster, "lead") if p["Leader"] != str(victim)],
        10,
        "a new leader",
    )
    assert p0["Leader"] in {str(n) for n in others}
    assert str(victim) not in p0["Isr"].split(",")
    not_available = (
        "Error while executing leader-election command : PREFERRED_LEADER_NOT_AVAILABLE: "
        "1 replica(s) could not be elected"
    )
    result = strom(*elect, *one)
    assert (result.returncode, result.stderr.strip()) == (1, not_available)
    assert result.stdout == (
        "Error completing leader election (PREFERRED) for partition: lead-0: "
        "PREFERRED_LEADER_NOT_AVAILABLE: The preferred leader was not available.\n"
    )

    # Back, unfenced, and once it has caught up, in the ISR again: the preferred election
    # moves leadership back to it.
    cluster.start(victim)
    wait_until(lambda: _unfenced(cluster) == set(NODES), 30, "the broker unfenced")
    wait_until(
        lambda: str(victim) in partitions(cluster, "lead")[0]["Isr"].split(","),
        30,
        "the broker back in the ISR",
    )
    assert ok(*elect, *one) == [
        "Successfully completed leader election (PREFERRED) for partitions lead-0"
    ]
    assert partitions(cluster, "lead")[0]["Leader"] == str(victim)
