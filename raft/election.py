"""Elections and leadership: pre-vote (KIP-996), vote, BeginQuorumEpoch, EndQuorumEpoch,
graceful resignation and check-quorum, as KIP-595 has them.

A voter that stops hearing from its leader first asks for a pre-vote, which moves nobody's
epoch; only a majority of grants lets it stand as candidate in the next epoch. A new leader
writes a LeaderChange control entry of its own epoch: the high watermark waits for it
(raft/leader_state.py), so entries of older epochs are committed only under it.
"""

from __future__ import annotations

from raft.leader_state import LeaderState
from raft.messages import (
    FENCED_LEADER_EPOCH,
    INCONSISTENT_VOTER_SET,
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    VoteRequest,
    VoteResponse,
)
from raft.node_state import NodeState, fenced
from raft.roles import Role


def leader_change_record(leader_id: int, voters: frozenset[int]) -> bytes:
    """The data of the control entry a new leader writes first: committing it proves the
    leader's epoch (the high watermark waits for it)."""
    return b"LeaderChange leader=%d voters=%s" % (
        leader_id,
        ",".join(map(str, sorted(voters))).encode(),
    )


class ElectionRules(NodeState):
    # --- elections -----------------------------------------------------------------------

    def _request_votes(self, pre_vote: bool) -> None:
        self.votes = {self.node_id}
        epoch = self.epoch + 1 if pre_vote else self.epoch
        for voter in sorted(self.voters - {self.node_id}):
            self._send(
                VoteRequest(
                    self.node_id,
                    voter,
                    epoch,
                    self.log.last_epoch(),
                    self.log.end_offset(),
                    pre_vote,
                )
            )
        self._count_votes(pre_vote)

    def _count_votes(self, pre_vote: bool) -> None:
        if not self._majority(len(self.votes)):
            return
        if pre_vote:
            self._become(Role.CANDIDATE, self.epoch + 1, "won the pre-vote")
        else:
            self._become(Role.LEADER, self.epoch, "won the election")

    def _log_up_to_date(self, request: VoteRequest) -> bool:
        ours = (self.log.last_epoch(), self.log.end_offset())
        return (request.last_epoch, request.end_offset) >= ours

    def _handle_vote_request(self, request: VoteRequest) -> None:
        granted = False
        if request.src not in self.voters or not self.is_voter:
            self._reply_vote(request, False, INCONSISTENT_VOTER_SET)
            return
        if request.pre_vote:
            # A follower vouches for its leader only after it has fetched from it, and only
            # for a fetch timeout since (Kafka's FollowerState.hasFetchedFromLeader).
            leader_alive = self.role is Role.LEADER or (
                self.role is Role.FOLLOWER
                and self.last_fetch_success_ms >= 0
                and self.now_ms - self.last_fetch_success_ms < self.config.fetch_timeout_ms
            )
            granted = (
                request.epoch > self.epoch and not leader_alive and self._log_up_to_date(request)
            )
        elif request.epoch < self.epoch:
            self._reply_vote(request, False, FENCED_LEADER_EPOCH)
            return
        elif self.leader_id == NO_LEADER and self.role in (Role.UNATTACHED, Role.PROSPECTIVE):
            granted = self.voted_for in (NO_LEADER, request.src) and self._log_up_to_date(request)
            if granted and self.voted_for != request.src:
                self.voted_for = request.src
                self._state_dirty = True
                self._become(Role.UNATTACHED, self.epoch, "voted")
        self._reply_vote(request, granted)

    def _reply_vote(self, request: VoteRequest, granted: bool, error: str = "NONE") -> None:
        self._send(
            VoteResponse(
                self.node_id,
                request.src,
                self.epoch,
                self.leader_id,
                granted,
                request.pre_vote,
                error,
                candidate_epoch=request.epoch,
            )
        )

    def _handle_vote_response(self, response: VoteResponse) -> None:
        if self._names_new_leader(response.leader_id, response.epoch):
            if self.role in (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE, Role.RESIGNED):
                self._become(
                    Role.FOLLOWER,
                    self.epoch,
                    "a voter named the leader",
                    leader_id=response.leader_id,
                )
                return
        expected = Role.PROSPECTIVE if response.pre_vote else Role.CANDIDATE
        round_epoch = self.epoch + 1 if response.pre_vote else self.epoch
        if self.role is not expected or response.candidate_epoch != round_epoch:
            return  # not an answer to the round we are in now
        if response.granted:
            self.votes.add(response.src)
            self._count_votes(response.pre_vote)
            return
        self.rejections.add(response.src)
        if not response.pre_vote and not self._majority(len(self.voters) - len(self.rejections)):
            # This election can no longer be won (Kafka's isVoteRejected): back off now
            # instead of waiting out the election timeout.
            self._become(Role.UNATTACHED, self.epoch, "lost the election", backoff=True)
            return
        if (
            response.pre_vote
            and self._majority(len(self.rejections))
            and response.leader_id == self.abandoned_leader != NO_LEADER
        ):
            # A majority refused because they still hear from the leader we gave up on: it
            # is alive after all (our fetches were lost), so follow it again (KIP-996).
            self._become(
                Role.FOLLOWER,
                self.epoch,
                "a majority still follows the leader",
                leader_id=self.abandoned_leader,
            )

    # --- leadership ----------------------------------------------------------------------

    def _start_leading(self) -> None:
        self.leader_id = self.node_id
        self._state_dirty = True
        start = self.log.end_offset()
        self.leader = LeaderState(
            self.node_id, self.voters, start, self.now_ms, self.high_watermark
        )
        self._append(
            [
                Entry(
                    start, self.epoch, leader_change_record(self.node_id, self.voters), control=True
                )
            ]
        )
        self._send_begin_quorum_epoch()

    def _send_begin_quorum_epoch(self) -> None:
        assert self.leader is not None
        for voter in self.leader.unacknowledged_voters():
            self._send(BeginQuorumEpochRequest(self.node_id, voter, self.epoch))
        self.leader.begin_epoch_sent_ms = self.now_ms

    def _check_quorum(self, now: int) -> bool:
        """The leader's timer: resigns when no majority fetched within the check-quorum
        timeout (returns False then); resends BeginQuorumEpoch to voters yet to answer."""
        assert self.leader is not None
        if not self.leader.quorum_alive(now, self.config.check_quorum_timeout_ms):
            # As Kafka: say so, with no preferred successor; whoever hears it stops waiting.
            for voter in sorted(self.voters - {self.node_id}):
                self._send(EndQuorumEpochRequest(self.node_id, voter, self.epoch, ()))
            self._become(Role.RESIGNED, self.epoch, "check-quorum: no majority heard from")
            return False
        if now - self.leader.begin_epoch_sent_ms >= self.config.request_timeout_ms:
            self._send_begin_quorum_epoch()
        return True

    def _handle_begin_quorum_epoch(self, request: BeginQuorumEpochRequest) -> None:
        if request.epoch == self.epoch and self.role is not Role.LEADER:
            if not (self.role is Role.FOLLOWER and self.leader_id == request.src):
                self._become(Role.FOLLOWER, self.epoch, "BeginQuorumEpoch", leader_id=request.src)
        self._send(
            BeginQuorumEpochResponse(
                self.node_id,
                request.src,
                self.epoch,
                self.leader_id,
                fenced(request.epoch, self.epoch),
            )
        )

    def _handle_begin_quorum_epoch_response(self, response: BeginQuorumEpochResponse) -> None:
        if self.leader is not None and response.epoch == self.epoch:
            self.leader.acknowledge(response.src)

    def _handle_end_quorum_epoch(self, request: EndQuorumEpochRequest) -> None:
        if (
            request.epoch == self.epoch
            and self.leader_id == request.src
            and self.role is Role.FOLLOWER
        ):
            successors = request.preferred_successors
            if self.node_id in successors:
                position = successors.index(self.node_id)
                # The most caught-up goes at once; the others back off exponentially.
                delay = (
                    0
                    if position == 0
                    else min(self.config.election_backoff_max_ms, 50 * 2 ** (position - 1))
                )
            else:
                delay = self.config.election_timeout_ms
            self._become(
                Role.UNATTACHED, self.epoch, "the leader resigned", election_delay_ms=delay
            )
        self._send(
            EndQuorumEpochResponse(
                self.node_id,
                request.src,
                self.epoch,
                self.leader_id,
                fenced(request.epoch, self.epoch),
            )
        )

    def _handle_end_quorum_epoch_response(self, response: EndQuorumEpochResponse) -> None:
        pass  # the resignation is best effort: nothing waits on the answers
