"""The consumer's side of an incremental fetch session (KIP-227), Kafka's
FetchSessionHandler: one per broker the consumer fetches from. Sans-I/O: the fetcher asks
`build` for the next request's session fields and partitions, sends it, and tells the
handler how it went (`handle_response`, or `handle_error` when no answer came).

The rules, as Kafka's handler applies them:
- With no session (at first, after an error or when the broker had no slot) the fetch is
  full: epoch 0, every partition named, naming the old session id (if any) so the broker
  closes it. The broker answers with the new session's id, or 0 when it made none (the next
  fetch is full again).
- In a session, the fetch is incremental, with the session's next epoch: it names only the
  partitions added or whose fetch offset changed since the session last heard of them, and
  forgets those no longer fetched (unassigned, paused, led elsewhere, or reset). The broker
  answers only the partitions with news: one left out has nothing new.
- FETCH_SESSION_ID_NOT_FOUND (evicted, or the broker restarted): the next fetch is full,
  with no session id. INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR, or a fetch
  that got no answer (connection lost, timed out, cancelled): the next fetch is full and
  closes the session (the broker may have taken the epoch without the client seeing it).
- On close, the consumer sends each broker a fetch of no partitions with the final epoch
  (-1), which closes the session and frees its slot.
The session's partitions are taken as sent when a request is built (as Kafka's builder does):
any failure makes the next fetch a full one, which names them all again.

Not thread-safe: the consumer's event loop owns it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from strom_api.error_codes import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1  # a sessionless fetch; with a session id, closes that session
NO_SESSION = 0
_MAX_EPOCH = 2**31 - 1

Partition = TypeVar("Partition", bound=Hashable)


@dataclass(frozen=True, slots=True)
class SessionFetch(Generic[Partition]):
    """One fetch's session fields and what it names."""

    session_id: int
    epoch: int
    named: dict[Partition, int]  # partition -> fetch offset
    forgotten: list[Partition]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


@dataclass(slots=True)
class SessionStats:
    full_fetches: int = 0
    incremental_fetches: int = 0
    session_errors: int = 0  # answers with a session error
    failed_fetches: int = 0  # fetches that got no answer


@dataclass(slots=True)
class FetchSessionHandler(Generic[Partition]):
    session_id: int = NO_SESSION
    next_epoch: int = INITIAL_EPOCH
    # The partitions as the broker's session holds them, with their fetch offsets.
    partitions: dict[Partition, int] = field(default_factory=dict)
    stats: SessionStats = field(default_factory=SessionStats)

    def build(self, offsets: dict[Partition, int]) -> SessionFetch[Partition]:
        """The next fetch of `offsets` (partition -> fetch offset, all the partitions this
        broker is fetched for)."""
        previous, self.partitions = self.partitions, dict(offsets)
        if self.next_epoch == INITIAL_EPOCH:
            self.stats.full_fetches += 1
            return SessionFetch(self.session_id, INITIAL_EPOCH, dict(offsets), [])
        self.stats.incremental_fetches += 1
        named = {tp: offset for tp, offset in offsets.items() if previous.get(tp) != offset}
        forgotten = [tp for tp in previous if tp not in offsets]
        return SessionFetch(self.session_id, self.next_epoch, named, forgotten)

    def handle_response(
        self, sent: SessionFetch[Partition], session_id: int, error: str | None
    ) -> bool:
        """Whether the answer's partitions may be used (False: a session error, nothing
        answered)."""
        if error is not None and error != ErrorCode.NONE:
            self.stats.session_errors += 1
            if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = NO_SESSION
            self.next_epoch = INITIAL_EPOCH
            return False
        if session_id == NO_SESSION:  # no slot, or the session closed: full fetches
            self.session_id, self.next_epoch = NO_SESSION, INITIAL_EPOCH
        elif sent.full:
            self.session_id, self.next_epoch = session_id, _next(INITIAL_EPOCH)
        else:
            self.next_epoch = _next(self.next_epoch)
        return True

    def handle_error(self) -> None:
        """The fetch got no answer: the next one is full, closing the session."""
        self.stats.failed_fetches += 1
        self.next_epoch = INITIAL_EPOCH


def _next(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: after the largest int comes 1 again."""
    return 1 if epoch == _MAX_EPOCH else epoch + 1
