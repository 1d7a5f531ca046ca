"""The reads a Ready names, as the driver carries them out (raft/ready_reads.py): the log as
the core saw it is the stable log overlaid with the Ready's own writes, and a fetch answer
holds whole proposals only."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from raft.log import MemoryRaftLog
from raft.messages import (
    Entry,
    EntryRange,
    FetchRead,
    FetchResponse,
    FetchSnapshotResponse,
    LogWrites,
    Ready,
    SnapshotId,
    SnapshotRead,
)
from raft.ready_reads import LogOverlay, carry_out_reads, reads_disk, whole_proposals
from raft.snapshots import MemorySnapshotStore


def _entries(spec: str) -> tuple[Entry, ...]:
    """ "0@1 1@1+" -> entries at those offsets and epochs; "+" marks `more` (not the last
    entry of its proposal)."""
    out = []
    for word in spec.split():
        more = word.endswith("+")
        offset, _, epoch = word.rstrip("+").partition("@")
        out.append(Entry(int(offset), int(epoch), word.encode(), more=more))
    return tuple(out)


def _spots(entries: Sequence[Entry]) -> str:
    return " ".join(f"{e.offset}@{e.epoch}{'+' if e.more else ''}" for e in entries)


def _stable(spec: str) -> MemoryRaftLog:
    log = MemoryRaftLog()
    log.append(_entries(spec))
    log.sync()
    return log


def test_unstable_entries_come_from_the_ready_and_truncated_ones_are_not_read() -> None:
    stable = _stable("0@1 1@1 2@1 3@1")
    writes = LogWrites(None, 2, _entries("2@2 3@2 4@2"))
    overlay = LogOverlay(stable, writes)
    assert _spots(overlay.read(0, 10)) == "0@1 1@1 2@2 3@2 4@2"
    assert _spots(overlay.read(1, 2)) == "1@1 2@2"
    assert _spots(overlay.read(4, 10)) == "4@2"
    assert _spots(stable.entries) == "0@1 1@1 2@1 3@1"  # read before the Ready's writes


def test_after_a_reset_nothing_is_read_from_the_stable_log() -> None:
    stable = _stable("0@1 1@1")
    overlay = LogOverlay(stable, LogWrites(SnapshotId(5, 2), None, _entries("5@2")))
    assert _spots(overlay.read(5, 10)) == "5@2"


@pytest.mark.parametrize(
    ("log", "offset", "count", "end", "expected"),
    [
        ("0@1 1@1+ 2@1 3@1", 0, 2, 4, "0@1"),  # cut back to the proposal's end
        ("0@1+ 1@1+ 2@1 3@1", 0, 2, 4, "0@1+ 1@1+ 2@1"),  # one proposal longer than a page
        ("0@1 1@1 2@1 3@1", 0, 10, 2, "0@1 1@1"),  # nothing at or past the answer's log end
        ("0@1 1@1", 2, 10, 2, ""),
    ],
)
def test_a_fetch_answer_holds_whole_proposals(
    log: str, offset: int, count: int, end: int, expected: str
) -> None:
    read = FetchRead(0, offset, end, count)
    assert _spots(whole_proposals(_stable(log), read)) == expected


def test_a_ready_gets_its_messages_filled_and_its_committed_entries() -> None:
    stable = _stable("0@1 1@1 2@1")
    snapshots = MemorySnapshotStore()
    snapshot = SnapshotId(2, 1)
    snapshots.create(snapshot, b"0123456789")
    answer = FetchResponse(1, 2, 1, 1, 2, fetch_offset=1, last_fetched_epoch=1)
    chunk = FetchSnapshotResponse(1, 3, 1, 1, snapshot, 4, 10)
    ready = Ready(
        election_state=None,
        sync_log=True,
        log_end_offset=5,
        messages=(answer, chunk),
        committed=EntryRange(0, 4),
        leader_change=None,
        log_writes=LogWrites(None, None, _entries("3@1 4@1")),
        fetch_reads=(FetchRead(0, 1, 5, 100),),
        snapshot_reads=(SnapshotRead(1, snapshot, 4, 3),),
    )
    assert reads_disk(ready)
    done = carry_out_reads(ready, stable, snapshots)
    filled, data = done.messages(ready)
    assert isinstance(filled, FetchResponse) and isinstance(data, FetchSnapshotResponse)
    assert _spots(filled.entries) == "1@1 2@1 3@1 4@1"
    assert data.data == b"456"
    assert _spots(done.committed) == "0@1 1@1 2@1 3@1"


def test_a_leader_answering_from_its_unstable_tail_reads_no_disk() -> None:
    ready = Ready(
        election_state=None,
        sync_log=True,
        log_end_offset=5,
        messages=(FetchResponse(1, 2, 1, 1, 2, fetch_offset=3, last_fetched_epoch=1),),
        committed=EntryRange(0, 0),
        leader_change=None,
        log_writes=LogWrites(None, None, _entries("3@1 4@1")),
        fetch_reads=(FetchRead(0, 3, 5, 100),),
    )
    assert not reads_disk(ready)
    done = carry_out_reads(ready, MemoryRaftLog(), MemorySnapshotStore())
    (filled,) = done.messages(ready)
    assert isinstance(filled, FetchResponse) and _spots(filled.entries) == "3@1 4@1"
