"""A topic created while the brokers' replica fetch streams are parked in their long polls,
on real processes: the first acks=all produce to it does not wait for those polls to end.

The followers' streams to each leader already exist (an earlier topic) and are idle, each
fetch held by its leader for replica.fetch.wait.max.ms, here 30 s so that the wait cannot
be missed. A follower that follows the new partition sends its leader a hurry
(ReplicaFetchRequest.hurry, broker/follower_fetch.FetchStream.take_hurry); the leader answers
the parked fetch at once, and the next fetch names the partition. Without the hurry the
produce waited out the poll (up to 30 s, past its timeout); with the default 500 ms it made a
new topic's first acks=all produce take about half a second.
"""

from __future__ import annotations

import time

from tests.data_plane.data_client import batch
from tests.data_plane.test_failover import client_of, create_topic
from tests.node_integration.node_cluster import NodeCluster

LONG_POLL_MS = 30_000


def test_the_first_acks_all_produce_to_a_new_topic_does_not_wait_out_the_long_polls(tmp_path):
    cluster = NodeCluster(str(tmp_path), 3, extra={"replica.fetch.wait.max.ms": str(LONG_POLL_MS)})
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        client = client_of(cluster)
        # One partition led by each broker, so that every broker has streams to the others.
        for n in range(3):
            create_topic(cluster, f"earlier-{n}")
            leader = client.leader(f"earlier-{n}", 0)
            answer = client.produce_raw(leader, f"earlier-{n}", 0, batch([b"x"]), timeout_ms=60_000)
            assert answer.error.code == 0, answer
        time.sleep(1)  # every stream's fetch now parked at its leader, for up to 30 s
        for n in range(3):
            create_topic(cluster, f"new-{n}")
            leader = client.leader(f"new-{n}", 0)
            start = time.monotonic()
            answer = client.produce_raw(leader, f"new-{n}", 0, batch([b"y"]), timeout_ms=60_000)
            took = time.monotonic() - start
            assert answer.error.code == 0, answer
            assert took < LONG_POLL_MS / 3000, f"new-{n}: acks=all took {took:.1f} s"
    finally:
        cluster.stop_all()
