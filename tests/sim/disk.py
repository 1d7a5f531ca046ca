"""The simulated disk under one node's Raft log.

`SimLog` is raft.log.MemoryRaftLog (what `sync()` covered survives `crash()`, the rest is
lost) plus two things the simulator needs:

- Torn writes. A real power cut does not always lose *everything* written since the last
  fsync: the disk may have written some of it. With an ordered journal (ext4 data=ordered,
  a log-structured store) what survives is the synced image plus a *prefix* of the writes
  made since, applied in order. That includes a truncation that never reached the disk: the
  entries it removed come back. `crash(torn_writes=k)` leaves exactly that: the state after
  the first k writes since the last sync. Every such state is one a disk could be in, so the
  core must be safe in all of them.
- Change tracking for the invariant checker: `changed_from` is the lowest offset appended or
  removed since the checker last looked, so it re-verifies only what may have changed
  instead of the whole log after every event; `removed` is the range of offsets whose
  entries were removed (truncated or lost in a crash) since then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raft.log import MemoryRaftLog
from raft.messages import Entry

UNCHANGED = 2**62


@dataclass(frozen=True, slots=True)
class _Append:
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class _Truncate:
    offset: int
    removed: tuple[Entry, ...]  # kept so a crash can undo a truncation that never hit disk


class SimLog(MemoryRaftLog):
    def __init__(self) -> None:
        super().__init__()
        # The writes since the last sync, oldest first: undoing them all gives the synced
        # image, redoing a prefix gives a torn write.
        self._journal: list[_Append | _Truncate] = []
        self.changed_from = UNCHANGED
        self.removed: tuple[int, int] | None = None  # [low, high) removed since last looked
        self.syncs = 0

    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        super().append(entries)
        self._journal.append(_Append(tuple(entries)))
        self.changed_from = min(self.changed_from, entries[0].offset)

    def truncate_to(self, offset: int) -> None:
        removed = tuple(self.entries[offset:])
        super().truncate_to(offset)
        if removed:
            self._journal.append(_Truncate(offset, removed))
            self.changed_from = min(self.changed_from, offset)
            self._note_removed(offset, offset + len(removed))

    def sync(self) -> None:
        super().sync()
        self._journal.clear()
        self.syncs += 1

    @property
    def unsynced_writes(self) -> int:
        return len(self._journal)

    def crash(self, torn_writes: int = 0) -> None:
        """A power cut. With `torn_writes` = 0 this is MemoryRaftLog.crash(): only the synced
        prefix survives. With k > 0 the first k writes since the last sync made it to disk."""
        assert 0 <= torn_writes <= len(self._journal)
        before = list(self.entries)
        if torn_writes == 0:
            super().crash()
        else:
            survivors = self._journal[:torn_writes]
            self._undo_all()
            for write in survivors:
                if isinstance(write, _Append):
                    self.entries.extend(write.entries)
                else:
                    del self.entries[write.offset :]
        # Whatever is on disk after the restart is durable from then on.
        self._journal.clear()
        self.synced = len(self.entries)
        self.changed_from = 0
        # The first offset whose entry is gone or different is where the crash removed data.
        same = 0
        limit = min(len(before), len(self.entries))
        while same < limit and before[same] is self.entries[same]:
            same += 1
        if same < len(before):
            self._note_removed(same, len(before))

    def take_changes(self) -> tuple[int, tuple[int, int] | None]:
        """(lowest offset changed, range removed) since the last call; resets both."""
        changes = (self.changed_from, self.removed)
        self.changed_from = UNCHANGED
        self.removed = None
        return changes

    def _note_removed(self, low: int, high: int) -> None:
        if self.removed is not None:
            low, high = min(low, self.removed[0]), max(high, self.removed[1])
        self.removed = (low, high)

    def _undo_all(self) -> None:
        for write in reversed(self._journal):
            if isinstance(write, _Append):
                del self.entries[len(self.entries) - len(write.entries) :]
            else:
                assert len(self.entries) == write.offset
                self.entries.extend(write.removed)
        for offset, entry in enumerate(self.entries):
            assert entry.offset == offset, f"undo left entry {entry} at offset {offset}"
