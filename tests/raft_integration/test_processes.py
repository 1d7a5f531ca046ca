"""Three voter processes and an observer on loopback, with kill -9.

Kill -9 the leader: a new one is elected and commits; the old one restarts from its disk,
rejoins and ends with exactly the same committed history. Kill -9 the observer, and
while it is down the leader snapshots its state and its log starts there: the observer
comes back and catches up from the snapshot. Then kill -9 all three voters at once and
restart them (the leader from its snapshot): nothing that was acknowledged is lost, and
every node, the observer included, agrees on the committed history.
"""

from __future__ import annotations

import signal
import time

from process_cluster import ProcessCluster, wait_until

FAST = [
    "controller.quorum.election.timeout.ms=300",
    "controller.quorum.fetch.timeout.ms=600",
    "controller.quorum.election.backoff.max.ms=200",
    "controller.quorum.request.timeout.ms=300",
    "controller.quorum.append.linger.ms=5",
    "metadata.max.retention.bytes=0",  # the log starts at every new snapshot
]


def agree(cluster: ProcessCluster, nodes: list[int], at_least: int) -> dict:
    """Waits until every node applied the same history of at least `at_least` records."""

    def same() -> dict | None:
        statuses = [cluster.status(n) for n in nodes]
        if any(s is None or s["applied"] < at_least for s in statuses):
            return None
        if len({(s["applied"], s["digest"]) for s in statuses}) != 1:
            return None
        return statuses[0]

    return wait_until(same, 20, f"nodes {nodes} to agree on >= {at_least} records")


def test_kill_leader_and_restart_everything_loses_nothing_acknowledged(tmp_path):
    cluster = ProcessCluster(str(tmp_path), voters=3, observers=1, config=FAST)
    everyone = cluster.voter_ids + cluster.observer_ids
    acknowledged: list[bytes] = []
    try:
        cluster.start_all()
        first_leader = cluster.wait_for_leader()
        for i in range(20):
            batch = [b"a%d-%d" % (i, j) for j in range(5)]
            cluster.append_until_committed(batch)
            acknowledged += batch

        started = time.monotonic()
        cluster.kill(first_leader, signal.SIGKILL)
        new_leader = cluster.wait_for_leader(other_than=first_leader)
        for i in range(10):
            batch = [b"b%d-%d" % (i, j) for j in range(5)]
            cluster.append_until_committed(batch)
            acknowledged += batch
        failover_s = time.monotonic() - started
        assert new_leader != first_leader
        assert failover_s < 10, f"failover after kill -9 took {failover_s:.1f}s"

        cluster.start(first_leader)  # rejoins from its own disk
        agree(cluster, everyone, len(acknowledged))

        observer = cluster.observer_ids[0]
        cluster.kill(observer, signal.SIGKILL)
        for i in range(5):
            batch = [b"c%d-%d" % (i, j) for j in range(5)]
            cluster.append_until_committed(batch)
            acknowledged += batch
        leader = cluster.wait_for_leader()
        end, _, epoch = cluster.snapshot(leader).partition("-")
        assert int(end) > 0 and int(epoch) > 0
        cluster.start(observer)  # its next entry is gone from the leader's log
        agree(cluster, everyone, len(acknowledged))
        status = cluster.status(observer)
        assert status is not None and status["snapshots_fetched"] == 1
        assert status["log_start"] == int(end)

        for node in cluster.voter_ids:  # a power cut of the whole quorum
            cluster.kill(node, signal.SIGKILL)
        for node in cluster.voter_ids:
            cluster.start(node)
        cluster.wait_for_leader()
        cluster.append_until_committed([b"after-restart"])
        acknowledged.append(b"after-restart")
        agree(cluster, everyone, len(acknowledged))
        for node in everyone:
            applied = cluster.records(node)
            missing = [r for r in acknowledged if r not in set(applied)]
            assert not missing, f"node {node} lost acknowledged records {missing[:5]}"
    finally:
        cluster.stop_all()
