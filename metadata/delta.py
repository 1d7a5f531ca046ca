"""Replaying metadata records: MetadataDelta turns one image and the records after it into
the next image.

`replay(record)` is the only way metadata state changes anywhere: the active controller,
standby controllers and brokers all replay the same records in log order, so they all reach
the same image. Records come from a controller that validated them; a record that cannot
apply (a partition of an unknown topic, a broker epoch that does not match) means the log
and the image disagree, and replay raises MetadataReplayError instead of guessing.

`apply()` builds the next image, copying only the parts that changed (a delta that touched
one topic copies the topic maps, not the other topics' partitions); the delta also tells
what changed (`topics.changed`, `topics.deleted`, `cluster.changed`), which is what a broker
acts on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from google.protobuf.message import Message

from metadata.authorizer import StandardAcl
from metadata.image import (
    AclsImage,
    BrokerRegistration,
    ClusterImage,
    ConfigResource,
    ConfigurationsImage,
    Endpoint,
    FeaturesImage,
    MetadataImage,
    PartitionRegistration,
    ProducerIdsImage,
    ScramImage,
    TopicImage,
    TopicsImage,
    acl_from_record,
    frozen,
)
from metadata.records import acl_id_str, topic_id_str
from strom_api.error_codes import ErrorCode
from strom_api.scram_credential import MECHANISM_CODES, ScramCredential
from strom_api.v1 import metadata_pb2 as pb

MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


class MetadataReplayError(Exception):
    """A record that cannot apply to the image: the metadata log and the image disagree."""

    error_name = ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass
class ClusterDelta:
    image: ClusterImage
    changed: dict[int, BrokerRegistration | None] = field(default_factory=dict)  # None: gone

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self.changed:
            return self.changed[broker_id]
        return self.image.brokers.get(broker_id)

    def _existing(self, broker_id: int, epoch: int, what: str) -> BrokerRegistration:
        broker = self.broker(broker_id)
        if broker is None or broker.epoch != epoch:
            held = "no registration" if broker is None else f"epoch {broker.epoch}"
            raise MetadataReplayError(
                f"{what} for broker {broker_id} epoch {epoch}, which has {held}"
            )
        return broker

    def replay_register(self, r: pb.RegisterBrokerRecord) -> None:
        self.changed[r.broker_id] = BrokerRegistration(
            broker_id=r.broker_id,
            epoch=r.broker_epoch,
            incarnation_id=r.incarnation_id,
            endpoints=tuple(Endpoint.from_pb(e) for e in r.endpoints),
            rack=r.rack or None,
            fenced=r.fenced,
            in_controlled_shutdown=r.in_controlled_shutdown,
        )

    def replay_unregister(self, r: pb.UnregisterBrokerRecord) -> None:
        self._existing(r.broker_id, r.broker_epoch, "UnregisterBroker")
        self.changed[r.broker_id] = None

    def replay_fencing(self, broker_id: int, epoch: int, fenced: bool, what: str) -> None:
        broker = self._existing(broker_id, epoch, what)
        self.changed[broker_id] = _replace_broker(broker, fenced=fenced)

    def replay_change(self, r: pb.BrokerRegistrationChangeRecord) -> None:
        broker = self._existing(r.broker_id, r.broker_epoch, "BrokerRegistrationChange")
        fenced = broker.fenced
        if r.fencing == pb.FENCE:
            fenced = True
        elif r.fencing == pb.UNFENCE:
            fenced = False
        shutdown = broker.in_controlled_shutdown or r.in_controlled_shutdown
        self.changed[r.broker_id] = _replace_broker(
            broker, fenced=fenced, in_controlled_shutdown=shutdown
        )

    def apply(self) -> ClusterImage:
        if not self.changed:
            return self.image
        brokers = dict(self.image.brokers)
        for broker_id, registration in self.changed.items():
            if registration is None:
                brokers.pop(broker_id, None)
            else:
                brokers[broker_id] = registration
        return ClusterImage(frozen(brokers))


def _replace_broker(
    broker: BrokerRegistration, *, fenced: bool, in_controlled_shutdown: bool | None = None
) -> BrokerRegistration:
    return BrokerRegistration(
        broker.broker_id,
        broker.epoch,
        broker.incarnation_id,
        broker.endpoints,
        broker.rack,
        fenced,
        broker.in_controlled_shutdown if in_controlled_shutdown is None else in_controlled_shutdown,
    )


@dataclass
class TopicChange:
    """One topic's changes: created in this delta, or partitions added or changed."""

    name: str
    topic_id: bytes
    created: bool
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


