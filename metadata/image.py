"""The immutable metadata image: what the metadata log says at one offset.

An image is built only by replaying records (metadata/delta.py) and never changes after; a
delta yields the next image and shares every part it did not touch, so a broker or standby
controller holding the previous image loses nothing and pays only for what changed. The
parts mirror Kafka's MetadataImage: features, cluster (brokers), topics (with partitions),
configs, producer ids, ACLs and SCRAM credentials. `records()` writes an image back as the
records that rebuild it: that is a metadata snapshot's content.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from google.protobuf.message import Message

from metadata.authorizer import AclIndex, StandardAcl
from metadata.records import NO_LEADER
from strom_api.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from strom_api.scram_credential import MECHANISM_CODES, ScramCredential
from strom_api.v1 import metadata_pb2 as pb

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _empty() -> Mapping[Any, Any]:
    return _EMPTY


K = TypeVar("K")
V = TypeVar("V")


def frozen(mapping: Mapping[K, V]) -> Mapping[K, V]:
    """A read-only view, so a shared part of an image cannot be changed by accident."""
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def to_pb(self) -> pb.BrokerEndpoint:
        return pb.BrokerEndpoint(
            name=self.name, host=self.host, port=self.port, security_protocol=self.security_protocol
        )

    @staticmethod
    def from_pb(e: pb.BrokerEndpoint) -> Endpoint:
        return Endpoint(e.name, e.host, e.port, e.security_protocol or "PLAINTEXT")


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    epoch: int  # the offset of its RegisterBrokerRecord
    incarnation_id: bytes
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool

    def record(self) -> pb.RegisterBrokerRecord:
        return pb.RegisterBrokerRecord(
            broker_id=self.broker_id,
            incarnation_id=self.incarnation_id,
            broker_epoch=self.epoch,
            endpoints=[e.to_pb() for e in self.endpoints],
            rack=self.rack or "",
            fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown,
        )


@dataclass(frozen=True, slots=True)
class ClusterImage:
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=_empty)

    def unfenced(self) -> list[int]:
        return sorted(b for b, r in self.brokers.items() if not r.fenced)


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = pb.RECOVERED
    elr: tuple[int, ...] = ()  # eligible leader replicas (KIP-966)

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def merge(self, change: pb.PartitionChangeRecord) -> PartitionRegistration:
        """The registration after `change` (Kafka's PartitionRegistration.merge): every change
        bumps the partition epoch, one that names a leader also the leader epoch."""
        leader, leader_epoch = self.leader, self.leader_epoch
        if change.HasField("leader"):
            leader, leader_epoch = change.leader, self.leader_epoch + 1
        return PartitionRegistration(
            replicas=tuple(change.replicas.ids) if change.HasField("replicas") else self.replicas,
            isr=tuple(change.isr.ids) if change.HasField("isr") else self.isr,
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=(
                tuple(change.removing_replicas.ids)
                if change.HasField("removing_replicas")
                else self.removing_replicas
            ),
            adding_replicas=(
                tuple(change.adding_replicas.ids)
                if change.HasField("adding_replicas")
                else self.adding_replicas
            ),
            leader_recovery_state=(
                change.leader_recovery_state
                if change.HasField("leader_recovery_state")
                else self.leader_recovery_state
            ),
            elr=(
                tuple(change.eligible_leader_replicas.ids)
                if change.HasField("eligible_leader_replicas")
                else self.elr
            ),
        )

    def record(self, topic_id: bytes, partition_id: int) -> pb.PartitionRecord:
        return pb.PartitionRecord(
            partition_id=partition_id,
            topic_id=topic_id,
            replicas=self.replicas,
            isr=self.isr,
            removing_replicas=self.removing_replicas,
            adding_replicas=self.adding_replicas,
            leader=self.leader,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            leader_recovery_state=self.leader_recovery_state,  # type: ignore[arg-type]
            eligible_leader_replicas=self.elr,
        )

    @staticmethod
    def from_record(record: pb.PartitionRecord) -> PartitionRegistration:
        return PartitionRegistration(
            replicas=tuple(record.replicas),
            isr=tuple(record.isr),
            leader=record.leader,
            leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            removing_replicas=tuple(record.removing_replicas),
            adding_replicas=tuple(record.adding_replicas),
            leader_recovery_state=record.leader_recovery_state,
            elr=tuple(record.eligible_leader_replicas),
        )


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: bytes
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=_empty)


@dataclass(frozen=True, slots=True)
class TopicsImage:
    by_id: Mapping[bytes, TopicImage] = field(default_factory=_empty)
    by_name: Mapping[str, TopicImage] = field(default_factory=_empty)

    def partition(self, name: str, partition_id: int) -> PartitionRegistration | None:
        topic = self.by_name.get(name)
        return None if topic is None else topic.partitions.get(partition_id)


# A config resource: (Kafka's ConfigResource.Type code, name); the cluster default is
# (BROKER, "").
ConfigResource = tuple[int, str]


@dataclass(frozen=True, slots=True)
class ConfigurationsImage:
    resources: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=_empty)

    def of(self, resource_type: int, name: str) -> Mapping[str, str]:
        return self.resources.get((resource_type, name), _EMPTY)


@dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    next_producer_id: int = 0  # the first id of the next block the controller hands out


def acl_record(acl_id: bytes, acl: StandardAcl) -> pb.AccessControlEntryRecord:
    return pb.AccessControlEntryRecord(
        id=acl_id,
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission_type,
    )


def acl_from_record(r: pb.AccessControlEntryRecord) -> StandardAcl:
    """The ACL of a record; ValueError when a code is not one of Kafka's."""
    return StandardAcl(
        ResourceType(r.resource_type),
        r.resource_name,
        PatternType(r.pattern_type),
        r.principal,
        r.host,
        AclOperation(r.operation),
        AclPermissionType(r.permission_type),
    )


_NO_ACLS = AclIndex(())


@dataclass(frozen=True, slots=True)
class AclsImage:
    """Every ACL by its id (Kafka's AclsImage), and the same ACLs indexed for the
    authorizer, built once per change of the ACLs rather than once per check."""

    by_id: Mapping[bytes, StandardAcl] = field(default_factory=_empty)
    index: AclIndex = field(default=_NO_ACLS, compare=False, repr=False)  # by_id's, indexed

    @staticmethod
    def of(by_id: Mapping[bytes, StandardAcl]) -> AclsImage:
        return AclsImage(frozen(by_id), AclIndex(by_id.values()))


@dataclass(frozen=True, slots=True)
class ScramImage:
    """Users' SCRAM credentials (Kafka's ScramImage): mechanism name -> user -> credential.
    Salt, stored key, server key and iterations only: never a password."""

    mechanisms: Mapping[str, Mapping[str, ScramCredential]] = field(default_factory=_empty)

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.mechanisms.get(mechanism, _EMPTY).get(user)

    def users(self) -> dict[str, list[ScramCredential]]:
        """Every user with a credential, with theirs in mechanism order."""
        out: dict[str, list[ScramCredential]] = {}
        for mechanism in sorted(self.mechanisms, key=MECHANISM_CODES.__getitem__):
            for user, credential in self.mechanisms[mechanism].items():
                out.setdefault(user, []).append(credential)
        return out


def scram_record(user: str, credential: ScramCredential) -> pb.UserScramCredentialRecord:
    return pb.UserScramCredentialRecord(
        name=user,
        mechanism=MECHANISM_CODES[credential.mechanism],
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=credential.iterations,
    )


@dataclass(frozen=True, slots=True)
class FeaturesImage:
    levels: Mapping[str, int] = field(default_factory=_empty)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    # Where in the metadata log this image stands: every record below `offset` is in it,
    # the last of them from leader epoch `epoch`.
    offset: int = 0
    epoch: int = 0
    features: FeaturesImage = FeaturesImage()
    cluster: ClusterImage = ClusterImage()
    topics: TopicsImage = TopicsImage()
    configs: ConfigurationsImage = ConfigurationsImage()
    producer_ids: ProducerIdsImage = ProducerIdsImage()
    acls: AclsImage = AclsImage()
    scram: ScramImage = ScramImage()

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The user's credential for a SCRAM mechanism ("SCRAM-SHA-512"), None without one:
        what a broker checks a client's SCRAM proof against."""
        return self.scram.credential(user, mechanism)

    def records(self) -> Iterator[Message]:
        """The records that rebuild this image when replayed into an empty one (a
        snapshot's content): features first, as Kafka's snapshots start with
        metadata.version, then brokers, topics with their partitions, configs, producer ids,
        ACLs (each with its id, so a later RemoveAccessControlEntryRecord still finds it),
        SCRAM credentials.
        """
        for name, level in sorted(self.features.levels.items()):
            yield pb.FeatureLevelRecord(name=name, feature_level=level)
        for broker_id in sorted(self.cluster.brokers):
            yield self.cluster.brokers[broker_id].record()
        for name in sorted(self.topics.by_name):
            topic = self.topics.by_name[name]
            yield pb.TopicRecord(name=topic.name, topic_id=topic.topic_id)
            for partition_id in sorted(topic.partitions):
                yield topic.partitions[partition_id].record(topic.topic_id, partition_id)
        for (resource_type, resource_name), values in sorted(self.configs.resources.items()):
            for key in sorted(values):
                yield pb.ConfigRecord(
                    resource_type=resource_type,  # type: ignore[arg-type]
                    resource_name=resource_name,
                    name=key,
                    value=values[key],
                )
        if self.producer_ids.next_producer_id:
            yield pb.ProducerIdsRecord(
                broker_id=-1, broker_epoch=-1, next_producer_id=self.producer_ids.next_producer_id
            )
        for acl_id in sorted(self.acls.by_id):
            yield acl_record(acl_id, self.acls.by_id[acl_id])
        for mechanism in sorted(self.scram.mechanisms, key=MECHANISM_CODES.__getitem__):
            users = self.scram.mechanisms[mechanism]
            for user in sorted(users):
                yield scram_record(user, users[user])


EMPTY_IMAGE = MetadataImage()
