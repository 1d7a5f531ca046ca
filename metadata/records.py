"""Metadata records as Raft entries: one MetadataRecord (strom_api/v1/metadata.proto) each.

The controller builds the inner records (RegisterBrokerRecord, PartitionRecord, ...); this
module wraps them for the log and unwraps what the log hands back, so the rest of
metadata/ deals in the inner messages only.
"""

from __future__ import annotations

import uuid

from google.protobuf.message import DecodeError, Message

from storage.names import uuid_string
from strom_api.error_codes import ErrorCode
from strom_api.v1 import metadata_pb2 as pb

NO_LEADER = -1

# The oneof field of MetadataRecord for each inner record type.
_FIELD_OF = {
    pb.RegisterBrokerRecord: "register_broker",
    pb.UnregisterBrokerRecord: "unregister_broker",
    pb.FenceBrokerRecord: "fence_broker",
    pb.UnfenceBrokerRecord: "unfence_broker",
    pb.BrokerRegistrationChangeRecord: "broker_registration_change",
    pb.TopicRecord: "topic",
    pb.PartitionRecord: "partition",
    pb.PartitionChangeRecord: "partition_change",
    pb.RemoveTopicRecord: "remove_topic",
    pb.ConfigRecord: "config",
    pb.ProducerIdsRecord: "producer_ids",
    pb.FeatureLevelRecord: "feature_level",
    pb.NoOpRecord: "no_op",
    pb.AccessControlEntryRecord: "access_control_entry",
    pb.RemoveAccessControlEntryRecord: "remove_access_control_entry",
    pb.UserScramCredentialRecord: "user_scram_credential",
    pb.RemoveUserScramCredentialRecord: "remove_user_scram_credential",
}


class MetadataRecordError(ValueError):
    """Bytes in the metadata log that are not a metadata record (Kafka: CORRUPT_MESSAGE)."""

    error_name = ErrorCode.CORRUPT_MESSAGE


def encode(record: Message) -> bytes:
    """The bytes of one Raft entry holding `record`."""
    field = _FIELD_OF.get(type(record))
    if field is None:
        raise TypeError(f"not a metadata record: {type(record).__name__}")
    wrapper = pb.MetadataRecord()
    getattr(wrapper, field).CopyFrom(record)
    return wrapper.SerializeToString()


def decode(data: bytes) -> Message:
    """The inner record of one Raft entry's bytes."""
    wrapper = pb.MetadataRecord()
    try:
        wrapper.ParseFromString(data)
    except DecodeError as exc:
        raise MetadataRecordError(f"metadata record does not parse: {exc}") from exc
    field = wrapper.WhichOneof("record")
    if field is None:
        raise MetadataRecordError("metadata record holds no record")
    inner: Message = getattr(wrapper, field)
    return inner


def new_topic_id() -> bytes:
    """A random topic id (a version-4 UUID, as Kafka's Uuid.randomUuid)."""
    return uuid.uuid4().bytes


def topic_id_str(topic_id: bytes) -> str:
    """A topic id as Kafka prints it."""
    return uuid_string(topic_id)


def new_acl_id() -> bytes:
    """A random ACL id (a version-4 UUID, as Kafka's AclControlManager draws)."""
    return uuid.uuid4().bytes


def acl_id_str(acl_id: bytes) -> str:
    """An ACL id as Kafka prints it (a 16-byte UUID)."""
    return uuid_string(acl_id)
