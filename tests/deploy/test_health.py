"""grpc.health.v1 on live node processes, as Kubernetes' gRPC probes ask it (deploy/k8s):
liveness ("") answers SERVING on every listener while the process runs, even after the
quorum is gone; readiness ("strom.ready") is SERVING only while the node is part of a
working cluster (server/health.py)."""

from __future__ import annotations

import signal

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from server.health import READY_SERVICE
from tests.node_integration.node_cluster import NodeCluster
from tests.raft_integration.process_cluster import wait_until

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def status(port: int, service: str) -> int | None:
    """The status a probe would see; None when the call fails (no answer, unknown service)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2).status
        except grpc.RpcError:
            return None


def test_liveness_never_depends_on_the_quorum(tmp_path):
    cluster = NodeCluster(str(tmp_path), 3)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        ports = [
            p for n in cluster.ids for p in (cluster.broker_port[n], cluster.controller_port[n])
        ]
        wait_until(
            lambda: all(status(p, READY_SERVICE) == SERVING for p in ports) or None,
            20,
            "every listener of every node ready",
        )
        assert all(status(p, "") == SERVING for p in ports)
        # Two of three voters gone: the survivor loses its leader (check-quorum, election
        # timeouts) and stops being ready, but stays alive: restarting it would not help.
        survivor = cluster.ids[0]
        for node in cluster.ids[1:]:
            cluster.stop(node, signal.SIGKILL)
        survivor_port = cluster.controller_port[survivor]
        wait_until(
            lambda: status(survivor_port, READY_SERVICE) == NOT_SERVING or None,
            20,
            "the survivor not ready without a quorum",
        )
        assert status(survivor_port, "") == SERVING
        assert status(cluster.broker_port[survivor], "") == SERVING
        assert status(cluster.broker_port[survivor], "no.such.service") is None
    finally:
        cluster.stop_all()


def test_controller_and_broker_only_nodes_get_ready(tmp_path):
    # Split roles: a controller-only node is ready once it knows the leader, a broker-only
    # node once it has caught up and been unfenced.
    cluster = NodeCluster(str(tmp_path), 3, brokers=1)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        ports = [cluster.controller_port[n] for n in cluster.controller_ids]
        ports.append(cluster.broker_port[cluster.ids[-1]])
        wait_until(
            lambda: all(status(p, READY_SERVICE) == SERVING for p in ports) or None,
            20,
            "controllers and the broker ready",
        )
    finally:
        cluster.stop_all()
