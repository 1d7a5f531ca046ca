"""The replicated log as the Raft core sees it, and an in-memory implementation.

The core touches the stable log only when the node opens (raft/unstable_log.py keeps its
start, end and epoch index in memory from then on) and, between Readies, to move its start
(`LogPrefix`, compaction). Everything else is the driver's, as a Ready lists it: the writes
(then an fsync if `sync_log`) and the reads of entries to send or apply
(raft/ready_reads.py). Production backs this with a
`storage.Log` (the `__cluster_metadata-0` partition); tests and the simulator use
`MemoryRaftLog`, whose `crash()` loses what was not synced, as a power cut would.

Once snapshots exist the log need not start at offset 0: `start()` is the snapshot at the
log start (KIP-630's "earliest snapshot"), which stands in for the entries before it: an
empty log's last epoch is that snapshot's epoch, and an epoch that ended inside it ends at
its end offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from raft.messages import NO_SNAPSHOT, Entry, SnapshotId


class LogPrefix(Protocol):
    """All the core holds of the stable log once it runs: no reads, no appends."""

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        """Log-prefix cleanup: the log now starts at `snapshot_id` (a snapshot holding
        everything before it exists), and the entries below its end offset go."""
        ...


class EntryReader(Protocol):
    """What the driver reads entries through (raft/ready_reads.py)."""

    def read(self, offset: int, max_entries: int) -> Sequence[Entry]:
        """Entries from `offset` on, at most `max_entries`."""
        ...


class RaftLog(LogPrefix, EntryReader, Protocol):
    def start(self) -> SnapshotId:
        """The snapshot the log starts at (NO_SNAPSHOT: it starts at offset 0)."""
        ...

    def end_offset(self) -> int:
        """The next offset to be written (the log end offset)."""
        ...

    def last_epoch(self) -> int:
        """The epoch of the last entry; for an empty log, the start snapshot's epoch."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` in the log, the offset where it ends), the answer a
        leader gives a diverging follower; (0, 0) when the log has no entry that old."""
        ...

    def epoch_starts(self) -> Sequence[tuple[int, int]]:
        """(epoch, offset of its first entry) for each epoch in the log, oldest first: the
        epoch index the core keeps in memory (Kafka's leader-epoch cache). The first may
        start below the log start (it is counted from there)."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Appends entries whose offsets continue from the log end."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Removes every entry at `offset` and above."""
        ...

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Drops every entry; the log starts (and ends) at `snapshot_id`: a follower that
        installed that snapshot from its leader."""
        ...


class MemoryRaftLog:
    """A RaftLog in a list. `synced` entries survive crash(); the rest are lost. Moving the
    log start (delete_before, reset_to_snapshot) is durable at once."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []  # entries[i] is at offset start_offset + i
        self.base = NO_SNAPSHOT
        self.synced = 0  # how many leading entries are durable

    @property
    def start_offset(self) -> int:
        return self.base.end_offset

    def start(self) -> SnapshotId:
        return self.base

    def end_offset(self) -> int:
        return self.base.end_offset + len(self.entries)

    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else self.base.epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        floor_epoch, end = (
            (self.base.epoch, self.base.end_offset) if epoch >= self.base.epoch else (0, 0)
        )
        for entry in self.entries:
            if entry.epoch > epoch:
                break
            floor_epoch, end = entry.epoch, entry.offset + 1
        return floor_epoch, end

    def epoch_starts(self) -> Sequence[tuple[int, int]]:
        starts: list[tuple[int, int]] = []
        for entry in self.entries:
            if not starts or starts[-1][0] != entry.epoch:
                starts.append((entry.epoch, entry.offset))
        return starts

    def read(self, offset: int, max_entries: int) -> Sequence[Entry]:
        if offset < self.base.end_offset:
            raise AssertionError(f"read at {offset}, below the log start {self.base.end_offset}")
        index = offset - self.base.end_offset
        return self.entries[index : index + max_entries]

    def append(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.offset != self.end_offset():
                raise AssertionError(f"append at {entry.offset}, log end is {self.end_offset()}")
            self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        if offset < self.base.end_offset:
            raise AssertionError(f"truncate to {offset}, below the log start {self.base}")
        index = offset - self.base.end_offset
        del self.entries[index:]
        self.synced = min(self.synced, index)

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        if not self.base.end_offset <= snapshot_id.end_offset <= self.end_offset():
            raise AssertionError(f"log start {snapshot_id} outside the log {self.base}..")
        dropped = snapshot_id.end_offset - self.base.end_offset
        del self.entries[:dropped]
        self.synced = max(0, self.synced - dropped)
        self.base = snapshot_id

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        self.entries = []
        self.synced = 0
        self.base = snapshot_id

    def sync(self) -> None:
        self.synced = len(self.entries)

    def crash(self) -> None:
        """What a power cut leaves: only the synced prefix."""
        del self.entries[self.synced :]
