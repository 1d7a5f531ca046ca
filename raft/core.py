"""The KRaft-style Raft core: a state machine with no I/O at all.

It owns one node's view of the quorum and is driven through five calls, as etcd-io/raft's
RawNode is:
    tick(now_ms)       time passes (timers fire: elections, fetch timeouts, check-quorum)
    step(message)      a message from a peer arrives
    propose(records)   the state machine asks the leader to append
    ready()            what to persist, send and apply now (see messages.Ready)
    advance(ready)     the driver did all of that
It never reads a clock, draws randomness of its own, touches a socket or a file: time comes
in through tick(), randomness through the injected `random.Random`, and the log through the
RaftLog protocol, whose writes only become durable when the driver fsyncs for a Ready.

The protocol is KIP-595's, pull-based: followers and observers fetch from the leader,
which answers with entries, its high watermark, or the point where their logs diverge;
elections go through a pre-vote round first (KIP-996), so a node that was cut off cannot
disturb a healthy leader by bumping the epoch. Roles and their transitions: raft/roles.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from raft.config import RaftConfig
from raft.leader_state import LeaderState
from raft.log import RaftLog
from raft.messages import (
    FENCED_LEADER_EPOCH,
    INCONSISTENT_VOTER_SET,
    NO_LEADER,
    NOT_LEADER_OR_FOLLOWER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DivergingEpoch,
    ElectionState,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    FetchRequest,
    FetchResponse,
    LeaderAndEpoch,
    Message,
    RaftStats,
    Ready,
    VoteRequest,
    VoteResponse,
)
from raft.roles import Role, check_transition

NEVER = 2**62


class NotLeaderError(RuntimeError):
    """A proposal reached a node that is not the leader (Kafka: NOT_LEADER_OR_FOLLOWER)."""

    error_name = NOT_LEADER_OR_FOLLOWER

    def __init__(self, leader: LeaderAndEpoch) -> None:
        super().__init__(
            f"not the leader; the leader is {leader.leader_id} in epoch {leader.epoch}"
        )
        self.leader = leader


def leader_change_record(leader_id: int, voters: frozenset[int]) -> bytes:
    """The data of the control entry a new leader writes first: committing it proves the
    leader's epoch (the high watermark waits for it)."""
    return b"LeaderChange leader=%d voters=%s" % (
        leader_id,
        ",".join(map(str, sorted(voters))).encode(),
    )


