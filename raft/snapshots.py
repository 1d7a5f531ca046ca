"""Snapshots of the state machine (KIP-630) as the Raft core sees them, and an in-memory store.

A snapshot `SnapshotId(end_offset, epoch)` holds the state machine's state after applying
every entry below `end_offset`; once one exists, the log before it can go (log-prefix
cleanup), and a follower that needs entries the leader no longer has downloads the snapshot
in chunks (FetchSnapshot) instead. The core holds only a `SnapshotCatalog` (what exists,
sizes, dropping old ones); the driver writes downloads and reads the chunks a leader sends,
as Readies list them, through `SnapshotStore`: raft/snapshot_files.py keeps them as
`<end_offset:020d>-<epoch:010d>.checkpoint` files, the simulator and the scripts in memory.
"""

from __future__ import annotations

from typing import Protocol

from raft.messages import SnapshotChunk, SnapshotId


class SnapshotCatalog(Protocol):
    """What the Raft core holds of the snapshot store: which snapshots there are and their
    sizes (both kept in memory), and dropping old ones (advance() and compact_log(), the
    driver's calls between Readies). No reads: a chunk a leader sends is read by the driver
    (Ready.snapshot_reads, raft/ready_reads.py)."""

    def latest(self) -> SnapshotId | None:
        """The newest complete snapshot, None when there is none."""
        ...

    def size(self, snapshot_id: SnapshotId) -> int | None:
        """The snapshot's size in bytes; None when it is not (or no longer) here."""
        ...

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        """Deletes every complete snapshot older than `snapshot_id` (the log now starts at
        it, so they can serve nobody)."""
        ...


class SnapshotReader(Protocol):
    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        """Up to `max_bytes` of the snapshot from byte `position`."""
        ...


class SnapshotStore(SnapshotCatalog, SnapshotReader, Protocol):
    def begin(self, snapshot_id: SnapshotId) -> None:
        """Starts receiving a snapshot from a leader, dropping any partial one."""
        ...

    def write(self, snapshot_id: SnapshotId, position: int, data: bytes) -> None:
        """Adds the next chunk of the snapshot being received (`position` = bytes so far)."""
        ...

    def freeze(self, snapshot_id: SnapshotId) -> bool:
        """Completes the snapshot being received. Durable when this returns True: the caller
        drops the log it replaces right after. False: the bytes received do not form a valid
        snapshot (checksums), and they were dropped."""
        ...


def write_snapshot_chunk(store: SnapshotStore, chunk: SnapshotChunk) -> bool:
    """Carries out a Ready's SnapshotChunk on `store` (the driver's part): begins the
    download at position 0, writes the chunk, and freezes the last one; returns whether the
    snapshot was whole (True for every chunk but the last)."""
    if chunk.position == 0:
        store.begin(chunk.snapshot_id)
    store.write(chunk.snapshot_id, chunk.position, chunk.data)
    return store.freeze(chunk.snapshot_id) if chunk.last else True


class MemorySnapshotStore:
    """A SnapshotStore in a dict. Complete snapshots survive crash(); a partial one does not."""

    def __init__(self) -> None:
        self.snapshots: dict[SnapshotId, bytes] = {}
        self.partial: tuple[SnapshotId, bytearray] | None = None

    def latest(self) -> SnapshotId | None:
        return max(self.snapshots, default=None)

    def size(self, snapshot_id: SnapshotId) -> int | None:
        data = self.snapshots.get(snapshot_id)
        return None if data is None else len(data)

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        return self.snapshots[snapshot_id][position : position + max_bytes]

    def create(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """A snapshot the local state machine wrote (durable at once)."""
        self.snapshots[snapshot_id] = bytes(data)

    def begin(self, snapshot_id: SnapshotId) -> None:
        self.partial = (snapshot_id, bytearray())

    def write(self, snapshot_id: SnapshotId, position: int, data: bytes) -> None:
        if self.partial is None or self.partial[0] != snapshot_id:
            raise AssertionError(f"no download of {snapshot_id} in progress")
        if position != len(self.partial[1]):
            raise AssertionError(f"chunk at {position}, have {len(self.partial[1])} bytes")
        self.partial[1].extend(data)

    def freeze(self, snapshot_id: SnapshotId) -> bool:
        if self.partial is None or self.partial[0] != snapshot_id:
            raise AssertionError(f"no download of {snapshot_id} in progress")
        self.snapshots[snapshot_id] = bytes(self.partial[1])
        self.partial = None
        return True

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        for old in [s for s in self.snapshots if s < snapshot_id]:
            del self.snapshots[old]

    def crash(self) -> None:
        self.partial = None