@dataclass
class TopicsDelta:
    image: TopicsImage
    changed: dict[bytes, TopicChange] = field(default_factory=dict)
    deleted: dict[bytes, TopicImage] = field(default_factory=dict)  # as they were

    def _topic_name(self, topic_id: bytes) -> str | None:
        if topic_id in self.changed:
            return self.changed[topic_id].name
        topic = self.image.by_id.get(topic_id)
        return None if topic is None or topic_id in self.deleted else topic.name

    def _name_taken(self, name: str) -> bool:
        if any(c.name == name for c in self.changed.values()):
            return True
        topic = self.image.by_name.get(name)
        return topic is not None and topic.topic_id not in self.deleted

    def replay_topic(self, r: pb.TopicRecord) -> None:
        if self._topic_name(r.topic_id) is not None or self._name_taken(r.name):
            raise MetadataReplayError(
                f"TopicRecord {r.name!r} ({topic_id_str(r.topic_id)}): the name or id exists"
            )
        self.changed[r.topic_id] = TopicChange(r.name, r.topic_id, created=True)

    def _change(self, topic_id: bytes, what: str) -> TopicChange:
        name = self._topic_name(topic_id)
        if name is None:
            raise MetadataReplayError(f"{what} for unknown topic id {topic_id_str(topic_id)}")
        change = self.changed.get(topic_id)
        if change is None:
            change = self.changed[topic_id] = TopicChange(name, topic_id, created=False)
        return change

    def partition(self, topic_id: bytes, partition_id: int) -> PartitionRegistration | None:
        change = self.changed.get(topic_id)
        if change is not None and partition_id in change.partitions:
            return change.partitions[partition_id]
        if change is not None and change.created:
            return None
        topic = self.image.by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def replay_partition(self, r: pb.PartitionRecord) -> None:
        change = self._change(r.topic_id, "PartitionRecord")
        change.partitions[r.partition_id] = PartitionRegistration.from_record(r)

    def replay_partition_change(self, r: pb.PartitionChangeRecord) -> None:
        change = self._change(r.topic_id, "PartitionChangeRecord")
        current = self.partition(r.topic_id, r.partition_id)
        if current is None:
            raise MetadataReplayError(
                f"PartitionChangeRecord for unknown partition {change.name}-{r.partition_id}"
            )
        change.partitions[r.partition_id] = current.merge(r)

    def replay_remove(self, r: pb.RemoveTopicRecord) -> str:
        name = self._topic_name(r.topic_id)
        if name is None:
            raise MetadataReplayError(
                f"RemoveTopicRecord for unknown topic id {topic_id_str(r.topic_id)}"
            )
        change = self.changed.pop(r.topic_id, None)
        if change is None or not change.created:
            self.deleted[r.topic_id] = self.image.by_id[r.topic_id]
        return name

    def apply(self) -> TopicsImage:
        if not self.changed and not self.deleted:
            return self.image
        by_id = dict(self.image.by_id)
        by_name = dict(self.image.by_name)
        for topic_id, topic in self.deleted.items():
            del by_id[topic_id]
            del by_name[topic.name]
        for topic_id, change in self.changed.items():
            old = None if change.created else by_id[topic_id]
            partitions = dict(old.partitions) if old is not None else {}
            partitions.update(change.partitions)
            topic = TopicImage(change.name, topic_id, frozen(partitions))
            by_id[topic_id] = topic
            by_name[change.name] = topic
        return TopicsImage(frozen(by_id), frozen(by_name))


