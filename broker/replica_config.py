"""The data plane's settings from server.properties (Kafka's names: broker/server_config.py maps
them to these fields, checks and bounds them); the replica manager, fetchers and log
maintenance read them here, so the replication layer needs nothing of the node's config."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicaConfig:
    replica_lag_time_max_ms: int = 30_000
    fetch_wait_max_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 1024 * 1024
    fetch_response_max_bytes: int = 10 * 1024 * 1024
    fetch_backoff_ms: int = 1000
    num_fetchers: int = 1
    checkpoint_interval_ms: int = 5000
    flush_scheduler_interval_ms: int = 2**63 - 1
    retention_check_interval_ms: int = 300_000
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000
    # What one request may ask, Kafka's names (broker/memory_pool.py, broker/node.py):
    socket_request_max_bytes: int = 100 * 1024 * 1024  # the largest request accepted
    queued_max_requests: int = 500  # RPCs (streams included) served at once
    # Kafka's default is -1 (unbounded): its responses are sent from the page cache by
    # sendfile, Strom's are held in memory until sent, so Strom bounds them by default.
    queued_max_request_bytes: int = 256 * 1024 * 1024
    fetch_response_limit: int = 55 * 1024 * 1024  # fetch.max.bytes: one fetch response
    # Replication throttles (KIP-73), bytes/s; Long.MAX_VALUE is none (Kafka's default).
    leader_replication_throttled_rate: int = 2**63 - 1
    follower_replication_throttled_rate: int = 2**63 - 1
    # Incremental fetch sessions (KIP-227, broker/fetch_sessions.py), Kafka's defaults.
    max_incremental_fetch_session_cache_slots: int = 1000
    min_incremental_fetch_session_eviction_ms: int = 120_000
    auto_create_topics: bool = True
    inter_broker_listener: str = ""  # resolved by broker/listeners.py; "": not a broker
