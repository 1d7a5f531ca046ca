"""The bounds every field of a decoded Raft message must meet, checked at the edge
(raft/wire.py's from_proto) so that a malformed message is refused there, whole, before the
core sees it: never an overflow or an exception deep inside the core or the log.

- node ids (src, dst, successors) in [0, 2^31-1]; a leader id may also be -1 (none known);
- every epoch in [0, MAX_EPOCH] (raft/limits.py); the echoes of a request's epochs in a
  response may be -1 (unset);
- offsets, positions and sizes in [0, 2^63-1] (the -1 sentinels where the message has them);
- counts: max_entries and max_bytes in [0, 2^31-1], at most MAX_SUCCESSORS successors;
- a fetch response's entries at consecutive offsets with epochs that never go back.
"""

from __future__ import annotations

from raft import messages as m
from raft.limits import INT32_MAX, INT64_MAX, MAX_EPOCH, MAX_NODE_ID, out_of_range

# A voter set is a handful of nodes; this only bounds what a forged message can make the core
# walk through.
MAX_SUCCESSORS = 1024
_RESPONSES = (
    m.VoteResponse,
    m.BeginQuorumEpochResponse,
    m.EndQuorumEpochResponse,
    m.FetchResponse,
    m.FetchSnapshotResponse,
)


class MalformedRaftMessageError(ValueError):
    """A Raft message with a field out of its range (Kafka: INVALID_REQUEST)."""

    error_name = "INVALID_REQUEST"


def _check(problems: list[str], name: str, value: int, low: int, high: int) -> None:
    problem = out_of_range(name, value, low, high)
    if problem is not None:
        problems.append(problem)


def _epoch(problems: list[str], name: str, value: int, low: int = 0) -> None:
    _check(problems, name, value, low, MAX_EPOCH)


def check_message(message: m.Message) -> None:
    """Raises MalformedRaftMessageError naming every field out of range."""
    p: list[str] = []
    _check(p, "src", message.src, 0, MAX_NODE_ID)
    _check(p, "dst", message.dst, 0, MAX_NODE_ID)
    _check(p, "epoch", message.epoch, 0, MAX_EPOCH)
    if isinstance(message, m.VoteRequest):
        _epoch(p, "last_epoch", message.last_epoch)
        _check(p, "end_offset", message.end_offset, 0, INT64_MAX)
    elif isinstance(message, m.VoteResponse):
        _epoch(p, "candidate_epoch", message.candidate_epoch, low=-1)
    elif isinstance(message, m.EndQuorumEpochRequest):
        if len(message.preferred_successors) > MAX_SUCCESSORS:
            p.append(f"{len(message.preferred_successors)} preferred successors")
        for successor in message.preferred_successors[:MAX_SUCCESSORS]:
            _check(p, "preferred successor", successor, 0, MAX_NODE_ID)
    elif isinstance(message, m.FetchRequest):
        _check(p, "fetch_offset", message.fetch_offset, 0, INT64_MAX)
        _epoch(p, "last_fetched_epoch", message.last_fetched_epoch)
        _check(p, "max_entries", message.max_entries, 0, INT32_MAX)
        _check(p, "high_watermark", message.high_watermark, -1, INT64_MAX)
    elif isinstance(message, m.FetchResponse):
        _check_fetch_response(p, message)
    elif isinstance(message, m.FetchSnapshotRequest):
        _check_snapshot_id(p, message.snapshot_id)
        _check(p, "position", message.position, 0, INT64_MAX)
        _check(p, "max_bytes", message.max_bytes, 0, INT32_MAX)
    elif isinstance(message, m.FetchSnapshotResponse):
        if message.snapshot_id is not None:
            _check_snapshot_id(p, message.snapshot_id)
        _check(p, "position", message.position, 0, INT64_MAX)
        _check(p, "size", message.size, 0, INT64_MAX)
    if isinstance(message, _RESPONSES):
        _check(p, "leader_id", message.leader_id, -1, MAX_NODE_ID)
    if p:
        raise MalformedRaftMessageError(
            f"malformed {type(message).__name__} from node {message.src}: " + "; ".join(p)
        )


def _check_snapshot_id(p: list[str], snapshot_id: m.SnapshotId) -> None:
    _check(p, "snapshot end_offset", snapshot_id.end_offset, 0, INT64_MAX)
    _epoch(p, "snapshot epoch", snapshot_id.epoch)


def _check_fetch_response(p: list[str], message: m.FetchResponse) -> None:
    _check(p, "high_watermark", message.high_watermark, 0, INT64_MAX)
    _check(p, "fetch_offset", message.fetch_offset, -1, INT64_MAX)
    _epoch(p, "last_fetched_epoch", message.last_fetched_epoch, low=-1)
    if message.diverging is not None:
        _epoch(p, "diverging epoch", message.diverging.epoch)
        _check(p, "diverging end_offset", message.diverging.end_offset, 0, INT64_MAX)
    if message.snapshot_id is not None:
        _check_snapshot_id(p, message.snapshot_id)
    previous: m.Entry | None = None
    for entry in message.entries:
        if previous is None:
            _check(p, "entry offset", entry.offset, 0, INT64_MAX)
        elif entry.offset != previous.offset + 1 or entry.epoch < previous.epoch:
            p.append(f"entry {entry.offset}@{entry.epoch} after {previous.offset}@{previous.epoch}")
            return
        _epoch(p, "entry epoch", entry.epoch)
        if p:
            return
        previous = entry