@dataclass
class ConfigurationsDelta:
    image: ConfigurationsImage
    changed: dict[ConfigResource, dict[str, str | None]] = field(default_factory=dict)

    def replay(self, r: pb.ConfigRecord) -> None:
        resource = (int(r.resource_type), r.resource_name)
        self.changed.setdefault(resource, {})[r.name] = r.value if r.HasField("value") else None

    def remove_resource(self, resource: ConfigResource) -> None:
        """A deleted topic takes its configs with it (as Kafka's RemoveTopicRecord does)."""
        keys = set(self.image.resources.get(resource, {})) | set(self.changed.get(resource, {}))
        self.changed[resource] = dict.fromkeys(keys)

    def apply(self) -> ConfigurationsImage:
        if not self.changed:
            return self.image
        resources = dict(self.image.resources)
        for resource, updates in self.changed.items():
            values = dict(resources.get(resource, {}))
            for key, value in updates.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if values:
                resources[resource] = frozen(values)
            else:
                resources.pop(resource, None)
        return ConfigurationsImage(frozen(resources))


@dataclass
class AclsDelta:
    image: AclsImage
    changed: dict[bytes, StandardAcl | None] = field(default_factory=dict)  # None: removed

    def _exists(self, acl_id: bytes) -> bool:
        if acl_id in self.changed:
            return self.changed[acl_id] is not None
        return acl_id in self.image.by_id

    def replay(self, r: pb.AccessControlEntryRecord) -> None:
        try:
            acl = acl_from_record(r)
        except ValueError as exc:
            raise MetadataReplayError(
                f"AccessControlEntryRecord {acl_id_str(r.id)} holds an unknown code: {exc}"
            ) from None
        self.changed[r.id] = acl

    def replay_remove(self, r: pb.RemoveAccessControlEntryRecord) -> None:
        # Kafka's AclControlManager refuses to replay the removal of an ACL it lacks.
        if not self._exists(r.id):
            raise MetadataReplayError(
                f"RemoveAccessControlEntryRecord for unknown ACL id {acl_id_str(r.id)}"
            )
        self.changed[r.id] = None

    def apply(self) -> AclsImage:
        if not self.changed:
            return self.image
        by_id = dict(self.image.by_id)
        for acl_id, acl in self.changed.items():
            if acl is None:
                by_id.pop(acl_id, None)
            else:
                by_id[acl_id] = acl
        return AclsImage.of(by_id)


@dataclass
class ScramDelta:
    image: ScramImage
    changed: dict[tuple[str, str], ScramCredential | None] = field(default_factory=dict)

    @staticmethod
    def _mechanism(code: int, what: str, user: str) -> str:
        name = MECHANISM_NAMES.get(code)
        if name is None:
            raise MetadataReplayError(f"{what} for user {user!r}: unknown SCRAM mechanism {code}")
        return name

    def _current(self, mechanism: str, user: str) -> ScramCredential | None:
        if (mechanism, user) in self.changed:
            return self.changed[(mechanism, user)]
        return self.image.credential(user, mechanism)

    def replay(self, r: pb.UserScramCredentialRecord) -> None:
        mechanism = self._mechanism(r.mechanism, "UserScramCredentialRecord", r.name)
        self.changed[(mechanism, r.name)] = ScramCredential(
            mechanism, r.salt, r.stored_key, r.server_key, r.iterations
        )

    def replay_remove(self, r: pb.RemoveUserScramCredentialRecord) -> None:
        mechanism = self._mechanism(r.mechanism, "RemoveUserScramCredentialRecord", r.name)
        if self._current(mechanism, r.name) is None:
            raise MetadataReplayError(
                f"RemoveUserScramCredentialRecord for user {r.name!r}, which has no "
                f"{mechanism} credential"
            )
        self.changed[(mechanism, r.name)] = None

    def apply(self) -> ScramImage:
        if not self.changed:
            return self.image
        mechanisms = {m: dict(users) for m, users in self.image.mechanisms.items()}
        for (mechanism, user), credential in self.changed.items():
            users = mechanisms.setdefault(mechanism, {})
            if credential is None:
                users.pop(user, None)
            else:
                users[user] = credential
        # A mechanism nobody changed keeps its shared map; the changed ones are copied.
        touched = {mechanism for mechanism, _ in self.changed}
        return ScramImage(
            frozen(
                {
                    m: (frozen(users) if m in touched else self.image.mechanisms[m])
                    for m, users in mechanisms.items()
                    if users
                }
            )
        )


