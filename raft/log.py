"""The replicated log as the Raft core sees it, and an in-memory implementation.

The core reads and writes the log through `RaftLog` and never syncs it: a Ready with
`sync_log` tells the driver to fsync before sending. Production backs this with a
`storage.Log` (the `__cluster_metadata-0` partition); tests and the simulator use
`MemoryRaftLog`, whose `crash()` loses what was not synced, as a power cut would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from raft.messages import Entry


class RaftLog(Protocol):
    def end_offset(self) -> int:
        """The next offset to be written (the log end offset)."""
        ...

    def last_epoch(self) -> int:
        """The epoch of the last entry, 0 for an empty log."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` in the log, the offset where it ends), the answer a
        leader gives a diverging follower; (0, 0) when the log has no entry that old."""
        ...

    def read(self, offset: int, max_entries: int) -> Sequence[Entry]:
        """Entries from `offset` on, at most `max_entries`."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Appends entries whose offsets continue from the log end."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Removes every entry at `offset` and above."""
        ...


class MemoryRaftLog:
    """A RaftLog in a list. `synced` entries survive crash(); the rest are lost."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.synced = 0  # how many leading entries are durable

    def end_offset(self) -> int:
        return len(self.entries)

    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        floor_epoch, end = 0, 0
        for entry in self.entries:
            if entry.epoch > epoch:
                break
            floor_epoch, end = entry.epoch, entry.offset + 1
        return floor_epoch, end

    def read(self, offset: int, max_entries: int) -> Sequence[Entry]:
        return self.entries[offset : offset + max_entries]

    def append(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.offset != len(self.entries):
                raise AssertionError(f"append at {entry.offset}, log end is {len(self.entries)}")
            self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        del self.entries[offset:]
        self.synced = min(self.synced, offset)

    def sync(self) -> None:
        self.synced = len(self.entries)

    def crash(self) -> None:
        """What a power cut leaves: only the synced prefix."""
        del self.entries[self.synced :]
