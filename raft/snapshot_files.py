"""Snapshots on disk: `<end_offset:020d>-<epoch:010d>.checkpoint` in the metadata log's directory.

The file names are Kafka's (KIP-630), and so is the content's shape: RecordBatch v2 batches
(CRC-32C checked on load), a control batch holding a SnapshotHeader record first, the state
machine's records, and a control batch holding a SnapshotFooter last, so a file cut short
is recognised as incomplete rather than loaded as a smaller state. A snapshot is written
whole to `<name>.part`, fsynced and renamed (then the directory fsynced), so a crash leaves
either no snapshot or a complete one; `.part` leftovers are deleted when the store opens.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from raft.limits import INT64_MAX, MAX_EPOCH, check_range
from raft.messages import SnapshotId
from storage.file_io import fsync_dir
from strom_api.record_batch import InvalidRecordBatchError
from strom_api.records import Record, decode_batches, encode_batch

SUFFIX = ".checkpoint"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_HEADER = b"SnapshotHeader v0"
_FOOTER = b"SnapshotFooter v0"
_RECORDS_PER_BATCH = 1000


class CorruptSnapshotError(Exception):
    """A snapshot file that does not decode (Kafka: CORRUPT_MESSAGE)."""

    error_name = "CORRUPT_MESSAGE"


def _check_id(snapshot_id: SnapshotId) -> None:
    """A snapshot's id is range-checked before a file is named after it."""
    check_range("snapshot epoch", snapshot_id.epoch, 0, MAX_EPOCH)
    check_range("snapshot end offset", snapshot_id.end_offset, 0, INT64_MAX)


def file_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def encode_snapshot(snapshot_id: SnapshotId, records: Sequence[bytes]) -> bytes:
    """The file's bytes: header batch, the records in batches, footer batch."""
    out = [_control(0, snapshot_id, _HEADER)]
    offset = 1
    for i in range(0, len(records), _RECORDS_PER_BATCH):
        chunk = records[i : i + _RECORDS_PER_BATCH]
        batch = [Record(offset + j, 0, None, r) for j, r in enumerate(chunk)]
        out.append(encode_batch(batch, partition_leader_epoch=snapshot_id.epoch))
        offset += len(chunk)
    out.append(_control(offset, snapshot_id, _FOOTER))
    return b"".join(out)


def decode_snapshot(data: bytes) -> list[bytes]:
    """The state machine's records; raises CorruptSnapshotError for anything incomplete."""
    try:
        batches = list(decode_batches(data))
    except InvalidRecordBatchError as exc:
        raise CorruptSnapshotError(f"snapshot does not decode: {exc}") from exc
    if (
        len(batches) < 2
        or not _is_marker(batches[0], _HEADER)
        or not _is_marker(batches[-1], _FOOTER)
    ):
        raise CorruptSnapshotError("snapshot lacks its header or footer (cut short?)")
    return [r.value or b"" for _, records in batches[1:-1] for r in records]


def _control(offset: int, snapshot_id: SnapshotId, marker: bytes) -> bytes:
    return encode_batch(
        [Record(offset, 0, None, marker)],
        partition_leader_epoch=snapshot_id.epoch,
        control=True,
    )


def _is_marker(batch: tuple[object, list[Record]], marker: bytes) -> bool:
    header, records = batch
    return bool(getattr(header, "is_control", False)) and [r.value for r in records] == [marker]


class FileSnapshotStore:
    """A raft.snapshots.SnapshotStore over a directory. Not thread-safe: the driver's loop
    owns it, and the state machine's `create` runs while that loop awaits it; `read` alone
    may run in the driver's disk thread (it opens a complete file, which only the loop
    deletes, between Readies). Which snapshots exist and their sizes are kept in memory:
    the Raft core asks them inside step()."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._sizes: dict[SnapshotId, int] = {}
        for name in os.listdir(directory):
            if name.endswith(".part"):
                os.unlink(os.path.join(directory, name))  # a download or write cut short
            elif match := _NAME.match(name):
                snapshot_id = SnapshotId(int(match.group(1)), int(match.group(2)))
                self._sizes[snapshot_id] = os.path.getsize(os.path.join(directory, name))
        self._partial: tuple[SnapshotId, int] | None = None  # (id, open file descriptor)

    def ids(self) -> list[SnapshotId]:
        return sorted(self._sizes)

    def path(self, snapshot_id: SnapshotId) -> str:
        return os.path.join(self.directory, file_name(snapshot_id))

    def latest(self) -> SnapshotId | None:
        return max(self._sizes, default=None)

    def size(self, snapshot_id: SnapshotId) -> int | None:
        return self._sizes.get(snapshot_id)

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        with open(self.path(snapshot_id), "rb") as f:
            return os.pread(f.fileno(), max_bytes, position)

    def read_records(self, snapshot_id: SnapshotId) -> list[bytes]:
        with open(self.path(snapshot_id), "rb") as f:
            return decode_snapshot(f.read())

    def create(self, snapshot_id: SnapshotId, records: Sequence[bytes]) -> None:
        """Writes a snapshot of the local state machine; durable when this returns."""
        self.write_file(snapshot_id, records)
        self.add(snapshot_id)

    def write_file(self, snapshot_id: SnapshotId, records: Sequence[bytes]) -> None:
        """The slow half of create(): encodes and writes the file durably. It touches no
        state of the store (a worker thread runs it while the loop serves downloads)."""
        _check_id(snapshot_id)
        path = self.path(snapshot_id)
        with open(path + ".local.part", "wb") as f:
            f.write(encode_snapshot(snapshot_id, records))
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".local.part", path)
        fsync_dir(self.directory)

    def add(self, snapshot_id: SnapshotId) -> None:
        """The other half: the store now serves the snapshot written by write_file()."""
        self._sizes[snapshot_id] = os.path.getsize(self.path(snapshot_id))

    def begin(self, snapshot_id: SnapshotId) -> None:
        _check_id(snapshot_id)
        self._drop_partial()
        fd = os.open(self.path(snapshot_id) + ".part", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._partial = (snapshot_id, fd)

    def write(self, snapshot_id: SnapshotId, position: int, data: bytes) -> None:
        fd = self._partial_fd(snapshot_id)
        if position != os.fstat(fd).st_size:
            raise ValueError(f"chunk of {snapshot_id} at {position}, the file is shorter")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def freeze(self, snapshot_id: SnapshotId) -> bool:
        fd = self._partial_fd(snapshot_id)
        path = self.path(snapshot_id)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
            self._partial = None
        try:
            with open(path + ".part", "rb") as f:
                decode_snapshot(f.read())  # only a complete, valid snapshot is kept
        except CorruptSnapshotError:
            os.unlink(path + ".part")
            return False
        os.replace(path + ".part", path)
        fsync_dir(self.directory)
        self._sizes[snapshot_id] = os.path.getsize(path)
        return True

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        for old in [s for s in self._sizes if s < snapshot_id]:
            del self._sizes[old]
            try:
                os.unlink(self.path(old))
            except FileNotFoundError:
                pass

    def close(self) -> None:
        self._drop_partial()

    def _partial_fd(self, snapshot_id: SnapshotId) -> int:
        if self._partial is None or self._partial[0] != snapshot_id:
            raise ValueError(f"no snapshot {snapshot_id} is being written")
        return self._partial[1]

    def _drop_partial(self) -> None:
        if self._partial is not None:
            snapshot_id, fd = self._partial
            os.close(fd)
            self._partial = None
            try:
                os.unlink(self.path(snapshot_id) + ".part")
            except FileNotFoundError:
                pass
