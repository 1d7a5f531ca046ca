"""RaftCore.stats(): the numbers the metrics edge will export, told from a small election."""

from __future__ import annotations

from interaction import Cluster


def run(cluster: Cluster, *lines: str) -> None:
    for line in lines:
        cluster.run(line)


def test_stats_follow_an_election_and_replication() -> None:
    cluster = Cluster()
    run(cluster, "add-nodes voters=1,2,3", "tick 1 100", "stabilize quiet")
    # The leader holds the last fetches (long poll, 50 ms here); once that wait runs out the
    # followers learn the final high watermark.
    run(cluster, "propose 1 a b", "stabilize quiet", "tick all 50", "stabilize quiet")
    leader = cluster.nodes[1].core.stats()
    assert (leader.role, leader.leader_id, leader.epoch) == ("Leader", 1, 1)
    assert (leader.elections_started, leader.elections_won) == (1, 1)
    assert leader.last_election_ms >= 0
    assert leader.entries_proposed == 2
    assert leader.high_watermark == leader.log_end_offset == 3  # LeaderChange + a + b
    assert leader.fetches_served > 0
    for node in (2, 3):
        follower = cluster.nodes[node].core.stats()
        assert (follower.role, follower.leader_id, follower.voted_for) == ("Follower", 1, 1)
        assert (follower.elections_started, follower.elections_won) == (0, 0)
        assert follower.entries_replicated == 3
        assert follower.high_watermark == 3
