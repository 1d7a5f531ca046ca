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


def _read_entries(path: str, entry_size: int) -> bytes | None:
    """The file's bytes, or None when it is missing or not whole entries (rebuild it)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return data if len(data) % entry_size == 0 else None


class _SparseIndex:
    """What both indexes share: entries as two parallel arrays (relative offsets, and
    positions or timestamps), appended to the file through a small write-behind buffer."""

    _entry: struct.Struct
    _value_type: str  # array typecode of the second field

    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._relative = array("i")
        self._values = array(self._value_type)
        self._pending = bytearray()

    def __len__(self) -> int:
        return len(self._relative)

    @property
    def is_full(self) -> bool:
        return len(self._relative) >= self.max_entries

    def _add(self, relative: int, value: int, encoded: bytes) -> None:
        self._relative.append(relative)
        self._values.append(value)
        self._pending += encoded
        if len(self._pending) >= _WRITE_BEHIND_BYTES:
            self.write()

    def write(self) -> None:
        """Hands pending entries to the file (the page cache; flush() makes them durable)."""
        if self._pending:
            with open(self.path, "ab") as f:
                f.write(self._pending)
            self._pending.clear()

    def flush(self) -> None:
        self.write()
        fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate_to(self, offset: int) -> None:
        """Drops every entry for `offset` and above."""
        keep = bisect_right(self._relative, offset - self.base_offset - 1)
        if keep < len(self._relative):
            self._truncate_entries(keep)

    def reset(self) -> None:
        self._truncate_entries(0)

    def _truncate_entries(self, keep: int) -> None:
        self.write()
        del self._relative[keep:]
        del self._values[keep:]
        with open(self.path, "ab") as f:
            f.truncate(keep * self._entry.size)


class OffsetIndex(_SparseIndex):
    _entry = _OFFSET_ENTRY
    _value_type = "i"  # positions

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
        index._values = entries[1::2]
        if index._relative:
            sane = index._relative[0] >= 0 and index._values[0] >= 0
            if not sane or index._values[-1] >= max(log_size, 1):
                return None
        return index

    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, or (base, 0) when empty."""
        if not self._relative:
            return self.base_offset, 0
        return self.base_offset + self._relative[-1], self._values[-1]

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._relative and (relative <= self._relative[-1] or position <= self._values[-1]):
            return  # not past the last entry: an entry must strictly advance both fields
        self._add(relative, position, _OFFSET_ENTRY.pack(relative, position))

    def _entry_at(self, i: int) -> tuple[int, int]:
        if i == 0:
            return self.base_offset, 0
        return self.base_offset + self._relative[i - 1], self._values[i - 1]

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`; (base, 0) if none.

        The batch at that position holds that entry's offset, so a forward scan from it
        reaches the batch holding `offset`."""
        return self._entry_at(bisect_right(self._relative, offset - self.base_offset))

    def floor_by_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before byte `position`; (base, 0)."""
        return self._entry_at(bisect_right(self._values, position))


class TimeIndex(_SparseIndex):
    _entry = _TIME_ENTRY
    _value_type = "q"  # timestamps

    @classmethod
    def load(cls, path: str, base_offset: int, max_entries: int) -> TimeIndex | None:
        data = _read_entries(path, _TIME_ENTRY.size)
        if data is None:
            return None
        index = cls(path, base_offset, max_entries)
        count = len(data) // _TIME_ENTRY.size
        # One C-level unpack of all entries; entries are checked against the log when used.
        fields = struct.unpack(">" + "qi" * count, data)
        index._values = array("q", fields[0::2])
        index._relative = array("i", fields[1::2])
        if count and (index._relative[0] < 0 or index._relative[-1] < index._relative[0]):
            return None
        return index

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry, None when empty."""
        if not self._relative:
            return None
        return self._values[-1], self.base_offset + self._relative[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Adds an entry only when `timestamp` is a new maximum, as Kafka does."""
        relative = offset - self.base_offset
        if self._relative and (timestamp <= self._values[-1] or relative < self._relative[-1]):
            return
        self._add(relative, timestamp, _TIME_ENTRY.pack(timestamp, relative))

    def lookup_entry(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry whose timestamp is at most
        `timestamp`, None when there is none."""
        i = bisect_right(self._values, timestamp)
        if i == 0:
            return None
        return self._values[i - 1], self.base_offset + self._relative[i - 1]

    def lookup(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp is at most `timestamp` (base if none).

        Every record before that offset has a smaller timestamp than the target, or the
        entry's own, so a scan for the first record >= `timestamp` may start there."""
        entry = self.lookup_entry(timestamp)
        return self.base_offset if entry is None else entry[1]
