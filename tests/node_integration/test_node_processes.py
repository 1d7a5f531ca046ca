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

from strom_api.v1 import controller_pb2


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
        parts = partitions(cluster, "orders")
        for pid, p in parts.items():
            for replica in p.replicas:
                path = os.path.join(cluster.data_dir(replica), f"orders-{pid}")
                wait_until(lambda path=path: os.path.isdir(path), 10, f"log dir {path}")

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
        [sys.executable, "-m", "strom.cli", "server", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "ERROR INVALID_CONFIG" in result.stderr and "node.id" in result.stderr
    config.write_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
        "listeners=CONTROLLER://127.0.0.1:1\ncontroller.listener.names=CONTROLLER\n"
        f"log.dirs={tmp_path / 'data'}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "strom.cli", "server", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "format it first" in result.stderr
