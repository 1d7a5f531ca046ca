"""Which old segments retention deletes: Kafka's rules, as a pure function.

Segments are deleted oldest first and only as a leading run, and never one holding offsets
at or past the high watermark (a consumer or follower may still need them): a segment's
offsets end where the next segment starts, the active (last) segment's at the log end. A
segment goes when any rule says so:
  - log start: all its offsets are below the log start offset (DeleteRecords moved it);
    never the active segment, which holds the log end;
  - retention.ms (cleanup.policy contains delete): its largest timestamp is older than
    now - retention.ms;
  - retention.bytes (same policy): the log stays at or above retention.bytes without it.
The active segment is no exception to the last two, as in Kafka's UnifiedLog
(deletableSegments): an idle topic whose every record has expired loses them all, and
the log rolls a new, empty active segment at the log end first (Log.delete_old_segments),
so the log start offset moves to the log end. By size that takes retention.bytes=0, since
the active segment goes only after every older one. An empty active segment is never
deleted (it would only be made again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage.config import LogConfig


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int


def segments_to_delete(
    segments: Sequence[SegmentInfo],
    config: LogConfig,
    now_ms: int,
    high_watermark: int,
    log_start_offset: int,
) -> int:
    """How many leading segments to delete; all of them means the caller rolls first."""
    total = sum(s.size for s in segments)
    excess = total - config.retention_bytes if config.retention_bytes >= 0 else -1
    count = 0
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if last and segment.size == 0:
            break
        upper = segment.next_offset if last else segments[i + 1].base_offset
        if upper > high_watermark:
            break
        below_start = not last and upper <= log_start_offset
        expired = (
            config.delete
            and config.retention_ms >= 0
            and now_ms - segment.largest_timestamp > config.retention_ms
        )
        oversized = config.delete and excess >= 0 and excess - segment.size >= 0
        if not (below_start or expired or oversized):
            break
        if excess >= 0:
            excess -= segment.size
        count += 1
    return count
