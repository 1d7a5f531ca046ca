"""The one error the admin tools raise: Kafka's error name and a sentence saying why."""

from __future__ import annotations

from strom_api.v1 import common_pb2


class AdminError(Exception):
    """A failed admin operation. `name` is an ErrorCode name of common.proto (Kafka's error
    names), `message` a sentence for people; the tools print both on one line."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


def error_name(code: int) -> str:
    """The ErrorCode name of a wire code (a code this client does not know stays readable)."""
    try:
        return common_pb2.ErrorCode.Name(code)
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def from_error_pb(error: common_pb2.Error) -> AdminError:
    """An AdminError from a strom_api.v1.Error (a response's or one topic's)."""
    return AdminError(error_name(error.code), error.message)
