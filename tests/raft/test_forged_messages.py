"""Forged and absurd messages change nothing (issue 16): told with the interaction harness.

A quorum of voters 1, 2, 3 (leader 1, epoch 1) and observer 4 is set up; then a message no
node sent is stepped into a node (`inject`). Each test states what an attacker got before
the fix (node 99 is not a voter; 2^31-1 is int32's maximum) and checks the node's role,
epoch, leader and log afterwards, that the refusal was counted, and, for a voters-only
request, Kafka's answer INCONSISTENT_VOTER_SET.
"""

from __future__ import annotations

import pytest
from interaction import Cluster

from raft.leader_state import MAX_OBSERVERS, OBSERVER_SESSION_TIMEOUT_MS, LeaderState
from raft.limits import MAX_EPOCH, EpochExhaustedError
from raft.messages import INCONSISTENT_VOTER_SET, UNKNOWN_LEADER_EPOCH, Message
from raft.roles import Role

INT32_MAX = 2**31 - 1

SETUP = """
    add-nodes voters=1,2,3 observers=4
    tick 1 100
    stabilize quiet
    propose 1 create-topic
    stabilize quiet
"""


class Quorum:
    def __init__(self) -> None:
        self.cluster = Cluster()
        self.transcript: list[str] = []
        self.run(SETUP)
        self.before = {n: self.state(n) for n in self.cluster.nodes}

    def run(self, script: str) -> str:
        out = ""
        for raw in script.strip().splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                out = self.cluster.run(line)
                self.transcript.append(f"{line}\n----\n{out}\n")
        return out

    def state(self, node: int) -> tuple[Role, int, int, int, int]:
        c = self.cluster.nodes[node].core
        return (c.role, c.epoch, c.leader_id, c.log.end_offset(), c.high_watermark)

    def check(self, ok: bool, what: str) -> None:
        assert ok, "\n".join(self.transcript) + f"\nexpected: {what}"

    def check_unchanged(self, node: int) -> None:
        self.check(self.state(node) == self.before[node], f"node {node} is unchanged")

    def refused(self, node: int) -> int:
        return self.cluster.nodes[node].core.stats().messages_refused

    def sent(self, node: int) -> list[Message]:
        """What `node` sends in its next Ready (processed; left queued)."""
        self.run(f"process-ready {node}")
        return [m for m in self.cluster.queue if m.src == node]


def test_begin_quorum_epoch_at_int32_max_from_a_non_voter_is_refused() -> None:
    """Before: every voter moved to epoch 2^31-1 and persisted it; the next election needed
    2^31, which overflowed int32 and killed the Raft task for good."""
    q = Quorum()
    out = q.run(f"inject BeginQuorumEpochRequest 99->2 epoch={INT32_MAX}")
    q.check("refused: node 99 is not a voter" in out, "the refusal names the sender")
    q.check_unchanged(2)
    answers = q.sent(2)
    q.check(
        [(m.dst, getattr(m, "error", None)) for m in answers] == [(99, INCONSISTENT_VOTER_SET)],
        "node 2 answers INCONSISTENT_VOTER_SET and nothing else",
    )
    q.check(q.refused(2) == 1, "the refusal is counted")


def test_begin_quorum_epoch_from_a_non_voter_does_not_depose_the_leader() -> None:
    """Before: BeginQuorumEpoch(epoch+1) from node 99 made the leader step down and every
    voter follow node 99, every time."""
    q = Quorum()
    for node in (1, 2, 3):
        q.run(f"inject BeginQuorumEpochRequest 99->{node} epoch=2")
    q.run("stabilize quiet\ntick all 50\nstabilize quiet")
    for node in (1, 2, 3):
        q.check(q.state(node)[:3] == q.before[node][:3], f"node {node} keeps role and leader")


def test_fetch_response_from_a_non_voter_commits_nothing() -> None:
    """Before: answering a follower's fetch as node 99 (after the BeginQuorumEpoch above)
    appended and committed a forged record on every voter."""
    q = Quorum()
    q.run("inject BeginQuorumEpochRequest 99->2 epoch=2")
    out = q.run(
        "inject FetchResponse 99->2 epoch=2 leader_id=99 high_watermark=3 "
        "entries=2@2:remove-topic fetch_offset=2 last_fetched_epoch=1"
    )
    q.run("process-ready 2")
    q.check(q.cluster.nodes[2].core.log.end_offset() == 2, "no entry was appended")
    q.check_unchanged(2)
    q.check("refused: node 99 is not a voter" in out, "the response is refused")


def test_response_naming_a_non_voter_leader_is_ignored() -> None:
    """A voter's answer naming node 99 as the leader of our epoch: Kafka ignores a response
    with an unknown leader id; before, an Unattached voter followed node 99."""
    q = Quorum()
    q.run("crash 3")  # restarts following leader 1; make it Unattached in epoch 1
    q.run("partition 3 | 1,2\ntick 3 400\nstabilize quiet\nheal")
    before = q.state(3)
    out = q.run("inject FetchResponse 2->3 epoch=1 leader_id=99 high_watermark=0 error=NONE")
    q.check("names node 99, not a voter, as the leader" in out, "the response is refused")
    q.check(q.state(3) == before, "node 3 does not follow node 99")


