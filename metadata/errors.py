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
        self.error_name = name if type(name) is ErrorCode else ErrorCode(name)
        self.message = message

    def __str__(self) -> str:
        return f"{self.error_name}: {self.message}"


def kept(error: ApiError) -> ApiError:
    """A caught refusal as an answer keeps it: without its traceback. The traceback holds
    the frames it came through, whose locals hold the error again, a cycle only the garbage
    collector frees; a request naming 100,000 partitions the broker refuses one by one left
    millions of such objects, and the collections they caused (full ones of 300 ms among
    them) took two thirds of its time."""
    return error.with_traceback(None)
