"""The messages of KRaft's protocol (KIP-595, pre-vote from KIP-996), as plain values.

The core consumes and produces these; the gRPC transport maps them to protobuf at the edge.
Every message names its sender (`src`) and receiver (`dst`) by node id. Requests carry the
sender's epoch; responses carry the responder's epoch and leader so a stale node catches up
with one round trip. Errors use Kafka's names.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_LEADER = -1

# Kafka error names a Raft response can carry.
NONE = "NONE"
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"  # the request's epoch is older than ours
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"  # a fetch reached a node that is not leader
INCONSISTENT_VOTER_SET = "INCONSISTENT_VOTER_SET"  # the sender is not a voter
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"  # a fetch from an epoch the receiver has not reached
SNAPSHOT_NOT_FOUND = "SNAPSHOT_NOT_FOUND"  # the leader no longer has the snapshot asked for
POSITION_OUT_OF_RANGE = "POSITION_OUT_OF_RANGE"  # a snapshot chunk beyond the snapshot's end


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the replicated log. `control` marks Raft's own records (LeaderChange).
    `more` marks an entry that is not the last of its proposal: the entries of one
    propose() call travel, are stored and are committed together, never a part of them (a
    state machine's operation is all or nothing, as Kafka's atomic batches)."""

    offset: int
    epoch: int
    data: bytes
    control: bool = False
    more: bool = False


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot of the state machine (KIP-630): it holds the effect of every entry below
    `end_offset`, the last of which has epoch `epoch`. Its file is
    `<end_offset:020d>-<epoch:010d>.checkpoint`."""

    end_offset: int
    epoch: int


NO_SNAPSHOT = SnapshotId(0, 0)  # the log still starts at offset 0


@dataclass(frozen=True, slots=True)
class VoteRequest:
    src: int
    dst: int
    epoch: int  # the epoch the candidate stands in (for a pre-vote: the one it would take)
    last_epoch: int  # epoch of the candidate's last entry
    end_offset: int  # the candidate's log end offset
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    granted: bool
    pre_vote: bool
    error: str = NONE
    # The epoch the request stood in (echoed): a candidate counts only answers to the round
    # it is in now, never a grant that was meant for an older one.
    candidate_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    src: int  # the new leader
    dst: int
    epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    error: str = NONE


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    src: int  # the resigning leader
    dst: int
    epoch: int
    preferred_successors: tuple[int, ...]  # most caught-up voters first


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    error: str = NONE


@dataclass(frozen=True, slots=True)
class FetchRequest:
    src: int  # the follower or observer
    dst: int
    epoch: int
    fetch_offset: int  # its log end offset
    last_fetched_epoch: int  # epoch of its last entry
    max_entries: int = 1000
    # The high watermark the fetcher knows (KIP-1166): a leader whose own is ahead answers
    # at once instead of holding the fetch, so every follower learns a commit promptly.
    high_watermark: int = -1


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """The follower's log diverges: its entries of `epoch` end at `end_offset` on the leader."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    high_watermark: int
    entries: tuple[Entry, ...] = ()
    diverging: DivergingEpoch | None = None
    error: str = NONE
    # The request this answers (its fetch offset and last fetched epoch): a follower acts only
    # on the answer to the log it has now, never on a late or duplicated one.
    fetch_offset: int = -1
    last_fetched_epoch: int = -1
    # The leader no longer has the entries asked for (they are in a snapshot, KIP-630): the
    # follower fetches this snapshot with FetchSnapshot, then fetches from its end.
    snapshot_id: SnapshotId | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    src: int  # the follower or observer
    dst: int
    epoch: int
    snapshot_id: SnapshotId
    position: int  # the byte offset in the snapshot to read from
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    snapshot_id: SnapshotId | None = None
    position: int = 0  # where `data` starts in the snapshot
    size: int = 0  # the snapshot's whole size in bytes
    data: bytes = b""
    error: str = NONE


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)


