"""What a partition's topic configs mean to the broker holding it: the log's settings and
the replication and timestamp rules the produce path enforces. Computed from the metadata
image (topic, per-broker and cluster-default configs) over the broker's server.properties,
exactly as DescribeConfigs reports them, whenever a delta touches configs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from metadata.config_control import effective_topic_configs
from metadata.image import MetadataImage
from storage.config import LogConfig

_LOG_KEYS = frozenset(LogConfig().to_properties())


@dataclass(frozen=True, slots=True)
class TopicSettings:
    log: LogConfig
    min_insync_replicas: int = 1
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 2**63 - 1

    @staticmethod
    def from_configs(configs: Mapping[str, str]) -> TopicSettings:
        return TopicSettings(
            log=LogConfig.from_properties({k: v for k, v in configs.items() if k in _LOG_KEYS}),
            min_insync_replicas=int(configs.get("min.insync.replicas", "1")),
            log_append_time=configs.get("message.timestamp.type") == "LogAppendTime",
            timestamp_before_max_ms=int(
                configs.get("message.timestamp.before.max.ms", str(2**63 - 1))
            ),
            timestamp_after_max_ms=int(
                configs.get("message.timestamp.after.max.ms", str(2**63 - 1))
            ),
        )


def topic_settings(
    image: MetadataImage, topic: str, static: Mapping[str, str], broker_id: int
) -> TopicSettings:
    return TopicSettings.from_configs(effective_topic_configs(image, topic, static, broker_id))
