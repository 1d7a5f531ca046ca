"""A partition's log: an ordered run of segments in one directory. Not thread-safe.

One caller at a time (the broker serialises appends, reads and maintenance per partition).
Offsets: `log_start_offset` <= `high_watermark` <= `log_end_offset` (LEO, the next offset to
be written). `recovery_point`: every offset below it is fsynced, so a restart only scans the
segments from the one holding the recovery point (none at all after a clean shutdown).

Files in the directory besides the segments:
  leader-epoch-checkpoint   epoch -> start offset (storage.leader_epoch_cache)
  *.cleaned / *.swap        a compaction in flight (storage.cleaner); finished or dropped on open
  *.deleted / *.tmp         leftovers of a crash mid-delete or mid-checkpoint; removed on open

Disk errors: every operation that touches the files (append, read, roll, flush, truncate,
delete, the epoch checkpoint) turns an OSError into KafkaStorageError and takes the log
offline, with its whole log directory when the LogManager gave it a LogDirFailureChannel
(Kafka's maybeHandleIOException). An offline log refuses every later operation: after a
failed write its in-memory state and its files may disagree (a pwritev can write part of a
batch), so nothing it says can be trusted until a restart recovers it from the files.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar, cast

from storage import retention
from storage.clock import Clock, SystemClock
from storage.config import INT_MAX, LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetInvariantError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from storage.file_io import fsync_dir
from storage.leader_epoch_cache import LeaderEpochCache
from storage.log_dir_failures import LogDirFailureChannel
from storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SUFFIXES,
    TIME_INDEX_SUFFIX,
    BatchEntry,
    LogSegment,
    file_name,
)
from strom_api.record_batch import (
    LOG_OVERHEAD,
    PREFIX,
    BatchHeader,
    InvalidRecordBatchError,
    iter_batches,
)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"

_Method = TypeVar("_Method", bound=Callable[..., Any])


def _disk_operation(method: _Method) -> _Method:
    """Runs a Log method that touches the files: refused while the log is offline, and
    an OSError inside takes the log (and its directory) offline as KafkaStorageError.
    A plain wrapper rather than Log.io_guard, to stay cheap on the append and read path."""
    operation = method.__name__.strip("_").replace("_", " ")

    @functools.wraps(method)
    def guarded(self: Log, *args: Any, **kwargs: Any) -> Any:
        if self.offline:
            raise self.offline_error()
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            raise self.io_failed(operation, exc) from exc

    return cast(_Method, guarded)


class AppendInfo(NamedTuple):
    """What an append wrote (a NamedTuple: one is made per append, on the hot path)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    batches: int
    bytes: int


@dataclass(frozen=True, slots=True)
class LoadInfo:
    """What opening the log found: how much it scanned and cut off."""

    segments: int
    recovered_segments: int
    truncated_bytes: int
    deleted_segments: int