def test_vote_and_end_quorum_epoch_from_a_non_voter_are_refused() -> None:
    q = Quorum()
    vote = q.run("inject VoteRequest 99->2 epoch=5 last_epoch=1 end_offset=100 pre_vote=false")
    end = q.run("inject EndQuorumEpochRequest 99->2 epoch=1 preferred_successors=2")
    q.check("refused" in vote and "refused" in end, "both are refused")
    q.check_unchanged(2)
    errors = [getattr(m, "error", None) for m in q.sent(2)]
    q.check(errors == [INCONSISTENT_VOTER_SET] * 2, "both answered INCONSISTENT_VOTER_SET")


def test_message_claiming_to_come_from_the_receiver_is_refused() -> None:
    q = Quorum()
    out = q.run("inject BeginQuorumEpochRequest 2->2 epoch=2")
    q.check("claims to come from this node" in out, "the message is refused")
    q.check_unchanged(2)
    q.check(q.sent(2) == [], "no answer to itself")


def test_voter_epoch_beyond_the_largest_is_refused() -> None:
    """A voter's epoch jump is legitimate Raft up to MAX_EPOCH (2^31-2); an epoch past it
    (from which no election could follow) is refused even from a voter."""
    q = Quorum()
    out = q.run(f"inject BeginQuorumEpochRequest 3->2 epoch={MAX_EPOCH + 1}")
    q.check(f"epoch {MAX_EPOCH + 1} is outside" in out, "the epoch is refused")
    q.check_unchanged(2)
    q.run(f"inject BeginQuorumEpochRequest 3->2 epoch={MAX_EPOCH}")
    q.check(q.state(2)[:3] == (Role.FOLLOWER, MAX_EPOCH, 3), "a jump to MAX_EPOCH is followed")


def test_pre_vote_for_an_epoch_beyond_the_largest_is_refused() -> None:
    """A pre-vote asks for epoch+1: at MAX_EPOCH+1 granting it would let a candidate stand
    in an epoch that overflows; before, the receiver also caught up to MAX_EPOCH."""
    q = Quorum()
    out = q.run(
        f"inject VoteRequest 3->2 epoch={MAX_EPOCH + 1} last_epoch=1 end_offset=2 pre_vote=true"
    )
    q.check("refused" in out, "the pre-vote is refused")
    q.check_unchanged(2)


def test_observer_fetch_from_a_later_epoch_moves_no_epoch() -> None:
    """Observers are answered, but never move a voter's epoch: Kafka answers a fetch from a
    later epoch UNKNOWN_LEADER_EPOCH. Before, a fetch from observer 4 (or any made-up id)
    with epoch 2^31-2 moved the leader to that epoch and deposed it."""
    q = Quorum()
    q.run(f"inject FetchRequest 4->1 epoch={MAX_EPOCH} fetch_offset=0 last_fetched_epoch=0")
    q.check_unchanged(1)
    errors = [getattr(m, "error", None) for m in q.sent(1) if m.dst == 4]
    q.check(errors == [UNKNOWN_LEADER_EPOCH], "the observer is told UNKNOWN_LEADER_EPOCH")


def test_observer_fetch_never_moves_the_high_watermark() -> None:
    """Already held before the fix (leader_state counts voters only): an observer claiming a
    log far ahead, while the voters are cut off, commits nothing."""
    q = Quorum()
    q.run("partition 1,4 | 2,3\npropose 1 uncommitted\nprocess-ready 1")
    hw = q.cluster.nodes[1].core.high_watermark
    q.run("inject FetchRequest 4->1 epoch=1 fetch_offset=1000 last_fetched_epoch=1")
    q.run("inject FetchRequest 77->1 epoch=1 fetch_offset=1000 last_fetched_epoch=1")
    q.run("process-ready 1")
    q.check(q.cluster.nodes[1].core.high_watermark == hw, "the high watermark stays")


def test_a_node_at_the_last_epoch_stops_loudly_instead_of_overflowing() -> None:
    """2^31 real elections later (here: a single voter whose persisted epoch is MAX_EPOCH),
    standing again would need an epoch past int32's range: the core raises a clear error
    (the node then ends, server/node.py) rather than persist an overflowing epoch."""
    cluster = Cluster()
    cluster.run("add-nodes voters=1")
    cluster.run(f"append-log 1 epoch={MAX_EPOCH} 0@1:x")
    with pytest.raises(EpochExhaustedError, match=f"epochs end at {MAX_EPOCH}"):
        cluster.run("tick 1 200")


def test_fetches_from_made_up_observer_ids_track_a_bounded_number() -> None:
    """Any node id may fetch (observers), so a flood of made-up ids must not grow the
    leader's bookkeeping without bound: at most MAX_OBSERVERS are tracked, idle ones are
    forgotten after Kafka's observer session timeout, voters are always tracked."""
    leader = LeaderState(1, frozenset({1, 2, 3}), 0, 0, 0)
    for replica in range(100, 100 + MAX_OBSERVERS + 50):
        leader.record_fetch(replica, 0, 10, 0)
    assert len(leader.replicas) == 2 + MAX_OBSERVERS
    leader.record_fetch(2, 5, 20, 5)
    assert leader.replicas[2].end_offset == 5
    later = 10 + OBSERVER_SESSION_TIMEOUT_MS
    leader.record_fetch(7, 0, later, 0)
    assert set(leader.replicas) == {2, 3, 7}
