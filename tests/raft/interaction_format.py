"""How the interaction scripts print messages, entries and election state (interaction.py
explains the notation)."""

from __future__ import annotations

from raft.messages import (
    NO_LEADER,
    NONE,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    ElectionState,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)


def leader_name(leader_id: int) -> str:
    return "none" if leader_id == NO_LEADER else str(leader_id)


def _error(error: str) -> str:
    return "" if error == NONE else f" error={error}"


def fmt_entry(entry: Entry) -> str:
    return f"{entry.offset}@{entry.epoch}"


def fmt_entry_data(entry: Entry) -> str:
    return f"{fmt_entry(entry)} {entry.data.decode(errors='backslashreplace')}"


def message_kind(m: Message) -> str:
    """The message's name as printed: VoteRequest, Fetch, BeginQuorumEpochResponse, ..."""
    name = type(m).__name__
    return name.removesuffix("Request") if name != "VoteRequest" else name


def fmt_message(m: Message) -> str:
    head = f"{m.src}->{m.dst}"
    if isinstance(m, VoteRequest):
        kind = " pre-vote" if m.pre_vote else ""
        return f"{head} VoteRequest epoch={m.epoch} last={m.last_epoch}/{m.end_offset}{kind}"
    if isinstance(m, VoteResponse):
        verdict = "granted" if m.granted else "rejected"
        kind = " pre-vote" if m.pre_vote else ""
        leader = "" if m.leader_id == NO_LEADER else f" leader={m.leader_id}"
        return f"{head} VoteResponse epoch={m.epoch}{leader} {verdict}{kind}{_error(m.error)}"
    if isinstance(m, BeginQuorumEpochRequest):
        return f"{head} BeginQuorumEpoch epoch={m.epoch}"
    if isinstance(m, BeginQuorumEpochResponse):
        return (
            f"{head} BeginQuorumEpochResponse epoch={m.epoch} leader={leader_name(m.leader_id)}"
            f"{_error(m.error)}"
        )
    if isinstance(m, EndQuorumEpochRequest):
        successors = ",".join(map(str, m.preferred_successors)) or "none"
        return f"{head} EndQuorumEpoch epoch={m.epoch} successors={successors}"
    if isinstance(m, EndQuorumEpochResponse):
        return (
            f"{head} EndQuorumEpochResponse epoch={m.epoch} leader={leader_name(m.leader_id)}"
            f"{_error(m.error)}"
        )
    if isinstance(m, FetchRequest):
        return (
            f"{head} Fetch epoch={m.epoch} offset={m.fetch_offset}"
            f" last-epoch={m.last_fetched_epoch}"
        )
    if isinstance(m, FetchResponse):
        text = f"{head} FetchResponse epoch={m.epoch}"
        if m.leader_id != m.src or m.error != NONE:
            text += f" leader={leader_name(m.leader_id)}"
        text += f" hw={m.high_watermark}"
        if m.error != NONE:
            return text + _error(m.error)
        if m.diverging is not None:
            return text + f" diverging={m.diverging.epoch}/{m.diverging.end_offset}"
        if m.snapshot_id is not None:
            return text + f" snapshot={fmt_snapshot(m.snapshot_id)}"
        return text + " entries=[" + " ".join(fmt_entry(e) for e in m.entries) + "]"
    if isinstance(m, FetchSnapshotRequest):
        return (
            f"{head} FetchSnapshot epoch={m.epoch} snapshot={fmt_snapshot(m.snapshot_id)}"
            f" at={m.position}"
        )
    if isinstance(m, FetchSnapshotResponse):
        text = f"{head} FetchSnapshotResponse epoch={m.epoch}"
        if m.leader_id != m.src or m.error != NONE:
            text += f" leader={leader_name(m.leader_id)}"
        if m.snapshot_id is not None:
            text += f" snapshot={fmt_snapshot(m.snapshot_id)} at={m.position}"
        if m.error != NONE:
            return text + _error(m.error)
        return text + f" size={m.size} bytes={len(m.data)}"
    raise TypeError(f"unknown message {m!r}")


def fmt_snapshot(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset}-{snapshot_id.epoch}"


def fmt_state(state: ElectionState) -> str:
    voted = leader_name(state.voted_for)
    return f"epoch={state.epoch} voted-for={voted} leader={leader_name(state.leader_id)}"
