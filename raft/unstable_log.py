"""The log as the Raft core sees it: what the stable log holds, as numbers, plus an in-memory
unstable tail. The core holds no stable log to read.

etcd-io/raft's raftLog with its `unstable`: entries the core appends (a leader's proposals,
a follower's fetched entries) and the truncation of a diverging suffix stay in memory until
the driver has written and fsynced them; so step(), propose() and tick() never write a
file. A Ready lists what to write (`Ready.log_writes`), the driver writes it to the stable
log in that order (write_to) and fsyncs, and advance() hands it back: the written prefix of
the tail is stable from then on.

Nor do they read one. What the core asks of its log synchronously is small, and kept here
in memory, rebuilt from the stable log's own bookkeeping when the node opens (`over`):
where the log starts and ends, and the epoch index, (epoch, first offset) for each run of
entries of one epoch (Kafka's leader-epoch cache; etcd keeps terms beside its entries). The
epoch of an offset, the last epoch and the end of an epoch (a leader's DivergingEpoch)
are answered from it. Entries themselves (a fetch answer, what to apply) are read by the
driver when it carries out a Ready (raft/ready_reads.py).

The state:
  - `start`: the snapshot the log starts at (KIP-630; raft/log.py says what it stands in
    for);
  - `unstable_offset`: entries below it are on the stable log; the tail starts here. When
    it is below `stable_end` (what the stable log holds), the stable entries from it on
    have been truncated away (in memory) and the next write cuts the stable log there
    first;
  - `tail`: the unstable entries, at `unstable_offset` on;
  - `reset`: a snapshot the stable log must restart at (a follower installed it), or
    None. While set, nothing of the stable log is part of the log: it starts at that
    snapshot;
  - `epochs`: (epoch, first offset) of every epoch that has entries in the log, stable or
    not, in order; the first starts at or after `start`.
A Ready is always carried out before the next one is asked for; advance() still checks
that the tail it marks stable is the one it handed out, and leaves anything else unstable
(the next Ready writes it again over a truncation), as etcd's stableTo does. Not
thread-safe; no I/O here.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from raft.log import RaftLog
from raft.messages import NO_LOG_WRITES, Entry, LogWrites, SnapshotId


def write_to(log: RaftLog, writes: LogWrites) -> None:
    """Carries `writes` out on the stable `log`, in their order (the driver's part, in its
    disk thread; it fsyncs after)."""
    if writes.reset is not None:
        log.reset_to_snapshot(writes.reset)
    if writes.truncate_to is not None:
        log.truncate_to(writes.truncate_to)
    if writes.entries:
        log.append(writes.entries)


def stable_end_after(stable_end: int, writes: LogWrites) -> int:
    """Where the stable log ends once `writes` are carried out on it."""
    end = stable_end if writes.reset is None else writes.reset.end_offset
    if writes.truncate_to is not None:
        end = min(end, writes.truncate_to)
    if writes.entries:
        end = writes.entries[-1].offset + 1
    return end


class UnstableLog:
    """The core's log: bookkeeping of the stable log, and the unstable tail over it."""

    def __init__(
        self, start: SnapshotId, end_offset: int, epochs: Sequence[tuple[int, int]]
    ) -> None:
        self._start = start
        self.stable_end = end_offset
        self.unstable_offset = end_offset
        self.tail: list[Entry] = []
        self.reset: SnapshotId | None = None
        self.epochs: list[tuple[int, int]] = _normalised(epochs, start.end_offset, end_offset)
        self._epoch_starts = [offset for _, offset in self.epochs]  # for bisect

    @classmethod
    def over(cls, log: RaftLog) -> UnstableLog:
        """The view of `log` as it is on disk (the node opening it): its start, end and
        epoch index; the only time the core looks at the stable log."""
        return cls(log.start(), log.end_offset(), log.epoch_starts())

    # --- what the core asks, from memory ----------------------------------------------------

    def start(self) -> SnapshotId:
        return self._start

    def end_offset(self) -> int:
        return self.unstable_offset + len(self.tail)

    def last_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else self._start.epoch

    def epoch_at(self, offset: int) -> int:
        """The epoch of the entry at `offset` (the log start's snapshot epoch for the offset
        just below the start, which the snapshot holds last)."""
        if offset == self._start.end_offset - 1:
            return self._start.epoch
        if not self._start.end_offset <= offset < self.end_offset():
            raise AssertionError(
                f"no entry at {offset}: the log holds {self._start.end_offset}..{self.end_offset()}"
            )
        return self.epochs[bisect_right(self._epoch_starts, offset) - 1][0]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` in the log, the offset where it ends), (0, 0) when the
        log has nothing that old (RaftLog.end_offset_for_epoch)."""
        found = bisect_right(self.epochs, (epoch, 2**63)) - 1
        if found < 0:
            start = self._start
            return (start.epoch, start.end_offset) if epoch >= start.epoch else (0, 0)
        end = self.epochs[found + 1][1] if found + 1 < len(self.epochs) else self.end_offset()
        return self.epochs[found][0], end

    # --- writes, in memory ------------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.offset != self.end_offset():
                raise AssertionError(f"append at {entry.offset}, log end is {self.end_offset()}")
            if entry.epoch != self.last_epoch() or not self.epochs:
                if entry.epoch < self.last_epoch():
                    raise AssertionError(
                        f"append of epoch {entry.epoch} after epoch {self.last_epoch()}"
                    )
                self.epochs.append((entry.epoch, entry.offset))
                self._epoch_starts.append(entry.offset)
            self.tail.append(entry)

    def truncate_to(self, offset: int) -> None:
        if offset < self._start.end_offset:
            raise AssertionError(f"truncate to {offset}, below the log start {self._start}")
        if offset >= self.unstable_offset:
            del self.tail[offset - self.unstable_offset :]
        else:
            self.tail = []
            self.unstable_offset = offset
        kept = bisect_left(self._epoch_starts, offset)
        del self.epochs[kept:], self._epoch_starts[kept:]

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        self._start = self.reset = snapshot_id
        self.tail = []
        self.unstable_offset = snapshot_id.end_offset
        self.epochs, self._epoch_starts = [], []

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        """Log-prefix cleanup, in memory (the driver drops the prefix on disk, between
        Readies): the entries it drops must all be stable (a snapshot holds only applied
        entries)."""
        if self.reset is not None or snapshot_id.end_offset > self.unstable_offset:
            raise AssertionError(f"log start moved to {snapshot_id} over unstable entries")
        self._start = snapshot_id
        self.epochs = _normalised(self.epochs, snapshot_id.end_offset, self.end_offset())
        self._epoch_starts = [offset for _, offset in self.epochs]

    # --- what a Ready writes, and marking it stable -----------------------------------------

    def writes(self) -> LogWrites:
        if not self.has_writes():
            return NO_LOG_WRITES
        truncate = None
        if self.reset is None and self.stable_end > self.unstable_offset:
            truncate = self.unstable_offset
        return LogWrites(self.reset, truncate, tuple(self.tail))

    def stable_to(self, written: LogWrites) -> None:
        """The driver has written and fsynced `written` (what writes() returned)."""
        self.stable_end = stable_end_after(self.stable_end, written)
        if written.reset is not None and written.reset == self.reset:
            self.reset = None
        entries = written.entries
        if not entries or self.reset is not None:
            return
        count = len(entries)
        if (
            entries[0].offset == self.unstable_offset
            and len(self.tail) >= count
            and self.tail[count - 1] is entries[-1]  # the very entry handed out
        ):
            del self.tail[:count]
            self.unstable_offset += count

    def has_writes(self) -> bool:
        return self.reset is not None or bool(self.tail) or self.stable_end > self.unstable_offset


def _normalised(
    epochs: Sequence[tuple[int, int]], start_offset: int, end_offset: int
) -> list[tuple[int, int]]:
    """The epoch index of the entries in [start_offset, end_offset): an epoch that began
    below the start begins at it there (Kafka's truncateFromStart); none that begins at or
    beyond the end (it holds no entry)."""
    out: list[tuple[int, int]] = []
    for epoch, offset in epochs:
        if offset >= end_offset:
            break
        offset = max(offset, start_offset)
        if out and out[-1][1] == offset:
            out.pop()
        out.append((epoch, offset))
    return out
