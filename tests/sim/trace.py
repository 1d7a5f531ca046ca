"""The readable event trace of a run.

Recording must cost almost nothing, because every run records every event and only a failing
or `--trace` run ever looks: `record` keeps the raw parts in a bounded ring and formats
nothing; `lines()` formats on demand. With `echo` set, each event is also printed as it
happens (`python -m tests.sim --seed N --trace`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)


def format_message(m: Any) -> str:
    """One message in a line: `2->1 Vote e4 last=3@17` reads as "node 2 asks node 1 for its
    vote in epoch 4; its log ends at offset 17 with an entry of epoch 3"."""
    head = f"{m.src}->{m.dst} "
    err = "" if getattr(m, "error", "NONE") == "NONE" else f" {m.error}"
    if isinstance(m, VoteRequest):
        kind = "PreVote" if m.pre_vote else "Vote"
        return f"{head}{kind} e{m.epoch} last={m.last_epoch}@{m.end_offset}"
    if isinstance(m, VoteResponse):
        kind = "PreVoteResp" if m.pre_vote else "VoteResp"
        verdict = "granted" if m.granted else "denied"
        # The epoch the request stood in, where the message carries it.
        round_ = getattr(m, "candidate_epoch", -1)
        asked = f" for e{round_}" if round_ >= 0 else ""
        return f"{head}{kind} e{m.epoch}{asked} {verdict} leader={m.leader_id}{err}"
    if isinstance(m, BeginQuorumEpochRequest):
        return f"{head}BeginQuorumEpoch e{m.epoch}"
    if isinstance(m, BeginQuorumEpochResponse):
        return f"{head}BeginQuorumEpochResp e{m.epoch} leader={m.leader_id}{err}"
    if isinstance(m, EndQuorumEpochRequest):
        return f"{head}EndQuorumEpoch e{m.epoch} successors={list(m.preferred_successors)}"
    if isinstance(m, EndQuorumEpochResponse):
        return f"{head}EndQuorumEpochResp e{m.epoch} leader={m.leader_id}{err}"
    if isinstance(m, FetchRequest):
        return f"{head}Fetch e{m.epoch} at={m.fetch_offset} last_epoch={m.last_fetched_epoch}"
    if isinstance(m, FetchResponse):
        body = f"{head}FetchResp e{m.epoch} leader={m.leader_id} hw={m.high_watermark}"
        body += f" for={m.fetch_offset}/{m.last_fetched_epoch}"
        if m.diverging is not None:
            body += f" DIVERGING(epoch={m.diverging.epoch} end={m.diverging.end_offset})"
        if m.entries:
            body += f" entries={format_entries(m.entries)}"
        if m.snapshot_id is not None:
            body += f" SNAPSHOT={_snapshot(m.snapshot_id)}"
        return body + err
    if isinstance(m, FetchSnapshotRequest):
        return f"{head}FetchSnapshot e{m.epoch} {_snapshot(m.snapshot_id)} at={m.position}"
    if isinstance(m, FetchSnapshotResponse):
        snap = "-" if m.snapshot_id is None else _snapshot(m.snapshot_id)
        chunk = f" bytes {m.position}..{m.position + len(m.data)} of {m.size}" if m.data else ""
        return f"{head}FetchSnapshotResp e{m.epoch} leader={m.leader_id} {snap}{chunk}{err}"
    return f"{head}{m!r}"


def _snapshot(snapshot_id: SnapshotId) -> str:
    """A snapshot id as its file is named: end offset and epoch."""
    return f"{snapshot_id.end_offset}-{snapshot_id.epoch}"


def format_entries(entries: tuple[Entry, ...] | list[Entry]) -> str:
    """`[5..9 e3]` for a run of entries of one epoch; a lone entry shows its data."""
    runs: list[str] = []
    i = 0
    while i < len(entries):
        j = i
        while j + 1 < len(entries) and entries[j + 1].epoch == entries[i].epoch:
            j += 1
        first, last = entries[i], entries[j]
        if i == j:
            runs.append(f"{first.offset} e{first.epoch} {_short(first)}")
        else:
            runs.append(f"{first.offset}..{last.offset} e{first.epoch}")
        i = j + 1
    return "[" + ", ".join(runs) + "]"


def _short(entry: Entry) -> str:
    data = entry.data[:24].decode("ascii", "replace")
    return f"'{data}'" if not entry.control else "<LeaderChange>"


class Lazy:
    """A trace part formatted only if the line is ever shown."""

    __slots__ = ("_fn", "_args")

    def __init__(self, fn: Callable[..., str], *args: Any) -> None:
        self._fn = fn
        self._args = args

    def __str__(self) -> str:
        return self._fn(*self._args)


class Trace:
    def __init__(self, clock: Callable[[], int], keep: int = 400, echo: bool = False) -> None:
        self._clock = clock
        self._ring: deque[tuple[int, tuple[Any, ...]]] = deque(maxlen=keep)
        self.echo = echo

    def record(self, *parts: Any) -> None:
        item = (self._clock(), parts)
        self._ring.append(item)
        if self.echo:
            print(_format(item), flush=False)

    def lines(self, last: int | None = None) -> list[str]:
        items = list(self._ring)
        if last is not None:
            items = items[-last:]
        return [_format(item) for item in items]


def _format(item: tuple[int, tuple[Any, ...]]) -> str:
    at_ms, parts = item
    text = " ".join(
        format_message(p) if hasattr(p, "src") and hasattr(p, "dst") else str(p) for p in parts
    )
    return f"{at_ms:>8} ms  {text}"
