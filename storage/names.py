"""What names and ids look like, without touching a file: Kafka's topic name rule and its
printed form of 16-byte ids. The controller validates with these (metadata/) without
importing the modules of the storage engine that do file I/O."""

from __future__ import annotations

import base64
import re

from storage.errors import InvalidTopicError

TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def validate_topic(topic: str, partition: int) -> None:
    if topic in (".", "..") or not TOPIC_NAME.match(topic):
        raise InvalidTopicError(
            f"topic name '{topic}' is illegal: use at most 249 characters of "
            f"ASCII letters, digits, '.', '_' and '-'"
        )
    if partition < 0:
        raise InvalidTopicError(f"partition {partition} of topic '{topic}' is negative")


def uuid_string(raw: bytes) -> str:
    """A 16-byte id as Kafka prints it (Uuid.toString): unpadded base64url, 22 characters."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
