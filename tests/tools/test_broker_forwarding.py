"""Brokers forward the admin API to the active controller (KIP-590): the tools work with
nothing but broker addresses in --bootstrap-server, as Kafka's do, on a cluster whose
controllers and brokers are separate processes."""

from __future__ import annotations

import grpc
import pytest

from strom_api.v1 import controller_pb2, controller_pb2_grpc
from tests.node_integration.node_cluster import running_cluster
from tests.tools.tool_runs import ok


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(str(tmp_path_factory.mktemp("forwarding")), brokers=3) as cluster:
        yield cluster


def brokers(cluster):
    return ",".join(f"127.0.0.1:{cluster.broker_port[b]}" for b in (4, 5, 6))


def test_the_tools_work_through_brokers(cluster):
    b = ["--bootstrap-server", brokers(cluster)]
    assert ok(
        "topics",
        *b,
        "--create",
        "--topic",
        "via-broker",
        "--partitions",
        "3",
        "--replication-factor",
        "2",
    ) == ["Created topic via-broker."]
    assert "via-broker" in ok("topics", *b, "--list")
    described = ok("topics", *b, "--describe", "--topic", "via-broker")
    assert described[0].startswith("Topic: via-broker") and len(described) == 4
    assert any(
        "min.insync.replicas" in line
        for line in ok(
            "configs",
            *b,
            "--entity-type",
            "topics",
            "--entity-name",
            "via-broker",
            "--describe",
            "--all",
        )
    )
    status = ok("metadata-quorum", *b, "describe", "--status")
    assert any(line.startswith("LeaderId:") for line in status)


def test_broker_only_operations_are_not_offered(cluster):
    channel = grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[4]}")
    stub = controller_pb2_grpc.ControllerServiceStub(channel)
    with pytest.raises(grpc.RpcError) as refused:
        stub.RegisterBroker(controller_pb2.RegisterBrokerRequest(broker_id=9), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