class RaftCore:
    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        log: RaftLog,
        state: ElectionState,
        config: RaftConfig,
        rng: random.Random,
        now_ms: int,
    ) -> None:
        self.node_id = node_id
        self.voters = voters
        self.is_voter = node_id in voters
        self.log = log
        self.config = config
        self.rng = rng
        self.now_ms = now_ms
        # Persisted election state, and what ready() still has to hand out.
        self.epoch = state.epoch
        self.voted_for = state.voted_for
        self.leader_id = state.leader_id
        self._state_dirty = False
        self._log_dirty = False
        self._outbox: list[Message] = []
        self._announced: LeaderAndEpoch | None = None
        # The durable log end (what the last fsync covered) and what is committed/applied.
        self.flushed_end = log.end_offset()
        self.high_watermark = 0
        self.applied = 0
        # Role and timers.
        self.role = Role.UNATTACHED
        self.election_deadline = NEVER
        self.fetch_deadline = NEVER  # follower: no successful fetch by then means trouble
        self.request_deadline = NEVER  # follower: resend the fetch in flight
        self.fetch_in_flight = False
        self.last_fetch_success_ms = -1
        self.votes: set[int] = set()
        self.rejections: set[int] = set()
        # The leader of this epoch that we gave up on (fetch timeout, or it resigned): a peer
        # still naming it is no news, and following it again would keep a quorum of
        # followers circling a dead leader instead of electing a new one.
        self.abandoned_leader = NO_LEADER
        self.leader: LeaderState | None = None
        # Counters for stats(); the election clock starts when a pre-vote round begins.
        self.elections_started = self.elections_won = 0
        self.election_started_ms = -1
        self.last_election_ms = -1
        self.fetches_served = self.entries_proposed = self.entries_replicated = 0
        self.parked: dict[int, tuple[FetchRequest, int]] = {}  # leader: long-polled fetches
        if self.leader_id != NO_LEADER and self.leader_id != node_id:
            self._become(
                Role.FOLLOWER,
                self.epoch,
                "restarted following a known leader",
                leader_id=self.leader_id,
            )
        else:
            self.leader_id = NO_LEADER
            self._reset_election_timer()

    # --- the five entry points ------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        self.now_ms = max(self.now_ms, now_ms)
        now = self.now_ms
        if self.role is Role.LEADER:
            self._tick_leader(now)
        elif self.role is Role.FOLLOWER:
            if now >= self.fetch_deadline:
                if self.is_voter:
                    self._become(Role.PROSPECTIVE, self.epoch, "fetch timeout")
                else:
                    self._become(Role.UNATTACHED, self.epoch, "fetch timeout")
            elif self.fetch_in_flight and now >= self.request_deadline:
                self._send_fetch()
        elif now >= self.election_deadline:
            if self.is_voter:
                if self.role is Role.CANDIDATE:
                    self._become(Role.UNATTACHED, self.epoch, "election timeout", backoff=True)
                else:
                    self._become(Role.PROSPECTIVE, self.epoch, "election timeout")
            else:
                self._find_leader_as_observer()

    def step(self, message: Message) -> None:
        if message.dst != self.node_id:
            raise ValueError(f"message for node {message.dst} stepped into node {self.node_id}")
        handler = self._handlers[type(message)]
        if isinstance(message, VoteRequest) and message.pre_vote:
            # A pre-vote does not move the receiver to the epoch it asks for (KIP-996). But
            # asking for e+1 proves the sender already stands in e, which it reached only by
            # winning a pre-vote majority: a node there whose VoteRequests were lost would
            # otherwise stay there for good, unheard. So the receiver catches up to e.
            if message.epoch - 1 > self.epoch:
                self._become(Role.UNATTACHED, message.epoch - 1, "a pre-vote from a later epoch")
            handler(self, message)
            return
        if message.epoch > self.epoch:
            self._on_higher_epoch(message)
        handler(self, message)

    def propose(self, records: Sequence[bytes]) -> int:
        """Appends `records` as the leader; returns the offset of the last one. It is
        committed once the high watermark passes it."""
        if self.role is not Role.LEADER or self.leader is None:
            raise NotLeaderError(LeaderAndEpoch(self.leader_id, self.epoch))
        start = self.log.end_offset()
        self._append([Entry(start + i, self.epoch, r) for i, r in enumerate(records)])
        self.entries_proposed += len(records)
        self._answer_parked_fetches()
        return self.log.end_offset() - 1

    def resign(self) -> None:
        """Graceful resignation (shutdown): the leader hands over to the most caught-up voter,
        which starts its election at once instead of after a timeout."""
        if self.role is not Role.LEADER or self.leader is None:
            return
        successors = self.leader.successors_by_progress()
        for voter in successors:
            self._send(EndQuorumEpochRequest(self.node_id, voter, self.epoch, successors))
        self._become(Role.RESIGNED, self.epoch, "graceful resignation")

    def ready(self) -> Ready:
        state = None
        if self._state_dirty:
            state = ElectionState(self.epoch, self.voted_for, self.leader_id)
        committed: tuple[Entry, ...] = ()
        if self.high_watermark > self.applied:
            committed = tuple(self.log.read(self.applied, self.high_watermark - self.applied))
            self.applied += len(committed)
        change = None
        current = LeaderAndEpoch(self.leader_id, self.epoch)
        if current != self._announced:
            change = self._announced = current
        ready = Ready(
            election_state=state,
            sync_log=self._log_dirty,
            log_end_offset=self.log.end_offset(),
            messages=tuple(self._outbox),
            committed=committed,
            leader_change=change,
            high_watermark=self.high_watermark,
        )
        self._outbox.clear()
        self._state_dirty = self._log_dirty = False
        return ready

    def has_ready(self) -> bool:
        return bool(
            self._state_dirty
            or self._log_dirty
            or self._outbox
            or self.high_watermark > self.applied
            or LeaderAndEpoch(self.leader_id, self.epoch) != self._announced
        )

    def advance(self, ready: Ready) -> None:
        """The driver persisted and sent what `ready` asked for."""
        if ready.sync_log:
            self.flushed_end = min(ready.log_end_offset, self.log.end_offset())
        self.flushed_end = min(self.flushed_end, self.log.end_offset())
        if self.role is Role.LEADER:
            self._update_leader_high_watermark()

    def next_wakeup_ms(self) -> int:
        """When tick() next has something to do."""
        if self.role is Role.LEADER:
            deadlines = [self.now_ms + self.config.request_timeout_ms // 4]
            deadlines += [deadline for _, deadline in self.parked.values()]
            return min(deadlines)
        if self.role is Role.FOLLOWER:
            return min(self.fetch_deadline, self.request_deadline)
        return self.election_deadline

    # --- epochs and transitions ----------------------------------------------------------

    def _on_higher_epoch(self, message: Message) -> None:
        leader = getattr(message, "leader_id", NO_LEADER)
        if isinstance(message, (BeginQuorumEpochRequest, EndQuorumEpochRequest)):
            leader = message.src if isinstance(message, BeginQuorumEpochRequest) else NO_LEADER
        if isinstance(message, FetchRequest):
            leader = NO_LEADER  # we were not told who leads; the fetcher thinks we do
        if leader not in (NO_LEADER, self.node_id):
            self._become(Role.FOLLOWER, message.epoch, "leader of a higher epoch", leader_id=leader)
        else:
            self._become(Role.UNATTACHED, message.epoch, "higher epoch")

    def _become(
        self,
        role: Role,
        epoch: int,
        why: str,
        *,
        leader_id: int = NO_LEADER,
        backoff: bool = False,
        election_delay_ms: int | None = None,
    ) -> None:
        check_transition(self.node_id, self.is_voter, self.role, role, why)
        if epoch < self.epoch:
            raise AssertionError(f"node {self.node_id}: epoch {self.epoch} -> {epoch} ({why})")
        if epoch > self.epoch:
            self.voted_for = NO_LEADER
            self.abandoned_leader = NO_LEADER
        elif self.role is Role.FOLLOWER and role is not Role.FOLLOWER:
            self.abandoned_leader = self.leader_id
        if (epoch, leader_id) != (self.epoch, self.leader_id) or role is Role.CANDIDATE:
            self._state_dirty = True
        self.epoch = epoch
        self.leader_id = leader_id
        self.role = role
        self.leader = None
        self.parked.clear()
        self.votes = set()
        self.rejections = set()
        self.fetch_in_flight = False
        self.fetch_deadline = self.request_deadline = self.election_deadline = NEVER
        if role is Role.UNATTACHED:
            if election_delay_ms is not None:
                self.election_deadline = self.now_ms + election_delay_ms
            elif backoff:
                self.election_deadline = self.now_ms + self.rng.randrange(
                    self.config.election_backoff_max_ms + 1
                )
            else:
                self._reset_election_timer()
            if not self.is_voter:
                self._find_leader_as_observer()
        elif role is Role.PROSPECTIVE:
            if self.election_started_ms < 0:
                self.election_started_ms = self.now_ms
            self._reset_election_timer()
            self._request_votes(pre_vote=True)
        elif role is Role.CANDIDATE:
            self.elections_started += 1
            self.voted_for = self.node_id
            self._reset_election_timer()
            self._request_votes(pre_vote=False)
        elif role is Role.LEADER:
            self.elections_won += 1
            if self.election_started_ms >= 0:
                self.last_election_ms = self.now_ms - self.election_started_ms
            self.election_started_ms = -1  # a leader is known: the next election starts afresh
            self._start_leading()
        elif role is Role.FOLLOWER:
            self.election_started_ms = -1
            self.last_fetch_success_ms = -1  # not yet: see the pre-vote rule
            self.fetch_deadline = self._fetch_deadline()
            self._send_fetch()
        elif role is Role.RESIGNED:
            self._reset_election_timer()

    def _fetch_deadline(self) -> int:
        """When a follower gives up on a silent leader: the fetch timeout plus up to a tenth
        more at random, so the followers of a dead leader do not all stand at the same
        instant and split the vote (the same broadcast set all their deadlines)."""
        timeout = self.config.fetch_timeout_ms
        return self.now_ms + timeout + self.rng.randrange(timeout // 10 + 1)

    def _reset_election_timer(self) -> None:
        timeout = self.config.election_timeout_ms
        self.election_deadline = self.now_ms + timeout + self.rng.randrange(timeout)

    # --- elections -----------------------------------------------------------------------

    def _majority(self, count: int) -> bool:
        return count > len(self.voters) // 2

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

    def _names_new_leader(self, leader_id: int, epoch: int) -> bool:
        """Whether a peer's hint names a leader of our epoch that we may follow. For a voter,
        the leader it gave up on is no news (one peer still naming it proves nothing); for
        an observer, which never votes, any voter's word is good."""
        ignored = (NO_LEADER, self.node_id, self.abandoned_leader if self.is_voter else NO_LEADER)
        return epoch == self.epoch and leader_id not in ignored

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

    def _tick_leader(self, now: int) -> None:
        assert self.leader is not None
        if not self.leader.quorum_alive(now, self.config.check_quorum_timeout_ms):
            # As Kafka: say so, with no preferred successor; whoever hears it stops waiting.
            for voter in sorted(self.voters - {self.node_id}):
                self._send(EndQuorumEpochRequest(self.node_id, voter, self.epoch, ()))
            self._become(Role.RESIGNED, self.epoch, "check-quorum: no majority heard from")
            return
        if now - self.leader.begin_epoch_sent_ms >= self.config.request_timeout_ms:
            self._send_begin_quorum_epoch()
        for replica, (request, deadline) in list(self.parked.items()):
            if now >= deadline:
                del self.parked[replica]
                self._answer_fetch(request)

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
                _fenced(request.epoch, self.epoch),
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
                _fenced(request.epoch, self.epoch),
            )
        )

    def _handle_end_quorum_epoch_response(self, response: EndQuorumEpochResponse) -> None:
        pass  # the resignation is best effort: nothing waits on the answers

    # --- the fetch protocol: leader side -------------------------------------------------

    def _handle_fetch_request(self, request: FetchRequest) -> None:
        if request.epoch < self.epoch:
            self._reply_fetch_error(request, FENCED_LEADER_EPOCH)
            return
        if self.role is not Role.LEADER or self.leader is None:
            self._reply_fetch_error(request, NOT_LEADER_OR_FOLLOWER)
            return
        diverging = self._diverging(request)
        if diverging is not None:
            self._send(self._fetch_response(request, (), diverging))
            return
        self.parked.pop(request.src, None)
        self.leader.record_fetch(request.src, request.fetch_offset, self.now_ms)
        moved = self._update_leader_high_watermark()  # answers the parked fetches if it moved
        if not moved and request.fetch_offset >= self.log.end_offset():
            # Long poll: nothing new for it; hold the fetch until there is data or a new high
            # watermark, or the wait runs out.
            self.parked[request.src] = (request, self.now_ms + self.config.long_poll_ms)
            return
        self._answer_fetch(request)

    def _diverging(self, request: FetchRequest) -> DivergingEpoch | None:
        if request.fetch_offset == 0 and request.last_fetched_epoch == 0:
            return None
        epoch, end = self.log.end_offset_for_epoch(request.last_fetched_epoch)
        if epoch != request.last_fetched_epoch or end < request.fetch_offset:
            return DivergingEpoch(epoch, end)
        return None

    def stats(self) -> RaftStats:
        return RaftStats(
            self.node_id,
            self.role.value,
            self.leader_id,
            self.epoch,
            self.voted_for,
            self.high_watermark,
            self.log.end_offset(),
            self.elections_started,
            self.elections_won,
            self.last_election_ms,
            self.fetches_served,
            self.entries_proposed,
            self.entries_replicated,
        )

    def _answer_fetch(self, request: FetchRequest) -> None:
        self.fetches_served += 1
        count = min(request.max_entries, self.config.fetch_max_entries)
        self._send(self._fetch_response(request, tuple(self.log.read(request.fetch_offset, count))))

    def _fetch_response(
        self,
        request: FetchRequest,
        entries: tuple[Entry, ...],
        diverging: DivergingEpoch | None = None,
    ) -> FetchResponse:
        assert self.leader is not None
        return FetchResponse(
            self.node_id,
            request.src,
            self.epoch,
            self.node_id,
            self.leader.high_watermark,
            entries,
            diverging,
            fetch_offset=request.fetch_offset,
            last_fetched_epoch=request.last_fetched_epoch,
        )

    def _update_leader_high_watermark(self) -> bool:
        """Recomputes the leader's high watermark; when it moves, the parked fetches are
        answered so followers learn it at once. Returns whether it moved."""
        assert self.leader is not None
        if not self.leader.update_high_watermark(self.flushed_end):
            return False
        self.high_watermark = self.leader.high_watermark
        self._answer_parked_fetches()
        return True

    def _answer_parked_fetches(self) -> None:
        for replica in list(self.parked):
            request, _ = self.parked.pop(replica)
            self._answer_fetch(request)

    def _reply_fetch_error(self, request: FetchRequest, error: str) -> None:
        self._send(
            FetchResponse(
                self.node_id,
                request.src,
                self.epoch,
                self.leader_id,
                self.high_watermark,
                error=error,
            )
        )

    # --- the fetch protocol: follower side -----------------------------------------------

    def _send_fetch(self) -> None:
        self.fetch_in_flight = True
        self.request_deadline = self.now_ms + self.config.request_timeout_ms
        self._send(
            FetchRequest(
                self.node_id,
                self.leader_id,
                self.epoch,
                self.log.end_offset(),
                self.log.last_epoch(),
                self.config.fetch_max_entries,
            )
        )

    def _find_leader_as_observer(self) -> None:
        """An observer with no leader asks a random voter; the error names the leader."""
        voter = self.rng.choice(sorted(self.voters))
        self._send(
            FetchRequest(
                self.node_id,
                voter,
                self.epoch,
                self.log.end_offset(),
                self.log.last_epoch(),
                self.config.fetch_max_entries,
            )
        )
        self.election_deadline = self.now_ms + self.config.request_timeout_ms

    def _handle_fetch_response(self, response: FetchResponse) -> None:
        if response.error != "NONE" or response.epoch < self.epoch:
            if self.role is Role.UNATTACHED and self._names_new_leader(
                response.leader_id, response.epoch
            ):
                self._become(
                    Role.FOLLOWER,
                    self.epoch,
                    "a fetch named the leader",
                    leader_id=response.leader_id,
                )
            return
        if self.role is not Role.FOLLOWER or response.src != self.leader_id:
            if (
                self.role is Role.UNATTACHED
                and response.leader_id == response.src
                and self._names_new_leader(response.src, response.epoch)
            ):
                self._become(
                    Role.FOLLOWER, self.epoch, "fetched from the leader", leader_id=response.src
                )
            return
        if (response.fetch_offset, response.last_fetched_epoch) != (
            self.log.end_offset(),
            self.log.last_epoch(),
        ):
            return  # the answer to an older request (late or duplicated): ignore it
        self.fetch_in_flight = False
        self.last_fetch_success_ms = self.now_ms
        self.fetch_deadline = self._fetch_deadline()
        if response.diverging is not None:
            _, own_end = self.log.end_offset_for_epoch(response.diverging.epoch)
            self._truncate(min(response.diverging.end_offset, own_end))
        else:
            fresh = [e for e in response.entries if e.offset >= self.log.end_offset()]
            if fresh and fresh[0].offset == self.log.end_offset():
                self._append(fresh)
                self.entries_replicated += len(fresh)
            hw = min(response.high_watermark, self.log.end_offset())
            if hw > self.high_watermark:
                self.high_watermark = hw
        self._send_fetch()

    # --- log ------------------------------------------------------------------------------

    def _append(self, entries: list[Entry]) -> None:
        self.log.append(entries)
        self._log_dirty = True

    def _truncate(self, offset: int) -> None:
        if offset < self.high_watermark:
            raise AssertionError(
                f"node {self.node_id} asked to truncate to {offset}, below its high watermark "
                f"{self.high_watermark}: committed entries would be lost"
            )
        self.log.truncate_to(offset)
        self.flushed_end = min(self.flushed_end, offset)
        self._log_dirty = True

    def _send(self, message: Message) -> None:
        self._outbox.append(message)

    _handlers: dict[type, Callable[[Any, Any], None]] = {
        VoteRequest: _handle_vote_request,
        VoteResponse: _handle_vote_response,
        BeginQuorumEpochRequest: _handle_begin_quorum_epoch,
        BeginQuorumEpochResponse: _handle_begin_quorum_epoch_response,
        EndQuorumEpochRequest: _handle_end_quorum_epoch,
        EndQuorumEpochResponse: _handle_end_quorum_epoch_response,
        FetchRequest: _handle_fetch_request,
        FetchResponse: _handle_fetch_response,
    }


def _fenced(request_epoch: int, epoch: int) -> str:
    return FENCED_LEADER_EPOCH if request_epoch < epoch else "NONE"
