"""The log as the Raft core sees it: the stable log on disk plus an in-memory unstable tail.

etcd-io/raft's raftLog with its `unstable`: entries the core appends (a leader's proposals,
a follower's fetched entries) and the truncation of a diverging suffix stay in memory until
the driver has written and fsynced them; so step(), propose() and tick() never touch a
file. A Ready lists what to write (`Ready.log_writes`), the driver writes it to the stable
log in that order (write_to) and fsyncs, and advance() hands it back: the written prefix of
the tail is stable from then on. Reads (fetch answers, commit and apply, epochs and
offsets) see stable plus unstable.

The state is two numbers and a list:
  - `unstable_offset`: entries below it are read from the stable log; the tail starts
    here. When it is below the stable log's end, the stable entries from it on have been
    truncated away (in memory) and the next write cuts the stable log there first.
  - `tail`: the unstable entries, at `unstable_offset` on.
  - `reset`: a snapshot the stable log must restart at (a follower installed it), or
    None. While set, the stable log is not read at all: the log starts at that snapshot.
A Ready is always carried out before the next one is asked for; advance() still checks
that the tail it marks stable is the one it handed out, and leaves anything else unstable
(the next Ready writes it again over a truncation), as etcd's stableTo does. Not
thread-safe; no I/O here (the stable log is only read, except by compact(), which the
driver calls between Readies).
"""

from __future__ import annotations

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


class UnstableLog:
    """A RaftLog for the core's reads and in-memory writes over the stable `log`."""

    def __init__(self, log: RaftLog) -> None:
        self.stable = log
        self.unstable_offset = log.end_offset()
        self.tail: list[Entry] = []
        self.reset: SnapshotId | None = None

    # --- reads: stable + unstable -----------------------------------------------------------

    def start(self) -> SnapshotId:
        return self.reset if self.reset is not None else self.stable.start()

    def end_offset(self) -> int:
        return self.unstable_offset + len(self.tail)

    def last_epoch(self) -> int:
        if self.tail:
            return self.tail[-1].epoch
        start = self.start()
        if self.unstable_offset == start.end_offset:
            return start.epoch
        if self.unstable_offset == self.stable.end_offset():
            return self.stable.last_epoch()
        return self.stable.read(self.unstable_offset - 1, 1)[0].epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        start = self.start()
        if self.reset is not None:
            found = (start.epoch, start.end_offset) if epoch >= start.epoch else (0, 0)
        else:
            found = self.stable.end_offset_for_epoch(epoch)
            if found[1] > self.unstable_offset:
                # That epoch ran on into the truncated part: in this log it ends where the
                # stable part does, at the epoch of the last entry kept.
                found = (self._stable_last_epoch(), self.unstable_offset)
        for entry in self.tail:
            if entry.epoch > epoch:
                break
            found = (entry.epoch, entry.offset + 1)
        return found

    def read(self, offset: int, max_entries: int) -> Sequence[Entry]:
        if offset < self.start().end_offset:
            raise AssertionError(f"read at {offset}, below the log start {self.start()}")
        out: list[Entry] = []
        if offset < self.unstable_offset:
            out += self.stable.read(offset, min(max_entries, self.unstable_offset - offset))
            offset += len(out)
            if offset < self.unstable_offset:
                return out  # the stable log handed out fewer (never, for a whole log)
        index = offset - self.unstable_offset
        out += self.tail[index : index + max_entries - len(out)]
        return out

    # --- writes, in memory ------------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.offset != self.end_offset():
                raise AssertionError(f"append at {entry.offset}, log end is {self.end_offset()}")
            self.tail.append(entry)

    def truncate_to(self, offset: int) -> None:
        if offset < self.start().end_offset:
            raise AssertionError(f"truncate to {offset}, below the log start {self.start()}")
        if offset >= self.unstable_offset:
            del self.tail[offset - self.unstable_offset :]
        else:
            self.tail = []
            self.unstable_offset = offset

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        self.reset = snapshot_id
        self.tail = []
        self.unstable_offset = snapshot_id.end_offset

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        """Log-prefix cleanup on the stable log, which the driver does between Readies: the
        entries it drops must all be stable (a snapshot holds only applied entries)."""
        if self.reset is not None or snapshot_id.end_offset > self.unstable_offset:
            raise AssertionError(f"log start moved to {snapshot_id} over unstable entries")
        self.stable.delete_before(snapshot_id)

    # --- what a Ready writes, and marking it stable -----------------------------------------

    def writes(self) -> LogWrites:
        if not self.has_writes():
            return NO_LOG_WRITES
        truncate = None
        if self.reset is None and self._stable_end() > self.unstable_offset:
            truncate = self.unstable_offset
        return LogWrites(self.reset, truncate, tuple(self.tail))

    def stable_to(self, written: LogWrites) -> None:
        """The driver has written and fsynced `written` (what writes() returned)."""
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
        return (
            self.reset is not None
            or bool(self.tail)
            or self.stable.end_offset() > self.unstable_offset
        )

    def _stable_end(self) -> int:
        return self.stable.end_offset()

    def _stable_last_epoch(self) -> int:
        start = self.stable.start()
        if self.unstable_offset == start.end_offset:
            return start.epoch
        return self.stable.read(self.unstable_offset - 1, 1)[0].epoch