@dataclass(frozen=True, slots=True)
class ElectionState:
    """What `quorum-state` persists, fsynced before a vote is granted or sent: the epoch, the
    vote cast in it, and the leader known in it."""

    epoch: int = 0
    voted_for: int = NO_LEADER
    leader_id: int = NO_LEADER


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class LogWrites:
    """What a Ready asks the driver to do to the stable log, in this order: restart it at
    `reset` (if set: a follower installed that snapshot), cut it at `truncate_to` (if set:
    a diverging suffix), append `entries`; then fsync (raft/unstable_log.py)."""

    reset: SnapshotId | None = None
    truncate_to: int | None = None
    entries: tuple[Entry, ...] = ()

    def __bool__(self) -> bool:
        return self.reset is not None or self.truncate_to is not None or bool(self.entries)


NO_LOG_WRITES = LogWrites()


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """A chunk of a snapshot a follower downloads (FetchSnapshot), for the driver to write
    to the snapshot store: at position 0 the download begins (SnapshotStore.begin), then
    write(); with `last` the driver also freezes it and tells the core whether it was whole
    (RaftCore.snapshot_stored)."""

    snapshot_id: SnapshotId
    position: int
    data: bytes
    last: bool


@dataclass(frozen=True, slots=True)
class EntryRange:
    """The entries at offsets [start, end): committed ones the driver reads from the log and
    hands to the state machine (Ready.committed)."""

    start: int
    end: int

    def __bool__(self) -> bool:
        return self.end > self.start


NO_ENTRIES = EntryRange(0, 0)


@dataclass(frozen=True, slots=True)
class FetchRead:
    """The entries of a leader's FetchResponse, `Ready.messages[index]`, for the driver to
    read before it sends it (raft/ready_reads.py): from `offset`, about `max_entries` cut at
    a proposal's end, none at or beyond `end` (the log end when the fetch was answered)."""

    index: int
    offset: int
    end: int
    max_entries: int


@dataclass(frozen=True, slots=True)
class SnapshotRead:
    """The data of a leader's FetchSnapshotResponse, `Ready.messages[index]`, for the driver
    to read from the snapshot store before it sends it: up to `max_bytes` of `snapshot_id`
    from byte `position`."""

    index: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class Ready:
    """What the driver must do; raft/ready_handler.py holds the order: read what the Ready
    names from the log and the snapshot store (`fetch_reads`, `snapshot_reads`,
    `committed`; raft/ready_reads.py), persist
    `election_state` if set and `log_writes` (fsync if `sync_log`); send `messages` (a
    leader's entries-only FetchResponses may go before the fsync); have the state machine
    load `load_snapshot` (if set: its state is replaced by the snapshot's) and then apply
    the entries of `committed`; report `leader_change`. Then call `advance(ready)`."""

    election_state: ElectionState | None
    sync_log: bool  # fsync the log (after writing `log_writes`)
    log_end_offset: int  # what the log holds once `log_writes` are written
    messages: tuple[Message, ...]
    committed: EntryRange  # to read from the log and apply
    leader_change: LeaderAndEpoch | None
    high_watermark: int = 0
    load_snapshot: SnapshotId | None = None
    log_writes: LogWrites = NO_LOG_WRITES
    snapshot_chunks: tuple[SnapshotChunk, ...] = ()
    fetch_reads: tuple[FetchRead, ...] = ()  # the entries of FetchResponses in `messages`
    snapshot_reads: tuple[SnapshotRead, ...] = ()  # the data of FetchSnapshotResponses there


@dataclass(frozen=True, slots=True)
class RaftStats:
    """Plain numbers about one node, for the metrics edge to read when scraped (the core
    never imports a metrics library). Counters only grow within one process."""

    node_id: int
    role: str
    leader_id: int
    epoch: int
    voted_for: int
    high_watermark: int
    log_end_offset: int
    elections_started: int  # times this node stood as Candidate
    elections_won: int
    last_election_ms: int  # from the start of its pre-vote to leading; -1 if never led
    fetches_served: int  # fetch requests answered as leader
    entries_proposed: int  # entries appended as leader
    entries_replicated: int  # entries appended from a leader's fetch responses
    log_start_offset: int = 0  # entries below are only in the snapshot at log start
    latest_snapshot_end: int = 0  # end offset of the newest snapshot, 0 when none
    snapshots_fetched: int = 0  # snapshots this node downloaded from a leader
    # Messages refused by raft/admission.py (a sender that is not a voter, an epoch out of
    # range), besides those raft/wire.py refused at the edge (the driver counts those).
    messages_refused: int = 0
