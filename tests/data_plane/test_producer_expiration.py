"""producer.id.expiration.ms: a partition forgets an idempotent producer whose last batch is
older than it (Kafka's ProducerStateManager.removeExpiredProducers), checked every
producer.id.expiration.check.interval.ms, so the state of producers long gone does not
accumulate; a forgotten producer that writes again mid-sequence gets UNKNOWN_PRODUCER_ID."""

from __future__ import annotations

import time

from broker.producer_state import ProducerStateManager
from strom_api.record_batch import BatchHeader
from tests.data_plane.data_client import DataClient, batch, error_name
from tests.data_plane.test_client_api import create_topic
from tests.node_integration.node_cluster import running_cluster

HOUR_MS = 3_600_000


def header(pid: int, timestamp: int) -> BatchHeader:
    return BatchHeader(0, 0, 0, 2, 0, 0, 0, timestamp, timestamp, pid, 0, 0, 1)


def test_producers_whose_last_batch_is_older_than_the_expiration_are_forgotten():
    state = ProducerStateManager()
    state.replay(header(1, timestamp=1_000))
    state.replay(header(2, timestamp=5_000))
    assert state.remove_expired(now_ms=7_000, expiration_ms=3_000) == 1
    assert list(state.producers) == [2]  # 2 wrote 2 s ago: kept


def test_a_node_forgets_expired_producers_and_keeps_recent_ones(tmp_path):
    limits = {
        "producer.id.expiration.ms": str(HOUR_MS // 2),
        "producer.id.expiration.check.interval.ms": "100",
    }
    with running_cluster(str(tmp_path), 1, extra=limits) as cluster:
        create_topic(cluster, "pids", rf=1, min_insync_replicas="1")
        client = DataClient({1: f"127.0.0.1:{cluster.broker_port[1]}"})
        client.leader("pids", 0)
        now = int(time.time() * 1000)
        for pid, ts in ((1001, now - HOUR_MS), (1002, now)):
            first = client.produce_raw(1, "pids", 0, batch([b"a"], (pid, 0, 0), ts), acks=1)
            assert error_name(first.error) == "NONE", first
        time.sleep(0.6)  # several expiration checks
        old = client.produce_raw(1, "pids", 0, batch([b"b"], (1001, 0, 1), now), acks=1)
        recent = client.produce_raw(1, "pids", 0, batch([b"b"], (1002, 0, 1), now), acks=1)
        assert error_name(old.error) == "UNKNOWN_PRODUCER_ID", old
        assert error_name(recent.error) == "NONE", recent
