"""A restarted broker is back at once (issue 17): its new process registers under a new
incarnation id, which replaces the old registration (KIP-631) instead of waiting for the old
session to run out, and it heartbeats quickly while fenced, so it is unfenced as soon as it
has replayed its registration. The session timeout here is long (30 s) and the heartbeat
interval Kafka's default, so waiting out either shows."""

from __future__ import annotations

import signal
import time

import pytest
from node_cluster import NodeCluster, running_cluster, wait_until

SESSION_TIMEOUT_S = 30
SLOW = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_S * 1000),
    "broker.heartbeat.interval.ms": "2000",
}
# From process start: the interpreter and imports take about a second of this.
BACK_WITHIN_S = 6


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