class MetadataDelta:
    """The records replayed on top of `image`; apply() gives the image after them."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.cluster = ClusterDelta(image.cluster)
        self.topics = TopicsDelta(image.topics)
        self.configs = ConfigurationsDelta(image.configs)
        self.scram = ScramDelta(image.scram)
        self.acls = AclsDelta(image.acls)
        self.features: dict[str, int] = {}
        self.next_producer_id: int | None = None
        self.records = 0

    def replay_all(self, records: Iterable[Message]) -> MetadataDelta:
        for record in records:
            self.replay(record)
        return self

    def replay(self, record: Message) -> None:
        self.records += 1
        if isinstance(record, pb.RegisterBrokerRecord):
            self.cluster.replay_register(record)
        elif isinstance(record, pb.UnregisterBrokerRecord):
            self.cluster.replay_unregister(record)
        elif isinstance(record, pb.FenceBrokerRecord):
            self.cluster.replay_fencing(record.broker_id, record.broker_epoch, True, "FenceBroker")
        elif isinstance(record, pb.UnfenceBrokerRecord):
            self.cluster.replay_fencing(
                record.broker_id, record.broker_epoch, False, "UnfenceBroker"
            )
        elif isinstance(record, pb.BrokerRegistrationChangeRecord):
            self.cluster.replay_change(record)
        elif isinstance(record, pb.TopicRecord):
            self.topics.replay_topic(record)
        elif isinstance(record, pb.PartitionRecord):
            self.topics.replay_partition(record)
        elif isinstance(record, pb.PartitionChangeRecord):
            self.topics.replay_partition_change(record)
        elif isinstance(record, pb.RemoveTopicRecord):
            name = self.topics.replay_remove(record)
            self.configs.remove_resource((pb.TOPIC, name))
        elif isinstance(record, pb.ConfigRecord):
            self.configs.replay(record)
        elif isinstance(record, pb.ProducerIdsRecord):
            current = self.next_producer_id
            if current is None:
                current = self.image.producer_ids.next_producer_id
            if record.next_producer_id < current:
                raise MetadataReplayError(
                    f"ProducerIdsRecord moves the next producer id back from {current} to "
                    f"{record.next_producer_id}"
                )
            self.next_producer_id = record.next_producer_id
        elif isinstance(record, pb.FeatureLevelRecord):
            self.features[record.name] = record.feature_level
        elif isinstance(record, pb.UserScramCredentialRecord):
            self.scram.replay(record)
        elif isinstance(record, pb.RemoveUserScramCredentialRecord):
            self.scram.replay_remove(record)
        elif isinstance(record, pb.AccessControlEntryRecord):
            self.acls.replay(record)
        elif isinstance(record, pb.RemoveAccessControlEntryRecord):
            self.acls.replay_remove(record)
        elif isinstance(record, pb.NoOpRecord):
            pass
        else:
            raise MetadataReplayError(f"not a metadata record: {type(record).__name__}")

    def apply(self, offset: int, epoch: int) -> MetadataImage:
        """The image after every record replayed, standing at log `offset` (the offset after
        the last record) from leader epoch `epoch`."""
        image = self.image
        features = image.features
        if self.features:
            levels = dict(features.levels)
            for name, level in self.features.items():
                if level == 0:
                    levels.pop(name, None)
                else:
                    levels[name] = level
            features = FeaturesImage(frozen(levels))
        producer_ids = image.producer_ids
        if self.next_producer_id is not None:
            producer_ids = ProducerIdsImage(self.next_producer_id)
        return MetadataImage(
            offset=offset,
            epoch=epoch,
            scram=self.scram.apply(),
            features=features,
            cluster=self.cluster.apply(),
            topics=self.topics.apply(),
            configs=self.configs.apply(),
            producer_ids=producer_ids,
            acls=self.acls.apply(),
        )
