"""The two sparse indexes of a segment, as Kafka lays them out. Not thread-safe.

`.index` (OffsetIndex): 8-byte big-endian entries
    relativeOffset i32   last offset of a batch, minus the segment's base offset
    position       i32   byte position of that batch in the `.log` file
`.timeindex` (TimeIndex): 12-byte big-endian entries
    timestamp      i64   largest timestamp seen in the segment up to this point
    relativeOffset i32   last offset of the batch that first reached that timestamp

An entry is added every `index.interval.bytes` of log, so lookups land a short forward scan
from their target. Entries are strictly increasing in both fields. The files carry no
checksum: the log is the truth. Recovery rebuilds them, and the segment checks every entry
it uses against the batch it points at, rebuilding both indexes on a mismatch. Entries live
in memory (compact arrays; 2 GiB of log at the default interval is about 4 MiB) and reach
the file in batches, fsynced by flush().
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
assert _OFFSET_ENTRY.size == 8 and _TIME_ENTRY.size == 12

_WRITE_BEHIND_BYTES = 64 * 1024


class _EntryFile:
    """Fixed-width entries appended to a file through a small write-behind buffer."""

    def __init__(self, path: str, entry_size: int, persisted: int) -> None:
        self.path = path
        self._entry_size = entry_size
        self._persisted = persisted  # entries already in the file
        self._pending = bytearray()

    def add(self, encoded: bytes) -> None:
        self._pending += encoded
        if len(self._pending) >= _WRITE_BEHIND_BYTES:
            self.write()

    def write(self) -> None:
        if not self._pending:
            return
        with open(self.path, "ab") as f:
            f.write(self._pending)
        self._persisted += len(self._pending) // self._entry_size
        self._pending.clear()

    def flush(self) -> None:
        self.write()
        fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate_entries(self, count: int) -> None:
        self.write()
        with open(self.path, "ab") as f:
            f.truncate(count * self._entry_size)
        self._persisted = count

    def rename(self, path: str) -> None:
        self.write()
        if os.path.exists(self.path):
            os.replace(self.path, path)
        self.path = path


def _read_entries(path: str, entry_size: int) -> bytes | None:
    """The file's bytes, or None when it is missing or not whole entries (rebuild it)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return data if len(data) % entry_size == 0 else None


class OffsetIndex:
    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._relative = array("i")
        self._positions = array("i")
        self._file = _EntryFile(path, _OFFSET_ENTRY.size, 0)

    @classmethod
    def load(
        cls, path: str, base_offset: int, max_entries: int, log_size: int
    ) -> OffsetIndex | None:
        """Reads an index from disk; None when it is missing or fails the sanity checks."""
        data = _read_entries(path, _OFFSET_ENTRY.size)
        if data is None:
            return None
        index = cls(path, base_offset, max_entries)
        entries = array("i", data)
        if sys.byteorder == "little":
            entries.byteswap()  # the file is big-endian; array() reads native order
        index._relative = entries[0::2]
        index._positions = entries[1::2]
        index._file = _EntryFile(path, _OFFSET_ENTRY.size, len(index._relative))
        if index._relative:
            strictly_up = index._relative[0] >= 0 and index._positions[0] >= 0
            if not strictly_up or index._positions[-1] >= max(log_size, 1):
                return None
        return index

    @property
    def path(self) -> str:
        return self._file.path

    def __len__(self) -> int:
        return len(self._relative)

    @property
    def is_full(self) -> bool:
        return len(self._relative) >= self.max_entries

    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, or (base, 0) when empty."""
        if not self._relative:
            return self.base_offset, 0
        return self.base_offset + self._relative[-1], self._positions[-1]

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._relative and (relative <= self._relative[-1] or position <= self._positions[-1]):
            return  # not past the last entry: an entry must strictly advance both fields
        self._relative.append(relative)
        self._positions.append(position)
        self._file.add(_OFFSET_ENTRY.pack(relative, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`; (base, 0) if none.

        The batch at that position holds that entry's offset, so a forward scan from it
        reaches the batch holding `offset`."""
        i = bisect_right(self._relative, offset - self.base_offset)
        if i == 0:
            return self.base_offset, 0
        return self.base_offset + self._relative[i - 1], self._positions[i - 1]

    def floor_by_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before byte `position`; (base, 0)."""
        i = bisect_right(self._positions, position)
        if i == 0:
            return self.base_offset, 0
        return self.base_offset + self._relative[i - 1], self._positions[i - 1]

    def truncate_to(self, offset: int) -> None:
        """Drops every entry for `offset` and above."""
        keep = bisect_right(self._relative, offset - self.base_offset - 1)
        if keep == len(self._relative):
            return
        del self._relative[keep:]
        del self._positions[keep:]
        self._file.truncate_entries(keep)

    def reset(self) -> None:
        self._relative = array("i")
        self._positions = array("i")
        self._file.truncate_entries(0)

    def flush(self) -> None:
        self._file.flush()

    def write(self) -> None:
        self._file.write()

    def rename(self, path: str) -> None:
        self._file.rename(path)


class TimeIndex:
    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._timestamps = array("q")
        self._relative = array("i")
        self._file = _EntryFile(path, _TIME_ENTRY.size, 0)

    @classmethod
    def load(cls, path: str, base_offset: int, max_entries: int) -> TimeIndex | None:
        data = _read_entries(path, _TIME_ENTRY.size)
        if data is None:
            return None
        index = cls(path, base_offset, max_entries)
        count = len(data) // _TIME_ENTRY.size
        # One C-level unpack of all entries; entries are checked against the log when used.
        fields = struct.unpack(">" + "qi" * count, data)
        index._timestamps = array("q", fields[0::2])
        index._relative = array("i", fields[1::2])
        if count and (index._relative[0] < 0 or index._relative[-1] < index._relative[0]):
            return None
        index._file = _EntryFile(path, _TIME_ENTRY.size, len(index._relative))
        return index

    @property
    def path(self) -> str:
        return self._file.path

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry, None when empty."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._relative[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Adds an entry only when `timestamp` is a new maximum, as Kafka does."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        relative = offset - self.base_offset
        if self._relative and relative < self._relative[-1]:
            return
        self._timestamps.append(timestamp)
        self._relative.append(relative)
        self._file.add(_TIME_ENTRY.pack(timestamp, relative))

    def lookup_entry(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry whose timestamp is at most
        `timestamp`, None when there is none."""
        i = bisect_right(self._timestamps, timestamp)
        if i == 0:
            return None
        return self._timestamps[i - 1], self.base_offset + self._relative[i - 1]

    def lookup(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp is at most `timestamp` (base if none).

        Every record before that offset has a smaller timestamp than the target, or the
        entry's own, so a scan for the first record >= `timestamp` may start there."""
        entry = self.lookup_entry(timestamp)
        return self.base_offset if entry is None else entry[1]

    def truncate_to(self, offset: int) -> None:
        keep = bisect_right(self._relative, offset - self.base_offset - 1)
        if keep == len(self._relative):
            return
        del self._timestamps[keep:]
        del self._relative[keep:]
        self._file.truncate_entries(keep)

    def reset(self) -> None:
        self._timestamps = array("q")
        self._relative = array("i")
        self._file.truncate_entries(0)

    def flush(self) -> None:
        self._file.flush()

    def write(self) -> None:
        self._file.write()

    def rename(self, path: str) -> None:
        self._file.rename(path)