class Log:
    def __init__(
        self,
        directory: str,
        config: LogConfig,
        clock: Clock,
        segments: list[LogSegment],
        epochs: LeaderEpochCache,
        failures: LogDirFailureChannel | None = None,
    ) -> None:
        self.directory = directory
        self.log_dir = os.path.dirname(os.path.abspath(directory))
        self.failures = failures
        self._failed: str | None = None  # why this log went offline
        self.config = config
        self.clock = clock
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self.leader_epochs = epochs
        # Told whenever the log start, high watermark or recovery point changes: the
        # LogManager rewrites a directory's offset checkpoints only when one of them did.
        self.on_offsets_changed: Callable[[], None] | None = None
        self._log_start_offset = segments[0].base_offset
        self._high_watermark = 0
        self._recovery_point = 0
        self.unflushed_messages = 0
        self.last_flush_ms = clock.time_ms()
        self.load_info = LoadInfo(len(segments), 0, 0, 0)
        self._dir_dirty = False  # segments created since the directory was last fsynced
        # The directory did not exist before open(): nothing beside the segments (producer
        # snapshots) can be in it, so the first owner need not list it for them (the broker's
        # Partition takes this and clears it: after that, writes may have happened).
        self.new_directory = False

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
        clock: Clock | None = None,
        failures: LogDirFailureChannel | None = None,
    ) -> Log:
        """Opens or creates the log in `directory`, recovering what a crash left behind:
        every segment holding offsets at or past `recovery_point` is scanned and cut at its
        first invalid batch, and everything after that batch is dropped."""
        config = config or LogConfig()
        clock = clock or SystemClock()
        try:
            os.mkdir(directory)
            new_directory = True
        except FileExistsError:
            new_directory = False
        except FileNotFoundError:  # its parent is missing too
            os.makedirs(directory, exist_ok=True)
            new_directory = True
        # The directory is fsynced only when a crash's leftovers were removed or a swap
        # finished: an fsync per log, at every start-up and for every new log, cost a
        # 10,000-replica broker 10,000 fsyncs for nothing.
        segments: list[LogSegment]
        epoch_starts: list[tuple[int, int]]
        if new_directory:  # empty: no leftovers, swaps or segments to look for
            segments, load_info, epoch_starts = [], LoadInfo(0, 0, 0, 0), []
        else:
            if _remove_leftovers(directory) | _complete_swaps(directory):
                fsync_dir(directory)
            segments, load_info, epoch_starts = _load_segments(
                directory, config, recovery_point, clean_shutdown, clock.time_ms()
            )
        created = not segments
        if created:
            segments.append(LogSegment.create(directory, log_start_offset, config, clock.time_ms()))
        epochs = LeaderEpochCache(directory)
        log = cls(directory, config, clock, segments, epochs, failures)
        log._dir_dirty = created  # the new segment's name is made durable by the first flush
        log.new_directory = new_directory
        # The epoch cache is truncated from the start (and persisted) when the log start moves,
        # before the log start checkpoint is written: a crash in between leaves an older log
        # start on disk. The cache's first entry is then the later, true log start (it never
        # lies above the log start otherwise), so deleted records do not come back.
        persisted_start = epochs.entries[0][1] if epochs.entries else 0
        for epoch, start in epoch_starts:
            epochs.assign(epoch, start)
        log.log_start_offset = max(log_start_offset, segments[0].base_offset, persisted_start)
        if log.log_start_offset > log.log_end_offset:
            log.truncate_fully_and_start_at(log.log_start_offset)
        epochs.truncate_from_end(log.log_end_offset)
        epochs.truncate_from_start(log.log_start_offset)
        log.high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        log.recovery_point = min(max(recovery_point, log.log_start_offset), log.log_end_offset)
        if load_info.recovered_segments:
            log.flush()  # what recovery kept is now known good: make it durable
        elif clean_shutdown:
            log.recovery_point = log.log_end_offset
        log.load_info = load_info
        log.check_offsets("opening the log")
        return log

    # --- disk errors -----------------------------------------------------------------------

    @property
    def offline(self) -> bool:
        failures = self.failures
        return self._failed is not None or (
            failures is not None and failures.is_offline(self.log_dir)
        )

    def offline_error(self) -> KafkaStorageError:
        why = self._failed
        if why is None and self.failures is not None:
            why = self.failures.offline_dirs.get(self.log_dir)
        return KafkaStorageError(
            f"The log directory {self.log_dir} holding {os.path.basename(self.directory)} is "
            f"offline after a disk error ({why}).",
            self.log_dir,
        )

    def io_failed(self, operation: str, exc: OSError) -> KafkaStorageError:
        """Takes the log and its directory offline after `exc`; returns the error to raise."""
        name = os.path.basename(self.directory)
        why = f"{operation} of {name} failed: {exc.strerror or exc}"
        if self._failed is None:
            self._failed = why
        if self.failures is not None:
            self.failures.mark_offline(self.log_dir, why)
        return KafkaStorageError(
            f"Disk error in log directory {self.log_dir}: {why}; the directory is offline.",
            self.log_dir,
        )

    @contextlib.contextmanager
    def io_guard(self, operation: str) -> Iterator[None]:
        """For file work on the log's behalf outside this class (producer snapshots, the
        leader epoch checkpoint): the same rules as the log's own operations."""
        if self.offline:
            raise self.offline_error()
        try:
            yield
        except OSError as exc:
            raise self.io_failed(operation, exc) from exc

    # --- state ---------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @log_start_offset.setter
    def log_start_offset(self, offset: int) -> None:
        if offset != self._log_start_offset:
            self._log_start_offset = offset
            self._offsets_changed()

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        if offset != self._high_watermark:
            self._high_watermark = offset
            self._offsets_changed()

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @recovery_point.setter
    def recovery_point(self, offset: int) -> None:
        if offset != self._recovery_point:
            self._recovery_point = offset
            self._offsets_changed()

    def _offsets_changed(self) -> None:
        listener = self.on_offsets_changed
        if listener is not None:
            listener()

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def adopt_config(self, config: LogConfig) -> None:
        """The topic's configs for a log opened before they were known (a broker opens its
        logs at start-up with the defaults, before it has the metadata): the log's, and its
        active segment's too, which then indexes as the topic says (index.interval.bytes,
        segment.index.bytes: an index already fuller than that rolls it at the next
        append), as Kafka opens logs with their topic's configs. Setting `config` alone,
        as a later change of the topic's configs does, leaves those two to the next
        segment, as in Kafka."""
        self.config = config
        active = self._segments[-1]
        active.config = config
        active.index.max_entries = config.max_index_entries
        active.time_index.max_entries = config.max_time_index_entries

    @property
    def segments(self) -> Sequence[LogSegment]:
        return tuple(self._segments)

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    def update_high_watermark(self, offset: int) -> int:
        """Sets the high watermark, bounded by [log start, LEO]; returns the value set. The
        bound is Kafka's (UnifiedLog.updateHighWatermark): a follower is handed its leader's
        high watermark, which may be past its own log end."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    def check_offsets(self, operation: str) -> None:
        """Every change of the log ends with log start <= high watermark <= log end and the
        recovery point at most the log end; anything else is a bug, raised at once with the
        numbers (three comparisons: cheap enough for every append)."""
        start, hw, leo = self.log_start_offset, self.high_watermark, self.log_end_offset
        if start <= hw <= leo and self.recovery_point <= leo:
            return
        raise OffsetInvariantError(
            f"{operation} left {self.directory} with log start {start}, high watermark {hw}, "
            f"recovery point {self.recovery_point} and log end {leo}: offsets must keep "
            f"log start <= high watermark <= log end and recovery point <= log end"
        )

    # --- appending -----------------------------------------------------------------------

    @_disk_operation
    def append(
        self,
        batches: bytes | bytearray | memoryview,
        leader_epoch: int,
        checked: Sequence[BatchHeader] | None = None,
    ) -> AppendInfo:
        """Appends producer batches as the leader: validates them, assigns offsets from the
        log end and stamps `leader_epoch`, without copying or re-encoding the batches.
        `checked`: the batches' headers from a caller that already checked their extent
        and CRC (so a produce computes each CRC once); the log's other rules still apply."""
        view = memoryview(batches)
        headers = self._validate(view, as_leader=True, checked=checked)
        first_offset = offset = self.log_end_offset
        entries: list[BatchEntry] = []
        pieces: list[list[bytes | memoryview]] = []
        pos = 0
        for header in headers:
            size = header.batch_length + LOG_OVERHEAD
            # A new 16-byte prefix, then the batch from its magic byte on: written as two
            # pieces by one pwritev, so the batch is never copied.
            pieces.append(
                [
                    PREFIX.pack(offset, header.batch_length, leader_epoch),
                    view[pos + 16 : pos + size],
                ]
            )
            offset += header.last_offset_delta + 1
            entries.append((offset - 1, header.max_timestamp, size))
            pos += size
        self.leader_epochs.assign(leader_epoch, first_offset)
        return self._append(first_offset, entries, pieces)

    @_disk_operation
    def append_as_follower(self, batches: bytes | bytearray | memoryview) -> AppendInfo:
        """Appends batches fetched from the leader as they are: offsets and epochs already
        stamped, so the bytes go to the file untouched."""
        view = memoryview(batches)
        headers = self._validate(view, as_leader=False)
        if headers[0].base_offset < self.log_end_offset:
            raise InvalidRecordError(
                f"follower append starts at offset {headers[0].base_offset}, below the log end "
                f"offset {self.log_end_offset} of {self.directory}"
            )
        entries: list[BatchEntry] = []
        pieces: list[list[bytes | memoryview]] = []
        pos = 0
        for header in headers:
            size = header.batch_length + LOG_OVERHEAD
            pieces.append([view[pos : pos + size]])
            entries.append(
                (header.base_offset + header.last_offset_delta, header.max_timestamp, size)
            )
            pos += size
            if header.partition_leader_epoch >= 0:
                self.leader_epochs.assign(header.partition_leader_epoch, header.base_offset)
        return self._append(headers[0].base_offset, entries, pieces)

    def _validate(
        self, view: memoryview, as_leader: bool, checked: Sequence[BatchHeader] | None = None
    ) -> list[BatchHeader]:
        if not len(view):
            raise InvalidRecordError("the append holds no record batch")
        headers = []
        previous_next = -1
        max_message_bytes = self.config.max_message_bytes if as_leader else INT_MAX
        segment_bytes = self.config.segment_bytes
        if checked is not None and sum(h.size for h in checked) != len(view):
            raise CorruptRecordError("the checked batch headers do not cover the append")
        batches = iter_batches(view) if checked is None else ((0, h) for h in checked)
        try:
            for _, header in batches:
                headers.append(header)
                size = header.batch_length + LOG_OVERHEAD
                if size > max_message_bytes:
                    raise RecordTooLargeError(
                        f"the batch is {size} bytes, larger than max.message.bytes "
                        f"({self.config.max_message_bytes})"
                    )
                if size > segment_bytes:
                    raise RecordTooLargeError(
                        f"the batch is {size} bytes, larger than segment.bytes ({segment_bytes})"
                    )
                if as_leader:
                    if header.record_count != header.last_offset_delta + 1:
                        raise InvalidRecordError(
                            f"the batch declares {header.record_count} records but a "
                            f"lastOffsetDelta of {header.last_offset_delta}"
                        )
                elif header.base_offset < previous_next:
                    raise InvalidRecordError(
                        f"batch offsets go backwards at offset {header.base_offset}"
                    )
                else:
                    previous_next = header.base_offset + header.last_offset_delta + 1
        except InvalidRecordBatchError as exc:
            raise CorruptRecordError(str(exc)) from exc
        return headers

    def _append(
        self, first_offset: int, entries: list[BatchEntry], pieces: list[list[bytes | memoryview]]
    ) -> AppendInfo:
        """Writes batch i as `pieces[i]`, described by `entries[i]`."""
        total = 0
        max_timestamp = -1
        if len(entries) == 1:  # the common case: one batch per partition per produce request
            self._maybe_roll(entries[0][2], entries[0][1], entries[0][0])
            self.active_segment.append(entries, pieces[0])
            total, max_timestamp = entries[0][2], entries[0][1]
        else:
            # Batches are grouped so each group fits one segment; a group never spans a roll.
            start = 0
            while start < len(entries):
                end, size = start, 0
                while end < len(entries) and (
                    end == start or size + entries[end][2] <= self.config.segment_bytes
                ):
                    size += entries[end][2]
                    end += 1
                self._maybe_roll(size, max(e[1] for e in entries[start:end]), entries[end - 1][0])
                group = [piece for batch in pieces[start:end] for piece in batch]
                self.active_segment.append(entries[start:end], group)
                total += size
                start = end
            max_timestamp = max(e[1] for e in entries)
        last_offset = entries[-1][0]
        self.unflushed_messages += last_offset + 1 - first_offset
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()
        return AppendInfo(first_offset, last_offset, max_timestamp, len(entries), total)

    def _maybe_roll(self, size: int, max_timestamp: int, last_offset: int) -> None:
        segment = self.active_segment
        if segment.is_empty():
            return
        # Kafka's time-based roll: the append's largest timestamp against the first batch's,
        # so a log replayed with old timestamps rolls as it did; wall-clock time since the
        # segment was created only when there are no timestamps.
        first_ts = segment.first_batch_max_timestamp
        if first_ts is not None and first_ts >= 0:
            waited = max_timestamp - first_ts
        else:
            created = segment.created_ms if segment.created_ms is not None else self.clock.time_ms()
            waited = self.clock.time_ms() - created
        if (
            segment.size > self.config.segment_bytes - size
            or waited > self.config.segment_ms
            or segment.index.is_full
            or segment.time_index.is_full
            or last_offset - segment.base_offset > INT_MAX
        ):
            self.roll()

    @_disk_operation
    def roll(self) -> LogSegment:
        """Closes the active segment to writes and starts a new one at the log end offset;
        does nothing when the active segment is empty."""
        active = self.active_segment
        if active.is_empty():
            return active
        active.on_roll()
        segment = LogSegment.create(
            self.directory, self.log_end_offset, self.config, self.clock.time_ms()
        )
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self._dir_dirty = True
        return segment

    # --- durability ----------------------------------------------------------------------

    @_disk_operation
    def flush(self, offset: int | None = None) -> None:
        """fsyncs every segment holding offsets in [recovery point, offset), then moves the
        recovery point to `offset` (default: the log end)."""
        offset = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        if offset > self.recovery_point or self._dir_dirty:
            active = self.active_segment
            for segment in self._segments:
                if segment.next_offset > self.recovery_point and segment.base_offset < offset:
                    segment.flush(indexes=segment is not active)
            if self._dir_dirty:
                fsync_dir(self.directory)
                self._dir_dirty = False
        if offset >= self.log_end_offset:
            self.unflushed_messages = 0
        self.recovery_point = max(self.recovery_point, offset)
        self.last_flush_ms = self.clock.time_ms()

    @_disk_operation
    def flush_if_due(self) -> bool:
        """Kafka's `flush.ms`: fsyncs when unflushed data has waited that long. The broker's
        flush scheduler calls this (LogManager.flush_dirty_logs); returns whether it did."""
        waited = self.clock.time_ms() - self.last_flush_ms
        if self.unflushed_messages and waited >= self.config.flush_ms:
            self.flush()
            return True
        return False

    # --- reading -------------------------------------------------------------------------

    def _check_range(self, offset: int) -> None:
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {os.path.basename(self.directory)}: "
                f"the log holds [{self.log_start_offset}, {self.log_end_offset})"
            )

    @_disk_operation
    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one: bool = True
    ) -> bytes:
        """Whole batches from the one holding `offset`, up to `max_bytes` (at least one batch
        when `min_one`), never a batch at or past `max_offset` (a consumer passes the high
        watermark). Reads by file position; the bytes are as stored."""
        self._check_range(offset)
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if offset >= limit:
            return b""
        i = max(bisect_right(self._bases, offset) - 1, 0)
        while i < len(self._segments):
            segment = self._segments[i]
            max_position = None
            if limit < segment.next_offset:
                found = segment.translate_offset(limit)
                max_position = found[0] if found else None
            data = segment.read(offset, max_bytes, max_position, min_one)
            if data is not None:
                return data
            i += 1
        return b""

    @_disk_operation
    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The earliest offset whose record timestamp is >= `timestamp` (ListOffsets), or
        None when every record is older."""
        for segment in self._segments:
            if segment.largest_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    # --- truncation and deletion ---------------------------------------------------------

    @_disk_operation
    def truncate_to(self, offset: int) -> None:
        """Removes every offset at or above `offset` (a follower after a leader change)."""
        if offset >= self.log_end_offset:
            # Nothing to cut, but an epoch may start at the log end: a leader that took
            # its epoch and wrote nothing before losing it. Left there, a follower would
            # keep claiming an epoch it has no batch of (Kafka drops it here too).
            self.leader_epochs.truncate_from_end(self.log_end_offset)
            return
        if offset <= self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        while self._segments[-1].base_offset > offset:
            self._segments.pop().close_and_delete()
            self._bases.pop()
        self.active_segment.truncate_to(offset)
        self._after_truncation()

    @_disk_operation
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drops every segment and starts empty at `offset` (a follower far behind)."""
        for segment in self._segments:
            segment.close_and_delete()
        segment = LogSegment.create(self.directory, offset, self.config, self.clock.time_ms())
        self._segments = [segment]
        self._bases = [offset]
        self._dir_dirty = True
        self.log_start_offset = offset
        self.high_watermark = offset
        self.recovery_point = offset
        self.leader_epochs.clear()  # as Kafka: the epochs of the old log say nothing now
        self._after_truncation()

    def _after_truncation(self) -> None:
        leo = self.log_end_offset
        self.leader_epochs.truncate_from_end(leo)
        self.recovery_point = min(self.recovery_point, leo)
        self.high_watermark = min(self.high_watermark, leo)
        self.log_start_offset = min(self.log_start_offset, leo)
        self.check_offsets("truncation")

    @_disk_operation
    def delete_records_before(self, offset: int) -> int:
        """Moves the log start offset up to `offset` (DeleteRecords) and deletes the segments
        now wholly below it; returns the new log start offset."""
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before offset {offset}: it is past the high "
                f"watermark {self.high_watermark}"
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epochs.truncate_from_start(offset)
            self.delete_old_segments()
        self.check_offsets("deleting records")
        return self.log_start_offset

    @_disk_operation
    def delete_old_segments(self) -> int:
        """Applies retention (log start offset, `retention.ms`, `retention.bytes`); returns
        how many segments were deleted. The active segment too, once all it holds has
        expired (storage.retention): the log then rolls, and starts at its end."""
        doomed = retention.segments_to_delete(
            [
                retention.SegmentInfo(s.base_offset, s.next_offset, s.size, s.largest_timestamp)
                for s in self._segments
            ],
            self.config,
            self.clock.time_ms(),
            self.high_watermark,
            self.log_start_offset,
        )
        if doomed == len(self._segments):
            # Every record has expired, the active segment's too: a new, empty active
            # segment at the log end first, as Kafka's deleteSegments rolls, since a log
            # always has one. The log start offset then moves to the log end.
            self.roll()
        for _ in range(doomed):
            self._segments.pop(0).close_and_delete()
            self._bases.pop(0)
        if doomed:
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            self.leader_epochs.truncate_from_start(self.log_start_offset)
            self.recovery_point = max(self.recovery_point, self.log_start_offset)
            self.check_offsets("deleting old segments")
        return doomed

    @_disk_operation
    def replace_segments(self, old: Sequence[LogSegment], cleaned_dir_base: int) -> LogSegment:
        """Swaps the consecutive segments `old` for the `.cleaned` segment files at
        `cleaned_dir_base`, crash-safely: rename to `.swap`, delete the old files, rename to
        the final names. A crash at any step is finished or undone on the next open."""
        # The .log goes last: a .log.swap on disk means its indexes were renamed before it.
        for suffix in reversed(SUFFIXES):
            src = os.path.join(self.directory, file_name(cleaned_dir_base, suffix) + CLEANED_SUFFIX)
            os.replace(src, src[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX)
        fsync_dir(self.directory)
        first = self._segments.index(old[0])
        for segment in old:
            segment.close_and_delete()
        for suffix in SUFFIXES:
            final = os.path.join(self.directory, file_name(cleaned_dir_base, suffix))
            os.replace(final + SWAP_SUFFIX, final)
        fsync_dir(self.directory)
        new = LogSegment.open_existing(self.directory, cleaned_dir_base, self.config)
        self._segments[first : first + len(old)] = [new]
        self._bases = [s.base_offset for s in self._segments]
        return new

    @_disk_operation
    def close(self) -> None:
        for segment in self._segments:
            segment.close()

    def release(self) -> None:
        """Closes the files of an offline log without writing anything to them."""
        for segment in self._segments:
            segment.release()

    def delete(self) -> None:
        """Closes the log and removes its directory (a deleted topic's partition)."""
        for segment in self._segments:
            segment.close_file()
        shutil.rmtree(self.directory, ignore_errors=True)


def _load_segments(
    directory: str, config: LogConfig, recovery_point: int, clean_shutdown: bool, now_ms: int
) -> tuple[list[LogSegment], LoadInfo, list[tuple[int, int]]]:
    """Opens the segment files in order. Those holding offsets at or past the recovery
    point (none after a clean shutdown) are scanned and cut at their first invalid batch;
    after a cut, every later segment is deleted. Returns the segments, what loading did,
    and the (leader epoch, start offset) pairs seen in scanned batches."""
    bases = _segment_bases(directory)
    segments: list[LogSegment] = []
    recovered = truncated = deleted = 0
    epoch_starts: list[tuple[int, int]] = []
    for i, base in enumerate(bases):
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        must_scan = not clean_shutdown and (next_base is None or next_base > recovery_point)
        previous_end = segments[-1].next_offset if segments else base
        gap = must_scan and base > previous_end
        if truncated or base < previous_end or gap:
            # After a cut, an out-of-order segment, or a hole in the offsets (segments are
            # contiguous, compacted ones too, so a hole is a lost tail of the segment
            # before), nothing later can be trusted: a follower re-fetches it.
            LogSegment(directory, base, config).close_and_delete()
            deleted += 1
            continue
        if must_scan:
            segment = LogSegment(directory, base, config)
            result = segment.recover()
            recovered += 1
            truncated += result.truncated_bytes
            epoch_starts += result.epoch_starts
        else:
            segment = LogSegment.open_existing(directory, base, config)
        segment.created_ms = now_ms
        segments.append(segment)
    info = LoadInfo(len(segments), recovered, truncated, deleted)
    return segments, info, epoch_starts


def _segment_bases(directory: str) -> list[int]:
    names = set(os.listdir(directory))
    bases = []
    for name in names:
        stem, ext = os.path.splitext(name)
        if len(stem) != 20 or not stem.isdigit():
            continue
        if ext == LOG_SUFFIX:
            bases.append(int(stem))
        elif ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) and stem + LOG_SUFFIX not in names:
            os.unlink(os.path.join(directory, name))  # an index whose log is gone
    return sorted(bases)


