"""The group coordinator's settings, with Kafka's defaults (the server.properties names are
mapped in server/server_config.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupConfig:
    offsets_topic_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offsets_commit_timeout_ms: int = 5000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    offset_metadata_max_bytes: int = 4096
