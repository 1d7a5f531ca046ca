"""The errors controller operations answer with: Kafka's error name and a sentence."""

from __future__ import annotations

from strom_api.v1 import common_pb2


class ApiError(Exception):
    """An operation refused with Kafka's error `name` (an ErrorCode of common.proto) and a
    message saying why, as Kafka's ApiException subclasses do."""

    def __init__(self, name: str, message: str) -> None:
        common_pb2.ErrorCode.Value(name)  # a name Kafka (and our contract) has, or ValueError
        super().__init__(message)
        self.error_name = name
        self.message = message

    def __str__(self) -> str:
        return f"{self.error_name}: {self.message}"
