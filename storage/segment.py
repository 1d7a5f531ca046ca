"""One log segment: `{base:020d}.log` plus its `.index` and `.timeindex`. Not thread-safe.

The `.log` file is RecordBatch v2 batches back to back, nothing else (see
strom_api.record_batch). The segment holds offsets from its base offset (the name) up to the
next segment's base. Batch bytes are written with one pwritev per append and read back with
pread by file position; the segment never decodes records except to answer a lookup by
timestamp or to recover.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from storage.config import INT_MAX, LogConfig
from storage.errors import CorruptRecordError
from storage.indexes import OffsetIndex, TimeIndex
from strom_api.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    InvalidRecordBatchError,
    check_extent_and_crc,
    parse_header,
)
from strom_api.records import decode_batch

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)

_SCAN_WINDOW = 4096  # about one index interval: a lookup scans at most that far
_RECOVERY_WINDOW = 8 * 1024 * 1024
_IOV_MAX = 1024  # Linux's limit on buffers in one pwritev

# What the segment needs to know of a batch it appends: (last offset, max timestamp, size).
BatchEntry = tuple[int, int, int]


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(slots=True)
class RecoveryResult:
    valid_bytes: int
    truncated_bytes: int  # the invalid tail that was cut off
    epoch_starts: list[tuple[int, int]]  # (leader epoch, first offset) where the epoch rises


class LogSegment:
    def __init__(
        self, directory: str, base_offset: int, config: LogConfig, file_suffix: str = ""
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.file_suffix = file_suffix  # ".cleaned" while the cleaner builds a replacement
        self.fd = os.open(self._path(LOG_SUFFIX), os.O_RDWR | os.O_CREAT, 0o644)
        # A segment dropped without close() (a Log abandoned after an error, a test's log)
        # gives its descriptor back when it is collected instead of holding it for the
        # process's life: a process that held 1,000 of them could no longer select() on a
        # socket. close_file() closes it once, however many paths reach it.
        self.close_file = weakref.finalize(self, os.close, self.fd)
        self.size = os.fstat(self.fd).st_size
        self.index = OffsetIndex(self._path(INDEX_SUFFIX), base_offset, config.max_index_entries)
        self.time_index = TimeIndex(
            self._path(TIME_INDEX_SUFFIX), base_offset, config.max_time_index_entries
        )
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_max_timestamp: int | None = None  # Kafka's rolling-based timestamp
        self.created_ms: int | None = None
        self._bytes_since_index_entry = 0

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def create(
        cls, directory: str, base_offset: int, config: LogConfig, now_ms: int, file_suffix: str = ""
    ) -> LogSegment:
        for suffix in SUFFIXES:
            path = os.path.join(directory, file_name(base_offset, suffix) + file_suffix)
            if os.path.exists(path):
                os.unlink(path)
        segment = cls(directory, base_offset, config, file_suffix)
        segment.created_ms = now_ms
        return segment

    @classmethod
    def open_existing(cls, directory: str, base_offset: int, config: LogConfig) -> LogSegment:
        """Opens a segment trusting its indexes when they pass the sanity checks; otherwise
        scans it as recovery does. Call recover() to validate every batch."""
        segment = cls(directory, base_offset, config)
        index = OffsetIndex.load(
            segment.index.path, base_offset, config.max_index_entries, segment.size
        )
        time_index = TimeIndex.load(
            segment.time_index.path, base_offset, config.max_time_index_entries
        )
        if index is None or time_index is None:
            segment.recover()
            return segment
        segment.index, segment.time_index = index, time_index
        segment._load_tail_state()
        return segment

    def _load_tail_state(self) -> None:
        """Next offset and max timestamp from the last index entries plus a short scan; the
        two last entries are checked against the log first (they decide both), and any
        doubt means a full scan."""
        if not self._last_entries_match_log():
            self.recover()
            return
        last = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = last or (-1, self.base_offset)
        _, position = self.index.last_entry()
        self.next_offset = self.base_offset
        end = position
        for pos, header in self._scan(position):
            end = pos + header.size
            self.next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        if end != self.size:
            self.recover()  # the tail is not whole batches: validate the whole segment
            return
        self._bytes_since_index_entry = self.size - position
        self.first_batch_max_timestamp = None
        if self.size >= HEADER_SIZE:
            first = parse_header(os.pread(self.fd, HEADER_SIZE, 0))
            self.first_batch_max_timestamp = first.max_timestamp

    def recover(self) -> RecoveryResult:
        """Validates every batch (header, extent, CRC, rising offsets), rebuilds both indexes,
        and cuts the file at the first invalid batch. Never raises for bad bytes."""
        self.index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_max_timestamp = None
        self._bytes_since_index_entry = 0
        file_size = os.fstat(self.fd).st_size
        pos = 0
        window = b""
        window_start = 0
        epoch_starts: list[tuple[int, int]] = []
        while pos < file_size:
            end_needed = pos + HEADER_SIZE
            if end_needed > window_start + len(window):
                window_start, window = pos, os.pread(self.fd, _RECOVERY_WINDOW, pos)
            try:
                header = parse_header(window, pos - window_start)
                if pos + header.size > file_size:
                    break
                if pos + header.size > window_start + len(window):
                    window_start, window = (
                        pos,
                        os.pread(self.fd, max(_RECOVERY_WINDOW, header.size), pos),
                    )
                check_extent_and_crc(window, pos - window_start, header)
            except InvalidRecordBatchError:
                break
            if (
                header.base_offset < self.next_offset
                or header.last_offset - self.base_offset > INT_MAX
            ):
                # Offsets must rise and fit the segment's i32 relative offsets; baseOffset is
                # outside the CRC, so a flipped bit there is caught only by this check.
                break
            self._account(header.last_offset, header.max_timestamp, header.size, pos)
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (not epoch_starts or epoch > epoch_starts[-1][0]):
                epoch_starts.append((epoch, header.base_offset))
            pos += header.size
        self.size = pos
        if pos < file_size:
            os.ftruncate(self.fd, pos)
        return RecoveryResult(pos, file_size - pos, epoch_starts)

    # --- writing -------------------------------------------------------------------------

    def _account(self, last_offset: int, max_timestamp: int, size: int, position: int) -> None:
        """Updates indexes and in-memory state for a batch now lying at `position`."""
        if self.first_batch_max_timestamp is None:
            self.first_batch_max_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index_entry > self.config.index_interval_bytes:
            self.index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size
        self.next_offset = last_offset + 1

    def append(self, entries: Sequence[BatchEntry], buffers: Sequence[bytes | memoryview]) -> None:
        """Writes already validated and stamped batches: `buffers` concatenated are exactly
        the batches that `entries` describe, in order."""
        position = self.size
        written = _pwrite_all(self.fd, buffers, position)
        self.size += written
        for last_offset, max_timestamp, size in entries:
            self._account(last_offset, max_timestamp, size, position)
            position += size

    def on_roll(self) -> None:
        """The segment becomes read-only: record its final max timestamp and make both
        indexes durable (small files; the log itself is fsynced by the next flush)."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.flush()
        self.time_index.flush()

    def flush(self, indexes: bool = True) -> None:
        """fsyncs the log file and, unless told not to, both indexes. The active segment's
        indexes need no fsync: recovery rebuilds them (it scans from the recovery point)."""
        os.fsync(self.fd)
        if indexes:
            self.index.flush()
            self.time_index.flush()

    def truncate_to(self, offset: int) -> int:
        """Removes every batch whose last offset is at or above `offset`; returns bytes cut."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, header = found
        cut = self.size - position
        os.ftruncate(self.fd, position)
        self.size = position
        self.index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self._load_tail_state()
        return cut

    # --- reading -------------------------------------------------------------------------

    def _scan(self, position: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the batches from `position` whose headers lie before `end`, read in
        small windows; stops at a bad header."""
        end = self.size if end is None else end
        window = b""
        window_start = position
        while position + HEADER_SIZE <= end:
            if position + HEADER_SIZE > window_start + len(window):
                length = max(min(_SCAN_WINDOW, end - position), HEADER_SIZE)
                window_start, window = position, os.pread(self.fd, length, position)
            try:
                header = parse_header(window, position - window_start)
            except InvalidRecordBatchError:
                return
            yield position, header
            position += header.size

    def _checked(self, entry: tuple[int, int]) -> int | None:
        """The position of an index entry once the batch there is seen to hold the entry's
        offset; None (after rebuilding both indexes from the log) when it does not."""
        if self._entry_matches_log(entry):
            return entry[1]
        self.recover()
        return None

    def _header_at(self, position: int) -> BatchHeader | None:
        try:
            return parse_header(os.pread(self.fd, HEADER_SIZE, position))
        except InvalidRecordBatchError:
            return None

    def _entry_matches_log(self, entry: tuple[int, int]) -> bool:
        """Whether the batch at an offset-index entry's position holds the entry's offset."""
        offset, position = entry
        if position == 0:
            return True
        header = self._header_at(position)
        return header is not None and header.last_offset == offset

    def _last_entries_match_log(self) -> bool:
        """Both indexes' last entries describe the log: the offset index's points at its
        batch, and the batch holding the time index's offset has exactly its timestamp."""
        if not self._entry_matches_log(self.index.last_entry()):
            return False
        last = self.time_index.last_entry()
        if last is None:
            return not len(self.index)  # one index has entries, the other none
        timestamp, offset = last
        entry = self.index.lookup(offset)
        if not self._entry_matches_log(entry):
            return False
        for _, header in self._scan(entry[1]):
            if header.last_offset >= offset:
                return header.base_offset <= offset and header.max_timestamp == timestamp
        return False

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`, or None
        when the segment holds no such batch."""
        position = self._checked(self.index.lookup(offset))
        if position is None:
            position = self.index.lookup(offset)[1]  # rebuilt from the log just now
        for pos, header in self._scan(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def _whole_batches_end(self, start: int, bound: int) -> int:
        """The end of the last batch from `start` that ends at or before `bound` (`start` is a
        batch boundary): scan from the last indexed batch at or before `bound`."""
        position = self._checked(self.index.floor_by_position(bound))
        if position is None:
            position = self.index.floor_by_position(bound)[1]
        end = position = max(position, start)
        for pos, header in self._scan(position, bound):
            if pos + header.size > bound:
                break
            end = pos + header.size
        return end

    def read(
        self, offset: int, max_bytes: int, max_position: int | None = None, min_one: bool = True
    ) -> bytes | None:
        """Whole batches starting with the one that holds `offset`, at most `max_bytes`
        unless the first batch alone is larger and `min_one` is set (Kafka's KIP-74 rule).
        None when the segment has nothing at or after `offset`. `max_position` must be a
        batch boundary. One pread of exactly the bytes returned."""
        found = self.translate_offset(offset)
        if found is None:
            return None
        position, first = found
        limit = self.size if max_position is None else min(self.size, max_position)
        if position >= limit:
            return b""
        if first.size > max_bytes:
            if not min_one:
                return b""
            end = position + first.size
        else:
            end = self._whole_batches_end(position, min(limit, position + max_bytes))
        return os.pread(self.fd, end - position, position)

    def batch_at(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> int | None:
        """The first offset >= `start_offset` whose record timestamp is >= `timestamp`."""
        if self.max_timestamp < timestamp:
            return None
        entry = self.time_index.lookup_entry(timestamp)
        if entry is not None:
            entry_ts, entry_offset = entry
            found = self.translate_offset(entry_offset)
            if found is None or found[1].max_timestamp != entry_ts:
                self.recover()  # the entry does not describe the log: rebuild the indexes
        scan_from = max(self.time_index.lookup(timestamp), start_offset)
        found = self.translate_offset(scan_from)
        if found is None:
            return None
        for pos, header in self._scan(found[0]):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            try:
                _, records = decode_batch(self.batch_at(pos, header.size))
            except InvalidRecordBatchError as exc:
                raise CorruptRecordError(str(exc)) from exc
            for record in records:
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.offset
        return None

    def batches(self) -> Iterator[tuple[int, BatchHeader]]:
        return self._scan(0)

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def largest_timestamp(self) -> int:
        return self.max_timestamp

    def is_empty(self) -> bool:
        return self.size == 0

    def _path(self, suffix: str) -> str:
        return os.path.join(self.directory, file_name(self.base_offset, suffix) + self.file_suffix)

    def close(self) -> None:
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.write()
        self.time_index.write()
        self.close_file()

    def release(self) -> None:
        """Closes the log file without writing the indexes (their disk has failed)."""
        with contextlib.suppress(OSError):
            self.close_file()

    def close_and_delete(self) -> None:
        self.close_file()
        for suffix in SUFFIXES:
            try:
                os.unlink(self._path(suffix))
            except FileNotFoundError:
                pass


def _pwrite_all(fd: int, buffers: Sequence[bytes | memoryview], position: int) -> int:
    """Writes all of `buffers` at `position`, however the kernel splits it; returns bytes."""
    total = sum(len(b) for b in buffers)
    pending = list(buffers)
    done = 0
    while True:
        written = os.pwritev(fd, pending[:_IOV_MAX], position + done)
        done += written
        if done == total:
            return total  # almost always on the first call: the kernel took everything
        # Drop what was written: whole buffers, then the head of the next one.
        while written >= len(pending[0]):
            written -= len(pending[0])
            pending.pop(0)
        pending[0] = memoryview(pending[0])[written:]
