"""strom.range_reader against a real cluster: a range read whole across many fetches, a
stale leader corrected through NOT_LEADER_OR_FOLLOWER, clear errors."""

from __future__ import annotations

import dataclasses

import pytest

from strom.errors import StromError
from strom.range_reader import EARLIEST, LATEST, SyncCluster, TopicPartition, read_range
from strom_api.records import decode_batches
from tests.spark.spark_helpers import make_topic, produce


def offsets_read(cluster, tp, start, end, **kw):
    out = []
    for chunk in read_range(cluster, tp, start, end, **kw):
        for _, records in decode_batches(chunk.data):
            out += [r.offset for r in records if start <= r.offset < end]
    return out


@pytest.fixture(scope="module")
def ranged(strom_cluster, servers):
    make_topic(strom_cluster, "ranged", 3)
    produce(servers, "ranged", [(b"r%d" % i, None, i % 3, None, []) for i in range(300)])
    return TopicPartition("ranged", 1)


def test_list_offsets_and_a_range_over_many_fetches(servers, ranged):
    with SyncCluster(servers) as cluster:
        found = cluster.list_offsets({ranged: EARLIEST})[ranged][0], cluster.list_offsets(
            {ranged: LATEST}
        )[ranged][0]
        assert found == (0, 100)
        assert offsets_read(cluster, ranged, 7, 93, max_bytes=64) == list(range(7, 93))
        assert offsets_read(cluster, ranged, 50, 50) == []


def test_a_stale_leader_is_looked_up_again(servers, ranged):
    with SyncCluster(servers) as cluster:
        cluster.refresh(["ranged"])
        info = cluster.topics["ranged"]
        right = info.partitions[1]
        wrong = next(b for b in cluster.brokers if b != right.leader)
        info.partitions[1] = dataclasses.replace(right, leader=wrong)
        assert offsets_read(cluster, ranged, 0, 100) == list(range(100))
        assert cluster.leader(ranged) == right.leader


def test_unknown_topics_and_an_unreachable_cluster_are_named(servers, ranged):
    with SyncCluster(servers) as cluster:
        with pytest.raises(StromError, match="UNKNOWN_TOPIC_OR_PARTITION: topic 'nope'"):
            cluster.partitions("nope")
        assert cluster.partitions("ranged") == [0, 1, 2]
    with SyncCluster("127.0.0.1:1", request_timeout_ms=300) as cluster:
        with pytest.raises(StromError, match="NETWORK_EXCEPTION: no broker answered"):
            cluster.partitions("ranged")
