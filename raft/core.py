"""The KRaft-style Raft core: a state machine with no I/O at all.

It owns one node's view of the quorum and is driven through five calls, as etcd-io/raft's
RawNode is:
    tick(now_ms)       time passes (timers fire: elections, fetch timeouts, check-quorum)
    step(message)      a message from a peer arrives
    propose(records)   the state machine asks the leader to append
    ready()            what to persist, send and apply now (see messages.Ready)
    advance(ready)     the driver did all of that
plus snapshot_stored(), the driver's answer to a downloaded snapshot's last chunk.
It never reads a clock, draws randomness of its own, touches a socket or a file: time comes
in through tick(), randomness through the injected `random.Random`. The log is looked at
once, when the node opens: from then on what the core asks of it (start, end, the epoch of
an offset, where an epoch ends) comes from memory (raft/unstable_log.py), what it appends
or truncates stays in memory until a Ready hands it to the driver to write and fsync, and
the entries and snapshot chunks it sends and the entries it commits leave as descriptors
the driver reads when it carries out the Ready (Ready.fetch_reads, Ready.snapshot_reads,
Ready.committed; raft/ready_reads.py). It keeps of the stable log only `LogPrefix`, to move
its start, and of the snapshot store a `SnapshotCatalog` (which exist, their sizes, and
dropping old ones): compact_log() and advance(), the driver's calls between Readies.

The protocol is KIP-595's, pull-based: followers and observers fetch from the leader,
which answers with entries, its high watermark, or the point where their logs diverge;
elections go through a pre-vote round first (KIP-996), so a node that was cut off cannot
disturb a healthy leader by bumping the epoch. Roles and their transitions: raft/roles.py;
the state they share: raft/node_state.py; elections: raft/election.py; fetching:
raft/fetch_protocol.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from raft import admission
from raft.election import ElectionRules, leader_change_record
from raft.fetch_protocol import FetchProtocol
from raft.messages import (
    INCONSISTENT_VOTER_SET,
    NO_ENTRIES,
    NOT_LEADER_OR_FOLLOWER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    ElectionState,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    EntryRange,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderAndEpoch,
    Message,
    RaftStats,
    Ready,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from raft.node_state import NEVER, NodeState
from raft.roles import Role

__all__ = ["NEVER", "NodeState", "NotLeaderError", "RaftCore", "leader_change_record"]


class NotLeaderError(RuntimeError):
    """A proposal reached a node that is not the leader (Kafka: NOT_LEADER_OR_FOLLOWER)."""

    error_name = NOT_LEADER_OR_FOLLOWER

    def __init__(self, leader: LeaderAndEpoch) -> None:
        super().__init__(
            f"not the leader; the leader is {leader.leader_id} in epoch {leader.epoch}"
        )
        self.leader = leader


class RaftCore(ElectionRules, FetchProtocol):
    # --- the five entry points ------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        self.now_ms = max(self.now_ms, now_ms)
        now = self.now_ms
        if self.role is Role.LEADER:
            if self._check_quorum(now):
                self._expire_parked_fetches(now)
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

    def step(self, message: Message) -> str | None:
        """Acts on a message from a peer. Returns None, or why the message was refused
        (raft/admission.py: a sender that is not a voter, an epoch out of range): a refused
        message changes nothing; a refused request from a non-voter is answered
        INCONSISTENT_VOTER_SET, as Kafka answers it."""
        if message.dst != self.node_id:
            raise ValueError(f"message for node {message.dst} stepped into node {self.node_id}")
        refusal = admission.refusal(message, self.node_id, self.voters)
        if refusal is not None:
            self.messages_refused += 1
            if refusal.answer:
                self._answer_non_voter(message)
            return refusal.reason
        handler = self._handlers[type(message)]
        if isinstance(message, VoteRequest) and message.pre_vote:
            # A pre-vote does not move the receiver to the epoch it asks for (KIP-996). But
            # asking for e+1 proves the sender already stands in e, which it reached only by
            # winning a pre-vote majority: a node there whose VoteRequests were lost would
            # otherwise stay there for good, unheard. So the receiver catches up to e.
            if message.epoch - 1 > self.epoch:
                self._become(Role.UNATTACHED, message.epoch - 1, "a pre-vote from a later epoch")
            handler(self, message)
            return None
        if message.epoch > self.epoch and message.src in self.voters:
            # Only a voter moves our epoch; an observer's fetch from a later epoch is
            # answered UNKNOWN_LEADER_EPOCH by the fetch handlers (raft/admission.py).
            self._on_higher_epoch(message)
        handler(self, message)
        return None

    def _answer_non_voter(self, request: Message) -> None:
        """Kafka's answer to a voters-only request from a node outside the voter set."""
        if isinstance(request, VoteRequest):
            self._reply_vote(request, False, INCONSISTENT_VOTER_SET)
        elif isinstance(request, BeginQuorumEpochRequest):
            self._send(
                BeginQuorumEpochResponse(
                    self.node_id, request.src, self.epoch, self.leader_id, INCONSISTENT_VOTER_SET
                )
            )
        elif isinstance(request, EndQuorumEpochRequest):
            self._send(
                EndQuorumEpochResponse(
                    self.node_id, request.src, self.epoch, self.leader_id, INCONSISTENT_VOTER_SET
                )
            )

    def propose(self, records: Sequence[bytes]) -> int:
        """Appends `records` as the leader; returns the offset of the last one. It is
        committed once the high watermark passes it."""
        if self.role is not Role.LEADER or self.leader is None:
            raise NotLeaderError(LeaderAndEpoch(self.leader_id, self.epoch))
        start = self.log.end_offset()
        last = len(records) - 1
        self._append(
            [Entry(start + i, self.epoch, r, more=i < last) for i, r in enumerate(records)]
        )
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
        load = self._snapshot_to_load
        if load is not None:
            self._snapshot_to_load = None
            self.applied = load.end_offset
        committed = NO_ENTRIES
        if self.high_watermark > self.applied:
            # Read by the driver (raft/ready_reads.py), as are the entries of fetch answers.
            committed = EntryRange(self.applied, self.high_watermark)
            self.applied = self.high_watermark
        change = None
        current = LeaderAndEpoch(self.leader_id, self.epoch)
        if current != self._announced:
            change = self._announced = current
        writes = self.log.writes()
        ready = Ready(
            election_state=state,
            sync_log=self._log_dirty or bool(writes),
            log_end_offset=self.log.end_offset(),
            messages=tuple(self._outbox),
            committed=committed,
            leader_change=change,
            high_watermark=self.high_watermark,
            load_snapshot=load,
            log_writes=writes,
            snapshot_chunks=tuple(self._snapshot_chunks),
            fetch_reads=tuple(self._fetch_reads),
            snapshot_reads=tuple(self._snapshot_reads),
        )
        self._outbox.clear()
        self._fetch_reads.clear()
        self._snapshot_reads.clear()
        self._snapshot_chunks.clear()
        self._state_dirty = self._log_dirty = False
        return ready

    def has_ready(self) -> bool:
        return bool(
            self._state_dirty
            or self._log_dirty
            or self._outbox
            or self._snapshot_chunks
            or self.high_watermark > self.applied
            or self._snapshot_to_load is not None
            or LeaderAndEpoch(self.leader_id, self.epoch) != self._announced
        )

    def advance(self, ready: Ready) -> None:
        """The driver persisted and sent what `ready` asked for."""
        self.log.stable_to(ready.log_writes)
        installed = self._installed
        if installed is not None and ready.log_writes.reset == installed:
            # The log restarts at the installed snapshot on disk now: the older ones can
            # serve nobody (the driver's call, so no file is touched inside step()).
            self._installed = None
            self.snapshots.delete_before(installed)
        if self.log.has_writes():
            self._log_dirty = True  # the log changed while `ready` was carried out
        if ready.sync_log:
            self.flushed_end = min(ready.log_end_offset, self.log.end_offset())
        self.flushed_end = min(self.flushed_end, self.log.end_offset())
        if self.role is Role.LEADER:
            self._update_leader_high_watermark()

    # --- snapshots (KIP-630) ----------------------------------------------------------------

    def snapshot_stored(self, snapshot_id: SnapshotId, complete: bool) -> None:
        """The driver wrote the last chunk of a download (Ready.snapshot_chunks) and froze
        it; `complete` False: the bytes did not form a valid snapshot and were dropped. A
        complete one is installed (the log restarts at it with the next Ready); then the
        follower fetches on."""
        self._snapshot_stored(snapshot_id, complete)

    def snapshot_id_for(self, end_offset: int) -> SnapshotId:
        """The id of a snapshot the state machine takes after applying every entry below
        `end_offset` (Kafka's createSnapshot checks the same): it must have applied them."""
        start = self.log.start()
        if not start.end_offset <= end_offset <= self.applied or end_offset == 0:
            raise ValueError(
                f"cannot snapshot at offset {end_offset}: the state machine has applied up to "
                f"{self.applied} and the log starts at {start.end_offset}"
            )
        if end_offset == start.end_offset:
            return start
        return SnapshotId(end_offset, self.log.epoch_at(end_offset - 1))

    def compact_log(self, snapshot_id: SnapshotId) -> None:
        """Log-prefix cleanup: the log starts at `snapshot_id` (a snapshot in the store),
        its entries below go, and so do older snapshots. Fetchers that need them get the
        snapshot instead."""
        if self.snapshots.size(snapshot_id) is None:
            raise ValueError(f"no snapshot {snapshot_id} to start the log at")
        if snapshot_id.end_offset > self.applied:
            raise ValueError(f"snapshot {snapshot_id} is beyond what was applied ({self.applied})")
        if snapshot_id.end_offset <= self.log.start().end_offset:
            return
        self.log.delete_before(snapshot_id)
        self._log_prefix.delete_before(snapshot_id)
        self.snapshots.delete_before(snapshot_id)

    def next_wakeup_ms(self) -> int:
        """When tick() next has something to do."""
        if self.role is Role.LEADER:
            deadlines = [self.now_ms + self.config.request_timeout_ms // 4]
            deadlines += [deadline for _, deadline in self.parked.values()]
            return min(deadlines)
        if self.role is Role.FOLLOWER:
            return min(self.fetch_deadline, self.request_deadline)
        return self.election_deadline

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
            self.log.start().end_offset,
            latest.end_offset if (latest := self.snapshots.latest()) is not None else 0,
            self.snapshots_fetched,
            self.messages_refused,
        )

    _handlers: dict[type, Callable[[Any, Any], None]] = {
        VoteRequest: ElectionRules._handle_vote_request,
        VoteResponse: ElectionRules._handle_vote_response,
        BeginQuorumEpochRequest: ElectionRules._handle_begin_quorum_epoch,
        BeginQuorumEpochResponse: ElectionRules._handle_begin_quorum_epoch_response,
        EndQuorumEpochRequest: ElectionRules._handle_end_quorum_epoch,
        EndQuorumEpochResponse: ElectionRules._handle_end_quorum_epoch_response,
        FetchRequest: FetchProtocol._handle_fetch_request,
        FetchResponse: FetchProtocol._handle_fetch_response,
        FetchSnapshotRequest: FetchProtocol._handle_fetch_snapshot_request,
        FetchSnapshotResponse: FetchProtocol._handle_fetch_snapshot_response,
    }
