"""Prometheus metrics scraped from live node processes: the names Strimzi's dashboards and
alerts query, with values that follow the cluster (exactly one active controller; under-
replicated partitions rising when a broker dies and returning to 0 when it is back)."""

from __future__ import annotations

import signal

from strom_api.v1 import controller_pb2
from tests.data_plane.data_client import DataClient, batch
from tests.node_integration.node_cluster import NodeCluster
from tests.raft_integration.process_cluster import wait_until


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def total(cluster, name, **labels):
    """The sum over every running node; None while one of them does not answer yet."""
    found = 0.0
    for node in list(cluster.procs):
        try:
            samples = cluster.scrape(node)
        except OSError:
            return None  # (re)starting
        found += value(samples, name, **labels) or 0
    return found


def test_metrics_follow_the_cluster(tmp_path):
    cluster = NodeCluster(str(tmp_path), 3)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        wait_until(
            lambda: total(cluster, "kafka_controller_kafkacontroller_activecontrollercount") == 1,
            20,
            "one active controller",
        )
        for node in cluster.ids:
            samples = cluster.scrape(node)
            assert value(samples, "kafka_controller_kafkacontroller_activebrokercount") == 3
            assert value(samples, "process_resident_memory_bytes") > 0
            # server/main.py froze the loaded code out of the collector's walks
            assert value(samples, "strom_gc_frozen_objects") > 10_000
            states = [k[1] for k in samples if k[0] == "kafka_server_raftmetrics_current_state"]
            assert len(states) == 1
        leaders = sum(
            1
            for n in cluster.ids
            if value(
                cluster.scrape(n), "kafka_server_raftmetrics_current_state", current_state="leader"
            )
        )
        assert leaders == 1
        response = cluster.call(
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(
                        name="watched",
                        num_partitions=3,
                        replication_factor=3,
                        configs={"min.insync.replicas": "2"},
                    )
                ]
            ),
        )
        assert response.topics[0].error.code == 0
        client = DataClient({i: f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids})
        for partition in range(3):
            leader = client.leader("watched", partition)
            answer = client.produce_raw(leader, "watched", partition, batch([b"m" * 100] * 4))
            assert answer.error.code == 0
        assert (
            total(cluster, "kafka_server_brokertopicmetrics_messagesin_total", topic="watched")
            == 12
        )
        assert total(cluster, "kafka_server_brokertopicmetrics_messagesin_total", topic="") == 12
        assert total(cluster, "kafka_server_replicamanager_leadercount") == 3
        assert total(cluster, "kafka_server_replicamanager_partitioncount") == 9
        assert total(cluster, "kafka_controller_kafkacontroller_globalpartitioncount") == 9
        assert value(cluster.scrape(1), "kafka_log_log_size", topic="watched", partition="0") > 0
        requests = value(
            cluster.scrape(leader), "strom_request_duration_seconds_count", api="Produce"
        )
        assert requests and requests >= 1
        wait_until(
            lambda: total(cluster, "kafka_server_replicamanager_underreplicatedpartitions") == 0,
            20,
            "no under-replicated partition",
        )
        victim = next(n for n in cluster.ids if n != cluster.active_controller())
        cluster.stop(victim, signal.SIGKILL)
        wait_until(
            lambda: total(cluster, "kafka_server_replicamanager_underreplicatedpartitions") == 3,
            30,
            "every partition under-replicated without the dead broker",
        )
        assert total(cluster, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        cluster.start(victim)
        wait_until(
            lambda: total(cluster, "kafka_server_replicamanager_underreplicatedpartitions") == 0,
            40,
            "the partitions fully replicated again",
        )
        assert total(cluster, "kafka_server_replicamanager_isrexpands_total") >= 3
    finally:
        cluster.stop_all()
