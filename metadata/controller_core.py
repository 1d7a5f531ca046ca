"""The active controller's pipelining rules, sans-I/O: Kafka's timeline state (the
QuorumController's SnapshotRegistry and deferred event queue) over immutable images.

Every controller node holds one ControllerCore. The node (metadata/controller.py, over
asyncio and the Raft driver) and the controller simulator (tests/controller_sim, over the
simulated Raft and clock) drive the same class; it does no I/O and keeps no clock. They
tell it the Raft state and each committed image through `update`, and ask it for the image
an operation computes against and the offset its first record gets (`image`,
`next_offset`); `write` records what the operation appends. The rules:

- Active: the node leads in epoch E and its committed image holds E's LeaderChange (so
  everything earlier leaders committed). From then on it alone writes to the log, so the
  offset of every record it appends is known before the append (`next_offset`); a write
  that lands elsewhere (`appended`) is a bug and raises.
- Pipelined: an operation computes against the committed image with every pending write
  replayed on it (MetadataDelta over the latest pending image), is appended at once without
  waiting for the commit, and completes once the committed image passes its last record.
  An operation that writes nothing completes once every write before it commits: its
  answer was computed from them. The records of one operation are one append, so they
  commit together or not at all.
- Reverted: on loss of leadership or a new epoch, the pending writes fail (their records
  may still commit, under the next leader, or vanish; their callers get NOT_CONTROLLER and
  retry as Kafka clients do), the image falls back to the committed one and the core is
  inactive. It does not become active again in an epoch it renounced: records of that
  epoch may still be in the log beyond what it knows.
Not thread-safe: one event loop (or the simulator) drives it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from google.protobuf.message import Message

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage

T = TypeVar("T")


class ControllerCoreError(AssertionError):
    """The driver of the core broke its rules (a write landed off its offset)."""


@dataclass(eq=False)
class PendingWrite(Generic[T]):
    """One operation's records, appended as one batch at offsets first..last of `epoch`
    (last = first - 1 when it writes nothing), and the answer its caller gets once they
    commit. `basis` is the image it was computed against, `image` the one after it."""

    records: Sequence[Message]
    response: T
    epoch: int
    first: int
    basis: MetadataImage = field(repr=False)
    image: MetadataImage = field(repr=False)

    @property
    def last(self) -> int:
        return self.first + len(self.records) - 1


@dataclass
class Update:
    """What one `update` changed: writes now committed (their answers can go out), writes
    that failed because leadership moved, and whether the core just became active."""

    completed: list[PendingWrite[object]] = field(default_factory=list)
    failed: list[PendingWrite[object]] = field(default_factory=list)
    activated: bool = False


class ControllerCore:
    def __init__(self) -> None:
        self.committed = EMPTY_IMAGE
        self.epoch: int | None = None  # the Raft epoch it is active in
        self._renounced_epoch = -1
        self._pending: deque[PendingWrite[object]] = deque()
        self._next_offset = 0

    # --- what the driver asks -------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.epoch is not None

    @property
    def image(self) -> MetadataImage:
        """The image the next operation computes against: committed plus pending writes."""
        return self._pending[-1].image if self._pending else self.committed

    @property
    def next_offset(self) -> int:
        """The offset the next operation's first record gets."""
        return self._next_offset

    @property
    def pending(self) -> int:
        return len(self._pending)

    # --- what the driver tells --------------------------------------------------------------

    def update(self, leader: bool, epoch: int, committed: MetadataImage) -> Update:
        """The Raft state (whether this node leads, in which epoch) and the committed image,
        after every commit and leader change and before an operation."""
        update = Update()
        self.committed = committed
        # Leadership first: once another leader may have written at our pending offsets, a
        # committed image past them no longer says that our records are there.
        if self.epoch is not None and (not leader or epoch != self.epoch):
            update.failed = self.renounce()
        while self._pending and self.is_complete(self._pending[0]):
            update.completed.append(self._pending.popleft())
        if (
            self.epoch is None
            and leader
            and committed.epoch == epoch
            and epoch != self._renounced_epoch
        ):
            self.epoch = epoch
            self._next_offset = committed.offset
            update.activated = True
        return update

    def write(self, records: Sequence[Message], response: T) -> PendingWrite[T]:
        """Records one operation's records as pending, at next_offset onward. The caller
        appends them, as one batch, before it computes the next operation. A write with no
        records that waits for nothing is returned already complete (`is_complete`)."""
        if self.epoch is None:
            raise ControllerCoreError("write() on a controller that is not active")
        basis = self.image
        first = self._next_offset
        image = basis
        if records:
            delta = MetadataDelta(basis).replay_all(records)
            image = delta.apply(first + len(records), self.epoch)
        pending = PendingWrite(list(records), response, self.epoch, first, basis, image)
        self._next_offset += len(records)
        if records or self._pending:
            # An empty write waits for the writes before it (its `last` is theirs).
            self._pending.append(pending)  # type: ignore[arg-type]
        return pending

    def is_complete(self, pending: PendingWrite[T]) -> bool:
        """Its last record (or, writing nothing, the last before it) is committed."""
        return pending.last < self.committed.offset

    def appended(self, pending: PendingWrite[T], last_offset: int) -> None:
        """Where the log put the write's last record: where `write` said, or a bug."""
        if pending.records and last_offset != pending.last:
            raise ControllerCoreError(
                f"a write of {len(pending.records)} records expected at {pending.first}.."
                f"{pending.last} (epoch {pending.epoch}) landed at ..{last_offset}"
            )

    def renounce(self) -> list[PendingWrite[object]]:
        """Leadership lost (or an append failed): back to the committed image, inactive;
        returns the pending writes, which failed."""
        failed = list(self._pending)
        self._pending.clear()
        if self.epoch is not None:
            self._renounced_epoch = self.epoch
        self.epoch = None
        return failed
