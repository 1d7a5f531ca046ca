"""The simulated disk under one node: its Raft log and its snapshot store.

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
  entries were removed (truncated, lost in a crash, or dropped by moving the log start)
  since then.

Once snapshots exist the log starts at `base.end_offset` (raft/log.py): `entries[i]` is at
offset `start_offset + i`. Moving the log start (`delete_before`, `reset_to_snapshot`) is
durable at once, as MemoryRaftLog documents, so it is never undone by a crash: a reset
empties the journal (nothing written before it can come back), a prefix cleanup leaves the
journal alone (it only ever drops synced entries, see delete_before).

`SimSnapshotStore` is raft.snapshots.MemorySnapshotStore (complete snapshots survive a
crash, a partial download does not) that also hands the checker every snapshot completed
since it last looked, so each is verified against the committed log when it appears.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raft.log import MemoryRaftLog
from raft.messages import Entry, SnapshotId
from raft.snapshots import MemorySnapshotStore

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

    def entry_at(self, offset: int) -> Entry | None:
        """The entry at `offset`, None when the log does not hold it."""
        index = offset - self.base.end_offset
        return self.entries[index] if 0 <= index < len(self.entries) else None

    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        super().append(entries)
        self._journal.append(_Append(tuple(entries)))
        self.changed_from = min(self.changed_from, entries[0].offset)

    def truncate_to(self, offset: int) -> None:
        removed = tuple(self.entries[offset - self.start_offset :])
        super().truncate_to(offset)
        if removed:
            self._journal.append(_Truncate(offset, removed))
            self.changed_from = min(self.changed_from, offset)
            self._note_removed(offset, offset + len(removed))

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        low = self.start_offset
        # The journal stays right as long as the entries it would undo or redo are all kept:
        # the core only compacts up to what its state machine applied, which is committed and
        # (the driver syncs every Ready before the next event) synced.
        if any(
            (w.entries[0].offset if isinstance(w, _Append) else w.offset) < snapshot_id.end_offset
            for w in self._journal
        ):
            raise AssertionError(f"log start moved to {snapshot_id} over unsynced writes")
        super().delete_before(snapshot_id)
        if snapshot_id.end_offset > low:
            # Not lost: the snapshot holds them. Invariant (j) counts them as held through it.
            self._note_removed(low, snapshot_id.end_offset)

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        low, high = self.start_offset, self.end_offset()
        super().reset_to_snapshot(snapshot_id)
        self._journal.clear()  # durable at once: no write from before can come back
        self.changed_from = min(self.changed_from, snapshot_id.end_offset)
        if high > low:
            self._note_removed(low, high)

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
                    del self.entries[write.offset - self.start_offset :]
        # Whatever is on disk after the restart is durable from then on.
        self._journal.clear()
        self.synced = len(self.entries)
        self.changed_from = self.start_offset
        # The first offset whose entry is gone or different is where the crash removed data.
        same = 0
        limit = min(len(before), len(self.entries))
        while same < limit and before[same] is self.entries[same]:
            same += 1
        if same < len(before):
            self._note_removed(self.start_offset + same, self.start_offset + len(before))

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
        start = self.start_offset
        for write in reversed(self._journal):
            if isinstance(write, _Append):
                del self.entries[len(self.entries) - len(write.entries) :]
            else:
                assert start + len(self.entries) == write.offset
                self.entries.extend(write.removed)
        for index, entry in enumerate(self.entries):
            assert entry.offset == start + index, f"undo left entry {entry} at {start + index}"


class SimSnapshotStore(MemorySnapshotStore):
    def __init__(self) -> None:
        super().__init__()
        # Completed since the checker last looked, with their bytes (a later compaction may
        # delete one before the checker sees the store).
        self.fresh: list[tuple[SnapshotId, bytes]] = []

    def create(self, snapshot_id: SnapshotId, data: bytes) -> None:
        super().create(snapshot_id, data)
        self.fresh.append((snapshot_id, self.snapshots[snapshot_id]))

    def freeze(self, snapshot_id: SnapshotId) -> bool:
        complete = super().freeze(snapshot_id)
        if complete:
            self.fresh.append((snapshot_id, self.snapshots[snapshot_id]))
        return complete

    def take_fresh(self) -> list[tuple[SnapshotId, bytes]]:
        fresh, self.fresh = self.fresh, []
        return fresh

    def covered_end(self) -> int:
        """Every offset below this is held by a complete (durable) snapshot here."""
        latest = self.latest()
        return 0 if latest is None else latest.end_offset
