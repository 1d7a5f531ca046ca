"""Three combined nodes (`strom server`, process.roles=broker,controller) on loopback.

They format, start, elect an active controller, register as brokers and get unfenced;
a topic's partitions get local logs on their replicas; kill -9 of the active controller:
another takes over, fences the dead node's broker a session timeout later and moves its
leaderships; SIGTERM of a node does a controlled shutdown (its leaderships move first) and
exits cleanly; bad configuration or an unformatted directory is one line, not a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from node_cluster import ROOT, NodeCluster, wait_until

from strom_api.v1 import common_pb2, controller_pb2
from strom_api.v1 import metadata_pb2 as mpb


def unfenced(cluster: NodeCluster, expected: set[int]):
    def check():
        described = cluster.describe_cluster()
        if described is None:
            return None
        live = {b.broker_id for b in described.brokers if not b.fenced}
        return described if live == expected else None

    return check


def partitions(cluster: NodeCluster, topic: str):
    response = cluster.call("DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[topic]))
    return {p.partition: p for p in response.topics[0].partitions}


def test_three_combined_nodes(tmp_path):
    cluster = NodeCluster(str(tmp_path), 3)
    try:
        cluster.start_all()
        wait_until(unfenced(cluster, {1, 2, 3}), 30, "three unfenced brokers")
        first = cluster.active_controller()

        response = cluster.call(
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(
                        name="orders", num_partitions=6, replication_factor=2
                    )
                ]
            ),
        )
        assert not response.topics[0].HasField("error"), response
        # Any controller describes from its own image: a standby may not have replayed the
        # new topic yet.
        parts = wait_until(
            lambda: len(found := partitions(cluster, "orders")) == 6 and found,
            10,
            "the six partitions described",
        )
        for pid, p in parts.items():
            for replica in p.replicas:
                path = os.path.join(cluster.data_dir(replica), f"orders-{pid}")
                wait_until(lambda path=path: os.path.isdir(path), 10, f"log dir {path}")

        # Configs, reassignment and elections through the controller API.
        topic_resource = controller_pb2.ConfigResource(type=mpb.TOPIC, name="orders")
        altered = cluster.call(
            "IncrementalAlterConfigs",
            controller_pb2.IncrementalAlterConfigsRequest(
                resources=[
                    controller_pb2.IncrementalAlterConfigsRequest.Resource(
                        resource=topic_resource,
                        ops=[
                            controller_pb2.IncrementalAlterConfigsRequest.Op(
                                name="retention.ms", op=controller_pb2.SET, value="60000"
                            )
                        ],
                    )
                ]
            ),
        )
        assert not altered.results[0].HasField("error"), altered

        def retention() -> tuple[str, str]:
            described = cluster.call(
                "DescribeConfigs",
                controller_pb2.DescribeConfigsRequest(
                    resources=[topic_resource], keys=["retention.ms"]
                ),
            )
            [entry] = described.results[0].entries
            return (entry.value, entry.source)

        # Any controller describes from its own image: a standby may not have replayed the
        # change yet (the first controller that answers is asked).
        wanted = ("60000", "DYNAMIC_TOPIC_CONFIG")
        wait_until(lambda: retention() == wanted, 10, "the new retention.ms described")
        p0 = parts[0]
        target = [b for b in (1, 2, 3) if b not in p0.replicas] + [p0.replicas[0]]
        moved = cluster.call(
            "AlterPartitionReassignments",
            controller_pb2.AlterPartitionReassignmentsRequest(
                reassignments=[
                    controller_pb2.AlterPartitionReassignmentsRequest.Reassignment(
                        partition=controller_pb2.TopicPartition(topic="orders", partition=0),
                        replicas=mpb.BrokerIdList(ids=target),
                    )
                ]
            ),
        )
        assert not moved.results[0].HasField("error"), moved
        # The new replica catches up (the partition is empty) and the move completes.
        wait_until(
            lambda: (
                not cluster.call(
                    "ListPartitionReassignments", controller_pb2.ListPartitionReassignmentsRequest()
                ).reassignments
            ),
            20,
            "the reassignment to complete",
        )
        assert sorted(partitions(cluster, "orders")[0].replicas) == sorted(target)
        elected = cluster.call(
            "ElectLeaders",
            controller_pb2.ElectLeadersRequest(
                election_type=controller_pb2.PREFERRED,
                partitions=[controller_pb2.TopicPartition(topic="orders", partition=1)],
            ),
        )
        assert elected.results[0].error.code == common_pb2.ELECTION_NOT_NEEDED

        # kill -9 of the active controller (and broker): another controller takes over and
        # fences the dead broker once its session runs out; its leaderships move.
        cluster.stop(first, signal.SIGKILL)
        second = cluster.active_controller()
        assert second != first
        survivors = set(cluster.ids) - {first}
        wait_until(unfenced(cluster, survivors), 20, f"broker {first} fenced")
        for p in partitions(cluster, "orders").values():
            assert p.leader != first and first not in p.isr

        # SIGTERM: controlled shutdown moves the node's leaderships before it exits.
        led = {pid for pid, p in partitions(cluster, "orders").items() if p.leader == second}
        assert cluster.stop(second, signal.SIGTERM) == 0
        assert "controlled shutdown" in cluster.log_text(second)
        remaining = survivors - {second}
        wait_until(lambda: cluster.describe_cluster() is not None, 10, "a node answering")
        for pid in led:
            assert partitions(cluster, "orders")[pid].leader in remaining | {-1}
    finally:
        cluster.stop_all()


def test_bad_configuration_and_unformatted_directories_are_one_line_errors(tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("process.roles=broker\nnode.id=x\n")
    result = subprocess.run(
        [sys.executable, "-m", "strom_tools", "server", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "ERROR INVALID_CONFIG" in result.stderr and "node.id" in result.stderr
    config.write_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
        "listeners=PLAINTEXT://127.0.0.1:2,CONTROLLER://127.0.0.1:1\n"
        "controller.listener.names=CONTROLLER\n"
        f"log.dirs={tmp_path / 'data'}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "strom_tools", "server", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "format it first" in result.stderr


def test_three_controllers_and_three_brokers(tmp_path):
    """Split roles: a standby controller takes over from a killed active one and keeps
    fencing; a killed broker's partitions move to the other ISR members."""
    cluster = NodeCluster(str(tmp_path), 3, brokers=3)
    try:
        cluster.start_all()
        wait_until(unfenced(cluster, {4, 5, 6}), 30, "three unfenced brokers")
        response = cluster.call(
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(name="t", num_partitions=6, replication_factor=3)
                ]
            ),
        )
        assert not response.topics[0].HasField("error"), response
        first = cluster.active_controller()
        cluster.stop(first, signal.SIGKILL)
        assert cluster.active_controller() != first
        victim = 5
        cluster.stop(victim, signal.SIGKILL)
        wait_until(unfenced(cluster, {4, 6}), 20, f"broker {victim} fenced")
        for p in partitions(cluster, "t").values():
            assert p.leader in (4, 6) and victim not in p.isr

        # KIP-966: a broker stopped with SIGTERM leaves its epoch in the clean-shutdown
        # marker and comes back clean; after kill -9 it has none, and the controller treats
        # it as one that may have lost unflushed records.
        def epoch_of(broker: int) -> int:
            described = cluster.describe_cluster()
            assert described is not None
            return next(b.broker_epoch for b in described.brokers if b.broker_id == broker)

        def unclean_registrations() -> int:
            return sum(
                cluster.log_text(c).count("registered after an unclean shutdown")
                for c in cluster.controller_ids
            )

        cluster.start(victim)
        wait_until(unfenced(cluster, {4, 5, 6}), 30, f"broker {victim} back")
        assert unclean_registrations() == 1  # it was killed
        epoch = epoch_of(4)
        assert cluster.stop(4, signal.SIGTERM) == 0
        with open(os.path.join(cluster.data_dir(4), ".kafka_cleanshutdown")) as f:
            assert f.read() == f'{{"version": 0, "brokerEpoch": {epoch}}}'
        cluster.start(4)
        wait_until(unfenced(cluster, {4, 5, 6}), 30, "broker 4 back")
        assert unclean_registrations() == 1  # a clean restart
    finally:
        cluster.stop_all()


