"""Protobuf messages whose large `bytes` field is joined in, not serialized.

upb's SerializeToString copies a `bytes` field at about 1.2 GB/s: 0.83 ms for the 1 MB of
records in a ReplicaFetchResponse on these machines, where bytes.join takes 0.016 ms. A
leader serializes each megabyte it replicates once per follower, on its event loop, and
every follower's answer waits behind the ones before it (docs/kafka_protocol.md, "Produce
throughput with librdkafka").

Protobuf writes a message's fields in field-number order, and a length-delimited field is its
key, its length and its bytes. So a message serialized without its highest-numbered field,
followed by that field written here, is byte for byte what SerializeToString gives; the same
holds for an embedded message written as one repeated field's element."""

from __future__ import annotations

_LENGTH_DELIMITED = 2


def uvarint(value: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative int."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_head(field_number: int, length: int) -> bytes:
    """The key and length of a length-delimited field whose `length` bytes follow."""
    return uvarint(field_number << 3 | _LENGTH_DELIMITED) + uvarint(length)


def with_last_field(head: bytes, field_number: int, payload: bytes) -> list[bytes]:
    """The pieces of a message: `head` (its other fields, serialized) and then the field
    `field_number` holding `payload`, left out when empty as proto3 leaves it out. The caller
    names the message's highest field number (highest_field checks it)."""
    if not payload:
        return [head]
    return [head, field_head(field_number, len(payload)), payload]


def highest_field(descriptor: object, name: str) -> int:
    """The number of field `name` of a message descriptor, which must be its highest (the
    splice above relies on it); raises at import time if the .proto ever changes that."""
    fields = descriptor.fields  # type: ignore[attr-defined]
    number = int(descriptor.fields_by_name[name].number)  # type: ignore[attr-defined]
    if number != max(f.number for f in fields):
        raise ValueError(f"{name} is not the highest-numbered field of {descriptor}")
    return number
