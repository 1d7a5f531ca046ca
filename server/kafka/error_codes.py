"""Kafka's numeric error codes for strom_api's ErrorCode members, in one place: the names
are Kafka's, so each maps to kio's member of the same (lower-case) name and its number."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as KafkaErrorCode

from strom_api.error_codes import ErrorCode


def kafka_error_code(name: ErrorCode | None) -> KafkaErrorCode:
    """The wire code of an error name (None: no error)."""
    if name is None:
        return KafkaErrorCode.none
    return _BY_NAME[name]


_BY_NAME = {name: KafkaErrorCode[name.name.lower()] for name in ErrorCode}
