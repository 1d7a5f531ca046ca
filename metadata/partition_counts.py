"""The controller's cluster-wide partition gauges, kept as counts that each published delta
moves by what it changed (Kafka's ControllerMetricsChanges, applied per metadata delta):
GlobalPartitionCount, OfflinePartitionsCount (no leader) and
PreferredReplicaImbalanceCount (led by another than its first replica).

A scrape reads three integers instead of walking every partition of the image. A delta
built on the image published before it moves the counts by the partitions it names (and the
topics it deletes); anything else (a snapshot loaded, which replaces the image outright, or
the first image) is counted from scratch. Not thread-safe: the loader publishes on the
event loop, and the metrics read there too (server/metrics.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage, PartitionRegistration


def _offline(registration: PartitionRegistration) -> int:
    return int(not registration.has_leader)


def _imbalanced(registration: PartitionRegistration) -> int:
    r = registration
    return int(r.has_leader and bool(r.replicas) and r.leader != r.replicas[0])


@dataclass
class PartitionCounts:
    partitions: int = 0
    offline: int = 0
    imbalanced: int = 0
    _image: MetadataImage = EMPTY_IMAGE  # the image these counts describe

    @classmethod
    def of(cls, image: MetadataImage) -> PartitionCounts:
        counts = cls()
        counts._recount(image)
        return counts

    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """The loader's publisher: `delta` took its base image to `image`."""
        if delta.image is not self._image:
            self._recount(image)
            return
        for topic in delta.topics.deleted.values():
            for registration in topic.partitions.values():
                self._add(registration, -1)
        for topic_id, change in delta.topics.changed.items():
            before = delta.image.topics.by_id.get(topic_id)
            for index, registration in change.partitions.items():
                old = None
                if before is not None and not change.created:
                    old = before.partitions.get(index)
                if old is not None:
                    self._add(old, -1)
                self._add(registration, 1)
        self._image = image

    def _add(self, registration: PartitionRegistration, sign: int) -> None:
        self.partitions += sign
        self.offline += sign * _offline(registration)
        self.imbalanced += sign * _imbalanced(registration)

    def _recount(self, image: MetadataImage) -> None:
        self.partitions = self.offline = self.imbalanced = 0
        for topic in image.topics.by_id.values():
            for registration in topic.partitions.values():
                self._add(registration, 1)
        self._image = image