def _remove_leftovers(directory: str) -> bool:
    """Returns whether it removed anything."""
    removed = False
    for name in os.listdir(directory):
        if name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX, ".tmp")):
            os.unlink(os.path.join(directory, name))
            removed = True
    return removed


def _complete_swaps(directory: str) -> bool:
    """Finishes a compaction that crashed after its `.swap` files were complete: the old
    segments whose base offsets fall inside the swapped segment's range are deleted, then
    the swap takes its final name. Its indexes are rebuilt from the log. Returns whether
    there was anything to finish."""
    changed = False
    for name in os.listdir(directory):
        if name.endswith((INDEX_SUFFIX + SWAP_SUFFIX, TIME_INDEX_SUFFIX + SWAP_SUFFIX)):
            os.unlink(os.path.join(directory, name))
            changed = True
    for name in sorted(os.listdir(directory)):
        if not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        changed = True
        base = int(name[:20])
        swap_path = os.path.join(directory, name)
        end = _next_offset_of_file(swap_path, base)
        for other in _segment_bases(directory):
            if base <= other < max(end, base + 1):
                for suffix in SUFFIXES:
                    path = os.path.join(directory, file_name(other, suffix))
                    if os.path.exists(path):
                        os.unlink(path)
        os.replace(swap_path, os.path.join(directory, file_name(base, LOG_SUFFIX)))
    return changed


def _next_offset_of_file(path: str, base: int) -> int:
    """The offset after the last valid batch in a raw log file."""
    next_offset = base
    with open(path, "rb") as f:
        data = f.read()
    try:
        for _, header in iter_batches(data):
            next_offset = header.next_offset
    except InvalidRecordBatchError:
        pass
    return next_offset
