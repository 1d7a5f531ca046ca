"""Every listener is bound and advertised.listeners is what others are told (issue 17).

Three combined nodes with two broker listeners each: CLIENT binds every interface and is
advertised as `localhost` (as a pod binds 0.0.0.0 and advertises its DNS name), REPLICATION
binds 127.0.0.1 and carries replication (inter.broker.listener.name). Before, only the first
broker listener was bound and registered as it was bound, so followers fetching over
REPLICATION reached nothing and the ISR never grew."""

from __future__ import annotations

import subprocess
import sys

import grpc
import pytest
from node_cluster import ROOT, NodeCluster, wait_until

from strom.producer import Producer
from strom_api.v1 import client_pb2, client_pb2_grpc, controller_pb2
from tests.raft_integration.process_cluster import free_ports


class TwoListenerCluster(NodeCluster):
    def _write_config(self, node: int) -> None:
        if not hasattr(self, "replication_port"):
            self.replication_port = dict(zip(self.ids, free_ports(len(self.ids)), strict=True))
        super()._write_config(node)
        client, replication = self.broker_port[node], self.replication_port[node]
        with open(self.config_path(node), "a") as f:  # later lines win
            f.write(
                f"listeners=CLIENT://0.0.0.0:{client},REPLICATION://127.0.0.1:{replication},"
                f"CONTROLLER://127.0.0.1:{self.controller_port[node]}\n"
                f"advertised.listeners=CLIENT://localhost:{client},"
                f"REPLICATION://127.0.0.1:{replication}\n"
                "inter.broker.listener.name=REPLICATION\n"
                "listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT,"
                "CONTROLLER:PLAINTEXT\n"
            )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("listeners"))
    cluster = TwoListenerCluster(base, 3)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        yield cluster
    finally:
        cluster.stop_all()


def metadata(port: int) -> list[tuple[int, str, int]]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]
        response = stub.Metadata(client_pb2.MetadataRequest(), timeout=10)
    return sorted((b.node_id, b.host, b.port) for b in response.brokers)


def test_metadata_carries_the_advertised_endpoints_of_the_listener_asked(cluster):
    ids = cluster.ids
    on_client = [(i, "localhost", cluster.broker_port[i]) for i in ids]
    on_replication = [(i, "127.0.0.1", cluster.replication_port[i]) for i in ids]
    for node in ids:  # each broker answers once its metadata image has every broker
        wait_until(lambda n=node: metadata(cluster.broker_port[n]) == on_client, 10, "CLIENT")
        assert metadata(cluster.replication_port[node]) == on_replication


def test_followers_replicate_over_the_inter_broker_listener(cluster):
    created = cluster.call(
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(
                    name="orders",
                    num_partitions=3,
                    replication_factor=3,
                    configs={"min.insync.replicas": "3"},
                )
            ]
        ),
    )
    assert created.topics[0].error.code == 0, created
    # The producer bootstraps on CLIENT and connects where Metadata points: localhost.
    with Producer(f"localhost:{cluster.broker_port[1]}", acks=-1) as producer:
        futures = [producer.send("orders", b"v%d" % i, partition=i % 3) for i in range(30)]
        producer.flush()
        assert all(f.get(timeout=30).offset >= 0 for f in futures)  # every ISR member has it

    def fully_replicated() -> bool:
        described = cluster.call(
            "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=["orders"])
        )
        return all(len(p.isr) == 3 for p in described.topics[0].partitions)

    wait_until(fully_replicated, 20, "every replica in sync")


def test_a_broker_listener_bound_to_every_interface_needs_an_advertised_one(tmp_path):
    cluster = NodeCluster(str(tmp_path), 1)
    with open(cluster.config_path(1), "a") as f:
        f.write(
            f"listeners=PLAINTEXT://0.0.0.0:{cluster.broker_port[1]},"
            f"CONTROLLER://127.0.0.1:{cluster.controller_port[1]}\n"
        )
    result = subprocess.run(
        [sys.executable, "-m", "strom_tools", "server", cluster.config_path(1)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "ERROR INVALID_CONFIG: advertised.listeners cannot use the nonroutable meta-address "
        "0.0.0.0 (PLAINTEXT): set advertised.listeners to a routable host for it"
    ]
