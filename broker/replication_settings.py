"""The replication settings a broker takes at runtime, from its metadata image.

Each is resolved as Kafka's DynamicBrokerConfig does: the broker's own dynamic value
(IncrementalAlterConfigs on broker "<id>"), else the cluster-wide dynamic default (broker
""), else server.properties, else Kafka's default:
- num.replica.fetchers: the size of the follower's fetcher pool per leader
  (broker/replica_fetcher.py FetcherManager resizes it, as Kafka's resizeThreadPool);
- replica.fetch.max.bytes: what a follower asks per partition, read at every fetch;
- leader.replication.throttled.rate and follower.replication.throttled.rate: the two
  replication quotas (broker/replication_quota.py), with the throttled partitions taken from
  every topic's leader.replication.throttled.replicas / follower.replication.throttled.replicas
  (topic configs only; Kafka has no broker-wide form of them).

`update` is called with each image whose configs changed (broker/replica_manager.py attach);
listeners in `on_change` hear of a changed fetcher pool size or fetch size. No I/O.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping

from broker.replica_config import ReplicaConfig
from broker.replication_quota import Partitions, ReplicationQuota, throttled_partitions
from metadata.image import MetadataImage
from strom_api.v1 import metadata_pb2 as pb

log = logging.getLogger("strom.replication")

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


class ReplicationSettings:
    def __init__(
        self,
        broker_id: int,
        static: ReplicaConfig,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.broker_id = broker_id
        self.static = static
        self.num_fetchers = static.num_fetchers
        self.fetch_max_bytes = static.fetch_max_bytes
        self.leader = ReplicationQuota(static.leader_replication_throttled_rate, clock)
        self.follower = ReplicationQuota(static.follower_replication_throttled_rate, clock)
        self.on_change: list[Callable[[], None]] = []

    def update(self, image: MetadataImage) -> None:
        per_broker = image.configs.of(pb.BROKER, str(self.broker_id))
        default = image.configs.of(pb.BROKER, "")

        def value(key: str, static: int, lowest: int) -> int:
            for layer in (per_broker, default):
                if key in layer:
                    try:
                        return max(int(layer[key]), lowest)
                    except ValueError:  # the controller checks values; an old log might not
                        log.warning("ignoring %s=%r: not an int", key, layer[key])
            return static

        fetchers = value("num.replica.fetchers", self.static.num_fetchers, 1)
        fetch_max = value("replica.fetch.max.bytes", self.static.fetch_max_bytes, 0)
        rates = (
            value(
                "leader.replication.throttled.rate",
                self.static.leader_replication_throttled_rate,
                0,
            ),
            value(
                "follower.replication.throttled.rate",
                self.static.follower_replication_throttled_rate,
                0,
            ),
        )
        for quota, key, rate in zip(
            (self.leader, self.follower), ("leader", "follower"), rates, strict=True
        ):
            if rate != quota.rate:
                log.info("%s.replication.throttled.rate is now %d bytes/s", key, rate)
                quota.update_rate(rate)
        self.leader.set_throttled(self._throttled(image, LEADER_REPLICAS))
        self.follower.set_throttled(self._throttled(image, FOLLOWER_REPLICAS))
        if (fetchers, fetch_max) != (self.num_fetchers, self.fetch_max_bytes):
            self.num_fetchers, self.fetch_max_bytes = fetchers, fetch_max
            for listener in self.on_change:
                listener()

    def _throttled(self, image: MetadataImage, key: str) -> Iterator[tuple[str, Partitions]]:
        resources: Mapping[tuple[int, str], Mapping[str, str]] = image.configs.resources
        for (resource_type, name), configs in resources.items():
            if resource_type == pb.TOPIC and configs.get(key):
                yield name, throttled_partitions(configs[key], self.broker_id)
