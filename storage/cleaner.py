"""Log compaction for `cleanup.policy=compact`: keep the last record of every key.

One pass over a log (Kafka's LogCleaner, without its incremental bookkeeping):
1. The cleanable range is the leading run of closed segments that lie wholly below the high
   watermark and whose newest record is older than `min.compaction.lag.ms`. The active
   segment is never touched.
2. An offset map (key -> last offset) is built over that range.
3. Consecutive cleanable segments are grouped (at most `segment.bytes` together) and each
   group is rewritten as one segment that keeps, per batch, only the records that
   - have a key (Kafka's cleaner discards keyless records in a compacted log),
   - are the latest for their key in the range, and
   - are not tombstones (null value) whose segment's newest timestamp is older than
     `delete.retention.ms` (so consumers have that long to see a delete).
   A batch that keeps every record is copied byte for byte; one that keeps some is
   re-encoded with its original base offset, last offset, producer fields, leader epoch and
   compression, so offsets never move; one that keeps none is dropped, except the group's
   last batch, which stays as an empty batch so the new segment ends where the group did.
4. The new segment is written under `.cleaned`, fsynced, and swapped in by
   Log.replace_segments (crash-safe: see storage.log).
Record-level work is fine here: compaction runs in the background, not on a request path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from storage.config import INT_MAX
from storage.errors import CorruptRecordError
from storage.log import CLEANED_SUFFIX, Log
from storage.segment import LogSegment
from strom_api.record_batch import BatchHeader, InvalidRecordBatchError, parse_header
from strom_api.records import Record, decode_batch, encode_batch


@dataclass(frozen=True, slots=True)
class CleanResult:
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int


def cleanable_segments(log: Log, now_ms: int) -> list[LogSegment]:
    segments = log.segments
    lag = log.config.min_compaction_lag_ms
    out = []
    for i, segment in enumerate(segments[:-1]):
        if segments[i + 1].base_offset > log.high_watermark:
            break
        if lag > 0 and segment.largest_timestamp > now_ms - lag:
            break
        out.append(segment)
    return out


Swap = Callable[[list[LogSegment], int], LogSegment]


def clean(log: Log, now_ms: int | None = None, swap: Swap | None = None) -> CleanResult:
    """Compacts the cleanable range of `log` once; a no-op unless the policy has compact.
    `swap(group, base)` installs a cleaned group (default: log.replace_segments): a broker
    cleaning off its event loop passes one that runs the swap on the loop, so requests
    never see the segment list change under them."""
    now_ms = log.clock.time_ms() if now_ms is None else now_ms
    segments = cleanable_segments(log, now_ms) if log.config.compact else []
    if not segments:
        return CleanResult(0, 0, 0, 0, 0)
    latest = _offset_map(segments)
    bytes_before = sum(s.size for s in segments)
    removed = 0
    cleaned: list[LogSegment] = []
    for group in _group_by_size(segments, log.config.segment_bytes):
        new, group_removed = _clean_group(log, group, latest, now_ms, swap or log.replace_segments)
        removed += group_removed
        cleaned.append(new)
    return CleanResult(
        segments_before=len(segments),
        segments_after=len(cleaned),
        bytes_before=bytes_before,
        bytes_after=sum(s.size for s in cleaned),
        records_removed=removed,
    )


def _read_batches(segment: LogSegment) -> list[tuple[BatchHeader, bytes, list[Record]]]:
    out = []
    for position, header in segment.batches():
        raw = segment.batch_at(position, header.size)
        try:
            _, records = decode_batch(raw)
        except InvalidRecordBatchError as exc:
            raise CorruptRecordError(f"cannot compact {segment.directory}: {exc}") from exc
        out.append((header, raw, records))
    return out


def _offset_map(segments: Sequence[LogSegment]) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for segment in segments:
        for header, _, records in _read_batches(segment):
            if header.is_control:
                continue
            for record in records:
                if record.key is not None:
                    latest[record.key] = record.offset
    return latest


def _group_by_size(segments: Sequence[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            fits = sum(s.size for s in group) + segment.size <= max_bytes
            # Relative offsets in the merged segment's indexes must fit an i32.
            in_range = segment.next_offset - group[0].base_offset <= INT_MAX
            if fits and in_range:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


def _clean_group(
    log: Log, group: list[LogSegment], latest: dict[bytes, int], now_ms: int, swap: Swap
) -> tuple[LogSegment, int]:
    base = group[0].base_offset
    new = LogSegment.create(log.directory, base, log.config, now_ms, file_suffix=CLEANED_SUFFIX)
    removed = 0
    end_offset = group[-1].next_offset
    for segment in group:
        tombstones_expire = segment.largest_timestamp < now_ms - log.config.delete_retention_ms
        for header, raw, records in _read_batches(segment):
            if header.is_control:
                kept_bytes = raw
            else:
                kept = [
                    r
                    for r in records
                    if r.key is not None
                    and latest.get(r.key) == r.offset
                    and not (r.value is None and tombstones_expire)
                ]
                removed += len(records) - len(kept)
                # The group's last batch always stays (empty if need be) so the cleaned
                # segment ends where the old ones did: segment offset ranges stay
                # contiguous, which recovery and swap completion rely on.
                if not kept and header.next_offset != end_offset:
                    continue
                kept_bytes = raw if len(kept) == len(records) else _rebuild(header, kept)
            kept_header = parse_header(kept_bytes)
            new.append(
                [(kept_header.last_offset, kept_header.max_timestamp, kept_header.size)],
                [kept_bytes],
            )
    new.on_roll()
    new.flush()
    new.close()
    return swap(group, base), removed


def _rebuild(header: BatchHeader, kept: list[Record]) -> bytes:
    return encode_batch(
        kept,
        compression_codec=header.compression,
        log_append_time=header.log_append_time,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        transactional=header.is_transactional,
        base_offset=header.base_offset,
        last_offset=header.last_offset,
        max_timestamp=header.max_timestamp if header.log_append_time or not kept else None,
    )
