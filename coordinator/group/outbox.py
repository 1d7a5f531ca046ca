"""What the group coordinator's current step has decided (coordinator/group/core.py): the
answers and appends it will return as `Effects`, the requests still waiting for an answer,
and what each append in flight will do once it is done. Enforces that a request is
answered once. Not thread-safe: one step at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

from coordinator.group.messages import Answer, Append, Effects, Respond
from metadata.errors import ApiError


class Outbox:
    def __init__(self) -> None:
        self.effects = Effects()
        self.waiting: set[int] = set()  # requests not answered yet
        self._appends: dict[int, object] = {}  # append number -> what to do when done
        self._last_append = 0

    def open(self, request: int) -> None:
        if request in self.waiting:
            raise ValueError(f"request id {request} is already waiting for its answer")
        self.waiting.add(request)

    def respond(
        self, request: int, answer: Answer = None, error: ApiError | None = None
    ) -> None:
        if request not in self.waiting:
            raise AssertionError(f"request {request} answered twice (or never asked)")
        self.waiting.discard(request)
        self.effects.responses.append(Respond(request, answer, error))

    def append(
        self, partition: int, records: Sequence[tuple[bytes, bytes | None]], then: object
    ) -> None:
        """Asks for `records` on __consumer_offsets-`partition`; `then` comes back from
        `done` with the append's outcome."""
        self._last_append += 1
        self._appends[self._last_append] = then
        self.effects.appends.append(Append(self._last_append, partition, tuple(records)))

    def done(self, write: int) -> object:
        return self._appends.pop(write)

    def take(self) -> Effects:
        effects, self.effects = self.effects, Effects()
        return effects
