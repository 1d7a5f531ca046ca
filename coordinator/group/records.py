"""The records of `__consumer_offsets`, in Kafka's own layouts (GroupCoordinatorRecords):
keys and values are Kafka's big-endian schemas, so compaction keeps the latest value per
key exactly as Kafka's does and Kafka's tooling could read them.

    OffsetCommitKey     v1: group string, topic string, partition int32
    OffsetCommitValue   v3: offset int64, leader_epoch int32, metadata string,
                            commit_timestamp int64
    GroupMetadataKey    v2: group string
    GroupMetadataValue  v3: protocol_type string, generation int32, protocol nullable
                            string, leader nullable string, current_state_timestamp int64,
                            members [member_id, group_instance_id (nullable), client_id,
                            client_host, rebalance_timeout int32, session_timeout int32,
                            subscription bytes, assignment bytes]
A key's first int16 is its version (0/1 offset commit, 2 group metadata). A null value is
a tombstone: the offset or the group is gone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from strom_api.record_batch import HEADER_SIZE

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

# The bytes of a batch of these records before its first record (RecordBatch v2's header).
BATCH_HEADER_BYTES = HEADER_SIZE
# The least an OffsetCommit record of empty metadata adds to a batch besides its group and
# topic names: key version 2 + two string lengths 2 + 2 + partition 4; value version 2 +
# offset 8 + leader epoch 4 + metadata length 2 + commit timestamp 8; and the record's own
# framing, one byte each at the least: length, attributes, timestamp delta, offset delta,
# key length, value length, header count.
_MIN_OFFSET_RECORD_FIXED = 10 + 24 + 7


def min_offset_record_bytes(group: str, topic: str) -> int:
    """The fewest bytes an OffsetCommit record of `group` and `topic` takes in a batch
    (the names' UTF-8 is at least one byte a character)."""
    return _MIN_OFFSET_RECORD_FIXED + len(group) + len(topic)


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def i16(self, v: int) -> _Writer:
        self.out += _I16.pack(v)
        return self

    def i32(self, v: int) -> _Writer:
        self.out += _I32.pack(v)
        return self

    def i64(self, v: int) -> _Writer:
        self.out += _I64.pack(v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode()
        self.i16(len(data))
        self.out += data
        return self

    def bytes_(self, v: bytes) -> _Writer:
        self.i32(len(v))
        self.out += v
        return self


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(v)

    def i64(self) -> int:
        (v,) = _I64.unpack_from(self.data, self.pos)
        self.pos += 8
        return int(v)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        v = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return v

    def bytes_(self) -> bytes:
        n = self.i32()
        v = self.data[self.pos : self.pos + max(n, 0)]
        self.pos += max(n, 0)
        return bytes(v)


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...]


def offset_key(key: OffsetKey) -> bytes:
    w = _Writer().i16(OFFSET_KEY_VERSION).string(key.group).string(key.topic)
    return bytes(w.i32(key.partition).out)


def group_key(key: GroupKey) -> bytes:
    return bytes(_Writer().i16(GROUP_KEY_VERSION).string(key.group).out)


def offset_value(value: OffsetValue) -> bytes:
    w = _Writer().i16(OFFSET_VALUE_VERSION).i64(value.offset).i32(value.leader_epoch)
    return bytes(w.string(value.metadata).i64(value.commit_timestamp).out)


def group_value(value: GroupValue) -> bytes:
    w = _Writer().i16(GROUP_VALUE_VERSION).string(value.protocol_type).i32(value.generation)
    w.string(value.protocol).string(value.leader).i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
        w.string(m.client_host).i32(m.rebalance_timeout).i32(m.session_timeout)
        w.bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.out)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        group, topic = r.string(), r.string()
        return OffsetKey(group or "", topic or "", r.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.string() or "")
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data)
    version = r.i16()
    if version != OFFSET_VALUE_VERSION:
        raise ValueError(f"unsupported offset commit value version {version}")
    return OffsetValue(r.i64(), r.i32(), r.string() or "", r.i64())


def decode_group_value(data: bytes) -> GroupValue:
    r = _Reader(data)
    version = r.i16()
    if version != GROUP_VALUE_VERSION:
        raise ValueError(f"unsupported group metadata value version {version}")
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    timestamp = r.i64()
    members = []
    for _ in range(r.i32()):
        members.append(
            MemberValue(
                r.string() or "",
                r.string(),
                r.string() or "",
                r.string() or "",
                r.i32(),
                r.i32(),
                r.bytes_(),
                r.bytes_(),
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, int32 wrap-around)."""
    h = 0
    for unit in _utf16_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(text: str) -> list[int]:
    data = text.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def partition_for_group(group: str, partitions: int) -> int:
    """Kafka's GroupCoordinator.partitionFor: Utils.abs(groupId.hashCode) % partitions."""
    h = java_string_hash(group)
    return (0 if h == -(2**31) else abs(h)) % partitions
