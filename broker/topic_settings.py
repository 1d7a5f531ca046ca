"""What a partition's topic configs mean to the broker holding it: the log's settings and
the replication, timestamp and compression rules the produce path applies. Computed from
the metadata image (topic, per-broker and cluster-default configs) over the broker's
server.properties, exactly as DescribeConfigs reports them, whenever a delta touches
configs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from metadata.config_control import effective_topic_configs
from metadata.image import MetadataImage
from storage.config import LogConfig
from storage.errors import InvalidConfigError
from strom_api import compression

_LOG_KEYS = frozenset(LogConfig().to_properties())


@dataclass(frozen=True, slots=True)
class TopicSettings:
    log: LogConfig
    min_insync_replicas: int = 1
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 2**63 - 1
    # compression.type: the codec every batch is stored in, recompressed when the producer
    # used another (produce_checks); None for "producer", which keeps the producer's.
    compression: int | None = None

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
            compression=_codec(configs.get("compression.type", "producer")),
        )


def _codec(compression_type: str) -> int | None:
    """Kafka's BrokerCompressionType: producer, uncompressed or a codec's name (checked
    when a dynamic config is set; case and spacing taken as that check takes them)."""
    name = compression_type.strip().lower()
    if name == "producer":
        return None
    if name == "uncompressed":
        return compression.NONE
    if name not in compression.BY_NAME or name == "none":
        raise InvalidConfigError(
            f"Invalid value {compression_type} for configuration compression.type: one of "
            "uncompressed, zstd, lz4, snappy, gzip, producer"
        )
    return compression.BY_NAME[name]


def topic_settings(
    image: MetadataImage, topic: str, static: Mapping[str, str], broker_id: int
) -> TopicSettings:
    return TopicSettings.from_configs(effective_topic_configs(image, topic, static, broker_id))
