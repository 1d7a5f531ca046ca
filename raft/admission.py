"""Who may be heard, and with which epochs: the checks RaftCore.step makes before a message
can change anything. Pure functions, no state.

As Kafka's KafkaRaftClient does it:
- Vote, BeginQuorumEpoch and EndQuorumEpoch requests come only from voters; one from any
  other node is answered INCONSISTENT_VOTER_SET and changes nothing (Kafka's
  validateVoterOnlyRequest). Their responses, and the responses to fetches (a leader's
  data and high watermark), are heard only from voters; a response from another node, or
  one naming a leader that is not a voter, is ignored.
- Fetch and FetchSnapshot requests are answered for voters and for observers (any node id:
  brokers follow the metadata log this way). An observer's fetch never counts toward the
  high watermark or check-quorum (raft/leader_state.py counts voters only) and never moves
  the receiver's epoch (Kafka answers a fetch from a later epoch UNKNOWN_LEADER_EPOCH).
- A message claiming to come from the receiver itself is refused: no node sends to itself.
- Every epoch a message carries must lie in [0, MAX_EPOCH] (raft/limits.py); raft/wire.py
  already refuses the other malformed fields at the edge, this repeats the one check that
  protects state for callers that step messages directly (the simulator, tests).
"""

from __future__ import annotations

from dataclasses import dataclass

from raft.limits import MAX_EPOCH, MAX_NODE_ID, out_of_range
from raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    Message,
    VoteRequest,
)

VOTER_REQUESTS = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest)
OPEN_REQUESTS = (FetchRequest, FetchSnapshotRequest)


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str  # a sentence for the log
    answer: bool  # a request refused with INCONSISTENT_VOTER_SET (else: dropped silently)


def refusal(message: Message, node_id: int, voters: frozenset[int]) -> Refusal | None:
    """Why `message` must not be acted on, or None when it may be."""
    src = message.src
    if src == node_id:
        return Refusal(f"it claims to come from this node ({node_id})", answer=False)
    if isinstance(message, OPEN_REQUESTS):
        problem = out_of_range("replica id", src, 0, MAX_NODE_ID)
    elif src not in voters:
        return Refusal(f"node {src} is not a voter", answer=isinstance(message, VOTER_REQUESTS))
    else:
        problem = None
    problem = problem or out_of_range("epoch", message.epoch, 0, MAX_EPOCH)
    if problem is not None:
        return Refusal(problem, answer=False)
    leader = getattr(message, "leader_id", NO_LEADER)
    if leader != NO_LEADER and leader not in voters:
        return Refusal(f"it names node {leader}, not a voter, as the leader", answer=False)
    return None
