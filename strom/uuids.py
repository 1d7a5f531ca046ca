"""Kafka's Uuid: its string form (base64url, 22 characters) and its random ids."""

from __future__ import annotations

import base64
import uuid

# Kafka's Uuid.RESERVED: ZERO_UUID (null id) and ONE_UUID (METADATA_TOPIC_ID); never handed out.
_RESERVED = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})


def kafka_uuid_string(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): the 16 bytes, base64url without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def kafka_uuid_from_bytes(raw: bytes) -> str:
    """The string form of a Uuid carried as 16 bytes on the wire (a topic id)."""
    return kafka_uuid_string(uuid.UUID(bytes=raw))


def is_zero_uuid(raw: bytes) -> bool:
    """Kafka's Uuid.ZERO_UUID (or no id at all): the id a description leaves out."""
    return not raw or raw == bytes(16)


def random_uuid() -> str:
    """Kafka's Uuid.randomUuid(): a version-4 UUID that is not reserved and whose string does
    not start with '-' (it would read as a command-line option)."""
    while True:
        u = uuid.uuid4()
        text = kafka_uuid_string(u)
        if u not in _RESERVED and not text.startswith("-"):
            return text
