"""Images for the metadata tests, built the only way images are built: by replaying records."""

from __future__ import annotations

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage, PartitionRegistration
from strom_api.v1 import metadata_pb2 as pb


def topic_id(name: str) -> bytes:
    return name.encode().ljust(16, b"\0")[:16]


def build(
    partitions: dict[tuple[str, int], PartitionRegistration],
    brokers=(1, 2, 3),  # registered and unfenced unless listed below
    fenced=(),
    shutting_down=(),
    configs: dict[str, dict[str, str]] | None = None,
) -> MetadataImage:
    records = []
    for b in brokers:
        records.append(pb.RegisterBrokerRecord(broker_id=b, broker_epoch=b, fenced=True))
        if b not in fenced:
            records.append(pb.UnfenceBrokerRecord(broker_id=b, broker_epoch=b))
        if b in shutting_down:
            records.append(
                pb.BrokerRegistrationChangeRecord(
                    broker_id=b, broker_epoch=b, in_controlled_shutdown=True
                )
            )
    for name in sorted({name for name, _ in partitions}):
        records.append(pb.TopicRecord(name=name, topic_id=topic_id(name)))
    for (name, pid), registration in sorted(partitions.items()):
        records.append(registration.record(topic_id(name), pid))
    for name, values in (configs or {}).items():
        for key, value in values.items():
            records.append(
                pb.ConfigRecord(resource_type=pb.TOPIC, resource_name=name, name=key, value=value)
            )
    return MetadataDelta(EMPTY_IMAGE).replay_all(records).apply(len(records), 1)


def commit(image: MetadataImage, records) -> MetadataImage:
    return MetadataDelta(image).replay_all(records).apply(image.offset + len(records), 1)