def test_a_second_node_on_a_serving_nodes_ports_refuses_to_start(tmp_path):
    """gRPC binds with SO_REUSEPORT unless told not to: a second `make run` once bound the
    ports of a running cluster's nodes and said "is up" (issue 17). Every node listener, the
    HTTP one of /metrics too, binds alone, and a port in use is one line and exit code 1."""
    cluster = NodeCluster(str(tmp_path / "first"), 1)
    try:
        cluster.start_all()
        cluster.wait_for_brokers()
        config = tmp_path / "second.properties"
        data = tmp_path / "second-data"
        text = open(cluster.config_path(1)).read()
        text = text.replace(cluster.data_dir(1), str(data))
        text = text.replace(
            f"prometheus.metrics.port={cluster.metrics_port[1]}", "prometheus.metrics.port=-1"
        )
        config.write_text(text)
        strom = [sys.executable, "-m", "strom_tools"]
        subprocess.run(
            [*strom, "storage", "format", "--config", str(config), "--cluster-id",
             cluster.cluster_id],
            check=True, capture_output=True, cwd=ROOT, timeout=60,
        )  # fmt: skip
        result = subprocess.run(
            [*strom, "server", str(config)], capture_output=True, text=True, cwd=ROOT, timeout=60
        )
        assert result.returncode == 1, result.stderr[-2000:]
        assert "Socket server failed to bind to" in result.stderr
        assert "Traceback" not in result.stderr, result.stderr[-2000:]
        assert cluster.procs[1].poll() is None  # the first node serves on

        # The Prometheus listener too, and first: a node of another cluster on the same
        # metrics port once started Raft and registered before it failed, with tracebacks.
        other = NodeCluster(str(tmp_path / "other"), 1)
        text = (
            open(other.config_path(1))
            .read()
            .replace(
                f"prometheus.metrics.port={other.metrics_port[1]}",
                f"prometheus.metrics.port={cluster.metrics_port[1]}",
            )
        )
        with open(other.config_path(1), "w") as f:
            f.write(text)
        result = subprocess.run(
            [*strom, "server", other.config_path(1)],
            capture_output=True, text=True, cwd=ROOT, timeout=60,
        )  # fmt: skip
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            f"ERROR Socket server failed to bind to 127.0.0.1:{cluster.metrics_port[1]} "
            "(prometheus.metrics.port): Address already in use"
        ]
        assert cluster.procs[1].poll() is None
        assert cluster.scrape(1)  # the first node's /metrics answers on
    finally:
        cluster.stop_all()
