"""A restarted broker is back at once (issue 17): its new process registers under a new
incarnation id, which replaces the old registration (KIP-631) instead of waiting for the old
session to run out, and it heartbeats quickly while fenced, so it is unfenced as soon as it
has replayed its registration. The session timeout here is long (30 s) and the heartbeat
interval Kafka's default, so waiting out either shows."""

from __future__ import annotations

import signal
import time

import grpc
import pytest
from node_cluster import NodeCluster, running_cluster, wait_until

from strom_api.v1 import client_pb2, client_pb2_grpc
from tests.client.cluster_helpers import create_topic

SESSION_TIMEOUT_S = 30
SLOW = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_S * 1000),
    "broker.heartbeat.interval.ms": "2000",
}
# From process start (the interpreter and imports take a second or two of it, more on a
# loaded machine): well inside the session timeout, which a broker that waited for its old
# registration to expire would have to wait out.
BACK_WITHIN_S = SESSION_TIMEOUT_S / 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(str(tmp_path_factory.mktemp("restart")), 3, extra=SLOW) as cluster:
        yield cluster


def epochs(cluster: NodeCluster) -> dict[int, tuple[int, bool]]:
    described = cluster.describe_cluster()
    assert described is not None
    return {b.broker_id: (b.broker_epoch, b.fenced) for b in described.brokers}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "killed"])
def test_a_restarted_broker_is_registered_and_unfenced_at_once(cluster, sig):
    active = cluster.active_controller()
    node = next(n for n in cluster.ids if n != active)
    before = epochs(cluster)[node][0]
    cluster.stop(node, sig)
    started = time.monotonic()
    cluster.start(node)

    def back() -> bool:
        epoch, fenced = epochs(cluster).get(node, (before, True))
        return epoch != before and not fenced

    wait_until(back, SESSION_TIMEOUT_S, f"node {node} registered again and unfenced")
    took = time.monotonic() - started
    assert took < BACK_WITHIN_S, f"node {node} took {took:.1f} s to be back"
    cluster.wait_for_brokers({1, 2, 3})


def test_a_restarted_broker_answers_no_call_before_it_has_caught_up(cluster):
    """Kafka's broker processes requests only once it has caught up with the metadata log.
    Strom's answered at once from the image it had not yet caught up, where no topic
    existed: found by the secured chaos run, in which a restarted broker refused a producer
    allowed to write its topic TOPIC_AUTHORIZATION_FAILED ("may not CREATE" the topic it
    did not know). Every answer of the restarted broker must know the topic; before the
    catch-up it refuses the call UNAVAILABLE (which clients take as a broker not up yet)."""
    create_topic(cluster, "known-before-the-restart", partitions=1)
    active = cluster.active_controller()
    node = next(n for n in cluster.ids if n != active)
    cluster.stop(node, signal.SIGKILL)
    cluster.start(node)
    # Reconnect quickly, or gRPC's backoff hides the moments the broker listens unready.
    fast = [("grpc.initial_reconnect_backoff_ms", 20), ("grpc.max_reconnect_backoff_ms", 50)]
    request = client_pb2.MetadataRequest(topics=["known-before-the-restart"])
    refused_unready = 0
    deadline = time.monotonic() + 30
    with grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[node]}", fast) as channel:
        stub = client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]
        while True:
            assert time.monotonic() < deadline, "the restarted broker never answered"
            try:
                answer = stub.Metadata(request, timeout=2)
            except grpc.RpcError as exc:
                assert exc.code() in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                )
                refused_unready += "caught up with the metadata log" in (exc.details() or "")
                time.sleep(0.005)
                continue
            assert answer.topics[0].error.code == 0, answer  # its first answer knows it
            break
    assert refused_unready > 0  # it listened before it had caught up, and said so
    cluster.wait_for_brokers({1, 2, 3})
