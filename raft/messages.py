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


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the replicated log. `control` marks Raft's own records (LeaderChange)."""

    offset: int
    epoch: int
    data: bytes
    control: bool = False


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


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
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
class Ready:
    """What the driver must do, in order: persist `election_state` (fsync) if set; fsync the
    log if `sync_log`; then send `messages`; hand `committed` to the state machine; report
    `leader_change`. Then call `advance(ready)`."""

    election_state: ElectionState | None
    sync_log: bool
    log_end_offset: int  # what an fsync of the log now covers
    messages: tuple[Message, ...]
    committed: tuple[Entry, ...]
    leader_change: LeaderAndEpoch | None
    high_watermark: int = 0


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
