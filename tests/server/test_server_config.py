"""server.properties as the data plane reads it: Kafka's replica.* names and defaults, the
metrics listener, and refusals that name the key at fault."""

from __future__ import annotations

import pytest

from server.server_config import ReplicaConfig, from_properties
from storage.errors import InvalidConfigError

BASE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "log.dirs": "/tmp/strom-test",
}


def test_defaults_are_kafkas():
    config = from_properties(BASE)
    # Without inter.broker.listener.name, the first broker listener (server/listeners.py).
    assert config.replica == ReplicaConfig(inter_broker_listener="PLAINTEXT")
    assert config.replica.replica_lag_time_max_ms == 30_000
    assert config.replica.fetch_wait_max_ms == 500
    assert config.replica.num_fetchers == 1
    assert config.replica.auto_create_topics is True
    assert (config.metrics_host, config.metrics_port) == ("0.0.0.0", 9404)
    assert config.unknown == ()


def test_replica_settings_and_topic_defaults_are_known_keys():
    config = from_properties(
        {
            **BASE,
            "replica.lag.time.max.ms": "1000",
            "replica.fetch.wait.max.ms": "50",
            "num.replica.fetchers": "3",
            "auto.create.topics.enable": "false",
            "inter.broker.listener.name": "PLAINTEXT",
            "prometheus.metrics.port": "-1",
            "min.insync.replicas": "2",
            "log.retention.hours": "24",
            "message.max.bytes": "2000000",
        }
    )
    assert config.replica.replica_lag_time_max_ms == 1000
    assert config.replica.fetch_wait_max_ms == 50
    assert config.replica.num_fetchers == 3
    assert config.replica.auto_create_topics is False
    assert config.replica.inter_broker_listener == "PLAINTEXT"
    assert config.metrics_port == -1
    assert config.unknown == ()


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("num.replica.fetchers", "0", "num.replica.fetchers"),
        ("replica.lag.time.max.ms", "-5", "replica.lag.time.max.ms"),
        ("replica.fetch.wait.max.ms", "soon", "replica.fetch.wait.max.ms"),
        ("auto.create.topics.enable", "yes", "auto.create.topics.enable"),
        ("prometheus.metrics.port", "70000", "prometheus.metrics.port"),
        ("max.partitions", "0", "max.partitions"),
        ("max.broker.partitions", "many", "max.broker.partitions"),
        ("unclean.leader.election.interval.ms", "0", "unclean.leader.election.interval.ms"),
    ],
)
def test_bad_values_name_the_key(key, value, words):
    with pytest.raises(InvalidConfigError, match=words):
        from_properties({**BASE, key: value})


def test_a_broker_needs_a_client_listener():
    with pytest.raises(InvalidConfigError, match="broker role needs a listener"):
        from_properties({**BASE, "listeners": "CONTROLLER://127.0.0.1:9093"})
    controller_only = {**BASE, "process.roles": "controller"}
    controller_only["listeners"] = "CONTROLLER://127.0.0.1:9093"
    assert from_properties(controller_only).is_controller


def test_partition_limits_reach_the_controller():
    config = from_properties({**BASE, "max.partitions": "500", "max.broker.partitions": "60"})
    assert config.controller.partition_limits.max_partitions == 500
    assert config.controller.partition_limits.max_broker_partitions == 60
    assert "max.partitions" not in config.unknown


def test_the_unclean_election_interval_reaches_the_controller():
    config = from_properties({**BASE, "unclean.leader.election.interval.ms": "1500"})
    assert config.controller.unclean_leader_election_interval_ms == 1500
    assert from_properties(BASE).controller.unclean_leader_election_interval_ms == 300_000


def test_request_limits_and_offset_metadata_reach_their_users():
    config = from_properties(
        {
            **BASE,
            "socket.request.max.bytes": "1000",
            "queued.max.requests": "7",
            "queued.max.request.bytes": "-1",
            "fetch.max.bytes": "2048",
            "offset.metadata.max.bytes": "10",
        }
    )
    replica = config.replica
    assert (replica.socket_request_max_bytes, replica.queued_max_requests) == (1000, 7)
    assert (replica.queued_max_request_bytes, replica.fetch_response_limit) == (-1, 2048)
    assert config.groups.offset_metadata_max_bytes == 10
    with pytest.raises(InvalidConfigError, match="fetch.max.bytes"):
        from_properties({**BASE, "fetch.max.bytes": "100"})  # Kafka's floor is 1024


def test_replica_fetch_sizes_and_intervals_reach_the_replica_config():
    config = from_properties(
        {
            **BASE,
            "replica.fetch.min.bytes": "4096",
            "replica.fetch.response.max.bytes": "123456",
            "log.retention.check.interval.ms": "250",
            "replica.high.watermark.checkpoint.interval.ms": "750",
        }
    )
    replica = config.replica
    assert (replica.fetch_min_bytes, replica.fetch_response_max_bytes) == (4096, 123_456)
    assert (replica.retention_check_interval_ms, replica.checkpoint_interval_ms) == (250, 750)


def test_fetch_session_settings_reach_the_replica_config():
    assert (
        ReplicaConfig().max_incremental_fetch_session_cache_slots,
        ReplicaConfig().min_incremental_fetch_session_eviction_ms,
    ) == (1000, 120_000)  # Kafka's defaults
    config = from_properties(
        {
            **BASE,
            "max.incremental.fetch.session.cache.slots": "0",
            "min.incremental.fetch.session.eviction.ms": "500",
        }
    )
    replica = config.replica
    assert replica.max_incremental_fetch_session_cache_slots == 0
    assert replica.min_incremental_fetch_session_eviction_ms == 500
    assert "max.incremental.fetch.session.cache.slots" not in config.unknown
    for key in (
        "max.incremental.fetch.session.cache.slots",
        "min.incremental.fetch.session.eviction.ms",
    ):
        with pytest.raises(InvalidConfigError, match=key):
            from_properties({**BASE, key: "-1"})  # Kafka's floor is 0


def test_broker_id_is_kafkas_synonym_of_node_id():
    without_node_id = {k: v for k, v in BASE.items() if k != "node.id"}
    assert from_properties({**without_node_id, "broker.id": "1"}).node_id == 1
    assert from_properties({**BASE, "broker.id": "1"}).node_id == 1
    with pytest.raises(InvalidConfigError, match="broker.id 2 differs from node.id 1"):
        from_properties({**BASE, "broker.id": "2"})
