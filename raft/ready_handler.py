"""Carries out a RaftCore's Readies in the one order that keeps Raft safe. No I/O here.

This is the part of a driver that decides *when* each effect of a Ready happens; *how* is
left to the ports it is given. raft/driver.py gives it the real ones (quorum-state file and
metadata log fsynced in a worker thread, the gRPC transport, the node's state machine);
tests/sim/cluster.py gives it simulated ones (a disk that loses or tears unsynced writes on
a power cut, a lossy network, the simulator's state machine). So the Raft simulator checks
the ordering the node ships, not a copy of it.

The order, for each Ready (etcd-io/raft's "Usage" section; Kafka's KafkaRaftClient flushes
the log and quorum-state before it answers or sends):
  0. read what the Ready names (raft/ready_reads.py): the entries of the leader's
     FetchResponses, the chunks of its FetchSnapshotResponses, and the committed entries
     to apply (the core reads no entry and no snapshot itself);
     the log as the core saw it, the stable log overlaid with this Ready's own writes, so
     entries still in the unstable tail are answered from memory;
  1. send the leader's FetchResponses that carry only entries (no election state changed in
     this Ready): a leader may replicate entries while it writes them, because it counts
     only its own *flushed* log end toward the high watermark (advance() tells it what was
     flushed), as etcd's leaders send MsgApp before their own append is durable;
  2. persist: the election state (quorum-state) and the log, fsynced; then the chunks of a
     snapshot download, and when the last is written and frozen the core learns whether
     the snapshot was whole (it installs it, and fetches on, in the next Ready);
  3. send every other message: a vote, a fetch naming our log end, an answer from a new
     epoch must never tell a peer something the disk could still forget;
  4. have the state machine load the snapshot (a follower that installed one, or a restart)
     and then apply the committed entries, in offset order;
  5. report a leader change (the driver fails appends that can no longer commit here);
  6. advance(): the core learns what is durable (a leader's high watermark may move) and the
     driver completes the appends below the high watermark.

The ports are awaited, so an asyncio driver can run the disk off its loop; a simulator
whose ports never suspend runs a Ready to the end synchronously (run_to_end).
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, Protocol

from raft.core import RaftCore
from raft.messages import (
    Entry,
    FetchResponse,
    LeaderAndEpoch,
    Message,
    Ready,
    SnapshotChunk,
    SnapshotId,
)
from raft.ready_reads import ReadsDone, needs_reads


class ReadyPorts(Protocol):
    """What a driver plugs into the handler."""

    async def read(self, ready: Ready) -> ReadsDone:
        """Carries out `ready`'s reads over the stable log and the snapshot store
        (ready_reads.carry_out_reads; a node runs it in its disk thread). Called only for a
        Ready with reads."""
        ...

    async def persist(self, ready: Ready) -> None:
        """Makes `ready.election_state` (if set) and the log durable (fsync if
        `ready.sync_log`). Returns once both are on disk. Called for every Ready; one with
        nothing to persist returns at once."""
        ...

    def send(self, message: Message) -> None:
        """Hands `message` to the network (fire and forget: Raft retries on its own)."""
        ...

    async def write_snapshot_chunk(self, chunk: SnapshotChunk) -> bool:
        """Writes a downloaded chunk to the snapshot store (SnapshotStore.begin at position
        0, then write); for the last one also freeze, returning whether the snapshot was
        whole. True for every other chunk."""
        ...

    async def load_snapshot(self, snapshot_id: SnapshotId) -> None:
        """The state machine replaces its state with the snapshot's."""
        ...

    def apply(self, entries: Sequence[Entry]) -> None:
        """The state machine applies committed entries, in offset order."""
        ...

    def leader_changed(self, leader: LeaderAndEpoch) -> None: ...

    def advanced(self, high_watermark: int) -> None:
        """The Ready is done: the appends below `high_watermark` are committed."""
        ...


def split_messages(ready: Ready) -> tuple[list[Message], list[Message]]:
    """(the messages that may leave before `ready` is durable, those that wait for it):
    only a leader's FetchResponses in a Ready that changed no election state go early."""
    if ready.election_state is not None:
        return [], list(ready.messages)
    early: list[Message] = []
    later: list[Message] = []
    for message in ready.messages:
        entries_only = ready.election_state is None and isinstance(message, FetchResponse)
        (early if entries_only else later).append(message)
    return early, later


def _filled(messages: list[Message], filled: dict[int, Message]) -> list[Message]:
    """`messages` with those the reads filled (keyed by the id of the one they replace)."""
    return [filled.get(id(message), message) for message in messages]


class LivelockError(AssertionError):
    """The core kept producing Readies: a bug in the core, not a slow run."""


class ReadyHandler:
    def __init__(self, core: RaftCore, ports: ReadyPorts) -> None:
        self.core = core
        self.ports = ports

    async def handle_all(self, max_readies: int | None = None) -> None:
        """Carries out Readies while the core has one. `max_readies`: raise LivelockError
        after that many (a simulator's guard; a node has none)."""
        handled = 0
        while self.core.has_ready():
            if max_readies is not None and handled >= max_readies:
                raise LivelockError(
                    f"node {self.core.node_id}: still has_ready() after {handled} Readies"
                )
            await self.handle(self.core.ready())
            handled += 1

    async def handle(self, ready: Ready) -> None:
        committed: tuple[Entry, ...] = ()
        early, later = split_messages(ready)
        if needs_reads(ready):
            done = await self.ports.read(ready)
            committed = done.committed
            if done.filled:
                early, later = _filled(early, done.filled), _filled(later, done.filled)
        for message in early:
            self.ports.send(message)
        await self.ports.persist(ready)
        for chunk in ready.snapshot_chunks:
            complete = await self.ports.write_snapshot_chunk(chunk)
            if chunk.last:
                self.core.snapshot_stored(chunk.snapshot_id, complete)
        for message in later:
            self.ports.send(message)
        if ready.load_snapshot is not None:
            await self.ports.load_snapshot(ready.load_snapshot)
        if committed:
            self.ports.apply(committed)
        if ready.leader_change is not None:
            self.ports.leader_changed(ready.leader_change)
        self.core.advance(ready)
        self.ports.advanced(self.core.high_watermark)


class SuspendedError(RuntimeError):
    """A port that run_to_end drove suspended: it is not synchronous."""


def run_to_end(step: Coroutine[Any, Any, None]) -> None:
    """Runs a coroutine whose awaits never suspend (a simulator's ports) to its end, on no
    event loop. An exception out of it (a simulated power cut) propagates."""
    try:
        step.send(None)
    except StopIteration:
        return
    step.close()
    raise SuspendedError("a port suspended; run_to_end needs ports that complete at once")
