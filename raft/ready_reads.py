"""The reads a Ready names, carried out by the driver: the core reads no entry and no
snapshot itself.

A leader's FetchResponse leaves the core without its entries, named by a `FetchRead`
(offset, a page size, the log end when the fetch was answered), and its
FetchSnapshotResponse without its data, named by a `SnapshotRead`; the committed entries to
apply leave as an `EntryRange`. raft/ready_handler.py reads them, first thing for each
Ready, through the driver's port (on a node, in its disk thread, off the event loop), then
fills the responses and hands the entries to the state machine.

What is read is the log as the core saw it when it made the Ready: the stable log as the
previous Ready left it, overlaid with this Ready's `log_writes` (its unstable tail, not on
disk yet: a leader sends entries-only FetchResponses before its own write and fsync, as
etcd's leaders send MsgApp). Below the first offset those writes touch, entries come from
the stable log; from it on, from the writes themselves (`LogOverlay`). A reset wipes
everything below it, so then nothing is read from the stable log. The same reads done after
the writes would see the same entries, so when they are done does not matter for what is
read. No I/O here beyond the reader handed in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from raft.log import EntryReader
from raft.messages import (
    Entry,
    EntryRange,
    FetchRead,
    FetchResponse,
    FetchSnapshotResponse,
    LogWrites,
    Message,
    Ready,
)
from raft.snapshots import SnapshotReader


class LogOverlay:
    """An EntryReader over `stable` as it was before `writes`, with `writes` on top."""

    def __init__(self, stable: EntryReader, writes: LogWrites) -> None:
        self.stable = stable
        self.written = writes.entries
        self.stable_limit = stable_limit(writes)

    def read(self, offset: int, max_entries: int) -> Sequence[Entry]:
        out: list[Entry] = []
        if offset < self.stable_limit:
            out += self.stable.read(offset, min(max_entries, self.stable_limit - offset))
            offset += len(out)
            if offset < self.stable_limit:
                return out
        if self.written:
            index = offset - self.written[0].offset
            if index >= 0:
                out += self.written[index : index + max_entries - len(out)]
        return out


def stable_limit(writes: LogWrites) -> int:
    """The first offset `writes` touch: below it, the stable log holds the entries."""
    limit = 2**63
    if writes.reset is not None:
        limit = -1
    if writes.truncate_to is not None:
        limit = min(limit, writes.truncate_to)
    if writes.entries:
        limit = min(limit, writes.entries[0].offset)
    return limit


def whole_proposals(log: EntryReader, read: FetchRead) -> tuple[Entry, ...]:
    """About `read.max_entries` entries from `read.offset`, below `read.end`, cut at a
    proposal's end: a follower never holds part of one, so no leader can ever commit part
    of one. A proposal longer than the page goes whole."""
    count = read.max_entries

    def page(offset: int) -> list[Entry]:
        return list(log.read(offset, min(count, read.end - offset))) if offset < read.end else []

    entries = page(read.offset)
    if not entries or not entries[-1].more:
        return tuple(entries)
    whole = len(entries)
    while whole and entries[whole - 1].more:
        whole -= 1
    if whole:
        return tuple(entries[:whole])
    while entries[-1].more:  # one proposal longer than a page: read on to its end
        tail = page(entries[-1].offset + 1)
        if not tail:
            break
        entries += tail
    end = next((i for i, e in enumerate(entries) if not e.more), len(entries) - 1)
    return tuple(entries[: end + 1])


def read_range(log: EntryReader, entries: EntryRange) -> tuple[Entry, ...]:
    """Exactly the entries of `entries` (the committed ones to apply)."""
    out: list[Entry] = []
    offset = entries.start
    while offset < entries.end:
        got = log.read(offset, entries.end - offset)
        if not got:
            break
        out += got
        offset += len(got)
    if len(out) != entries.end - entries.start:
        raise AssertionError(f"read {len(out)} entries of {entries}: the log lacks the rest")
    return tuple(out)


@dataclasses.dataclass(frozen=True, slots=True)
class ReadsDone:
    """What a Ready's reads gave: its messages that got their entries or data, by the id()
    of the one each replaces in `Ready.messages` (the handler sends those instead), and
    its committed entries."""

    filled: dict[int, Message]
    committed: tuple[Entry, ...]

    def messages(self, ready: Ready) -> tuple[Message, ...]:
        """`ready.messages` as they are sent, filled."""
        return tuple(self.filled.get(id(m), m) for m in ready.messages)


def needs_reads(ready: Ready) -> bool:
    return bool(ready.fetch_reads or ready.snapshot_reads or ready.committed)


def reads_disk(ready: Ready) -> bool:
    """Whether `ready`'s reads reach the stable log or a snapshot (else its own writes hold
    them all: a leader answering followers with what it just appended reads no disk)."""
    if ready.snapshot_reads:
        return True
    limit = stable_limit(ready.log_writes)
    if ready.committed and ready.committed.start < limit:
        return True
    return any(read.offset < limit for read in ready.fetch_reads)


def carry_out_reads(ready: Ready, stable: EntryReader, snapshots: SnapshotReader) -> ReadsDone:
    """Reads what `ready` names from `stable` (the log as the previous Ready left it) and
    its own log writes, and from `snapshots` (the driver's part; a node runs it in its disk
    thread). A snapshot a Ready reads from is still there: snapshots are deleted only in
    advance() and compaction, after the Ready or between Readies."""
    log = LogOverlay(stable, ready.log_writes)
    messages = ready.messages
    filled: dict[int, Message] = {}
    for read in ready.fetch_reads:
        response = messages[read.index]
        if not isinstance(response, FetchResponse) or response.entries:
            raise AssertionError(f"{read} names {response}, not a FetchResponse to fill")
        entries = whole_proposals(log, read)
        filled[id(response)] = dataclasses.replace(response, entries=entries)
    for chunk in ready.snapshot_reads:
        answer = messages[chunk.index]
        if not isinstance(answer, FetchSnapshotResponse) or answer.data:
            raise AssertionError(f"{chunk} names {answer}, not a FetchSnapshotResponse to fill")
        data = snapshots.read(chunk.snapshot_id, chunk.position, chunk.max_bytes)
        filled[id(answer)] = dataclasses.replace(answer, data=data)
    committed = read_range(log, ready.committed) if ready.committed else ()
    return ReadsDone(filled, committed)
