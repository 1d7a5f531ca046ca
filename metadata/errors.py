"""The errors controller operations answer with: Kafka's error name and a sentence."""

from __future__ import annotations

from strom_api.error_codes import ErrorCode


class ApiError(Exception):
    """An operation refused with Kafka's error `name` (strom_api.error_codes.ErrorCode) and a
    message saying why, as Kafka's ApiException subclasses do."""

    def __init__(self, name: ErrorCode, message: str) -> None:
        super().__init__(message)
        # A name Kafka (and our contract) has, or ValueError: typed callers cannot pass
        # another; this keeps untyped ones (tests, names read from protobuf) honest too.
        self.error_name = ErrorCode(name)
        self.message = message

    def __str__(self) -> str:
        return f"{self.error_name}: {self.message}"
