"""What one Raft node knows and the rules every part of the core shares.

`NodeState` holds a node's persisted election state, role, timers and log bookkeeping, and
the one place roles change (`_become`, checked against raft/roles.py). The protocol lives
in the mixins built on it: raft/election.py (pre-vote, vote, BeginQuorumEpoch,
EndQuorumEpoch, check-quorum) and raft/fetch_protocol.py (Fetch and FetchSnapshot, both
sides); raft/core.py puts them together behind the five entry points. No I/O here either.
"""

from __future__ import annotations

import random

from raft.config import RaftConfig
from raft.leader_state import LeaderState
from raft.limits import MAX_EPOCH, EpochExhaustedError
from raft.log import LogPrefix, RaftLog
from raft.messages import (
    FENCED_LEADER_EPOCH,
    NO_LEADER,
    BeginQuorumEpochRequest,
    ElectionState,
    EndQuorumEpochRequest,
    Entry,
    FetchRead,
    FetchRequest,
    LeaderAndEpoch,
    Message,
    SnapshotChunk,
    SnapshotId,
    SnapshotRead,
)
from raft.roles import Role, check_transition
from raft.snapshots import MemorySnapshotStore, SnapshotCatalog
from raft.unstable_log import UnstableLog

NEVER = 2**62


class NodeState:
    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        log: RaftLog,
        state: ElectionState,
        config: RaftConfig,
        rng: random.Random,
        now_ms: int,
        snapshots: SnapshotCatalog | None = None,
    ) -> None:
        self.node_id = node_id
        self.voters = voters
        self.is_voter = node_id in voters
        # Appends and truncations stay in memory until a Ready has them written and
        # fsynced, and what the core asks of the log (its start, end, epochs) is kept in
        # memory, read from `log` only now, as the node opens (raft/unstable_log.py). Of
        # the stable log the core keeps only the means to move its start (compact_log).
        self.log = UnstableLog.over(log)
        self._log_prefix: LogPrefix = log
        # Of the snapshot store the core holds only what it knows in memory; chunks it sends
        # are read by the driver (Ready.snapshot_reads).
        self.snapshots: SnapshotCatalog = (
            snapshots if snapshots is not None else MemorySnapshotStore()
        )
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
        # The entries of FetchResponses in the outbox, and the data of FetchSnapshotResponses,
        # for the driver to read (Ready.fetch_reads, Ready.snapshot_reads).
        self._fetch_reads: list[FetchRead] = []
        self._snapshot_reads: list[SnapshotRead] = []
        self._announced: LeaderAndEpoch | None = None
        # The durable log end (what the last fsync covered) and what is committed/applied.
        self.high_watermark = 0
        self.applied = 0
        # A snapshot the state machine must load before it applies entries (at start, and
        # after a follower installed one), and the one being downloaded: (id, bytes so far).
        self._snapshot_to_load: SnapshotId | None = None
        self.snapshot_fetch: tuple[SnapshotId, int] | None = None
        # Downloaded chunks for the next Ready to write; the download whose last chunk the
        # driver is storing (no fetch goes out until it says how that went); the snapshot
        # installed whose log reset is not written yet (older snapshots go once it is).
        self._snapshot_chunks: list[SnapshotChunk] = []
        self._storing: SnapshotId | None = None
        self._installed: SnapshotId | None = None
        self.snapshots_fetched = 0
        latest = self.snapshots.latest()
        if latest is not None:
            if (latest.epoch, latest.end_offset) > (self.log.last_epoch(), self.log.end_offset()):
                # The snapshot is ahead of the log (the log's reset after installing it, or
                # the entries it covers, did not reach the disk): the log restarts from it,
                # as Kafka's truncateToLatestSnapshot does (with the first Ready).
                self.log.reset_to_snapshot(latest)
                self._log_dirty = True
            # A snapshot holds only committed entries.
            self.high_watermark = latest.end_offset
            self._snapshot_to_load = latest
        self.flushed_end = self.log.end_offset()
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
        self.messages_refused = 0
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

    # --- hooks the protocol mixins provide ----------------------------------------------

    def _request_votes(self, pre_vote: bool) -> None:
        raise NotImplementedError  # raft/election.py

    def _start_leading(self) -> None:
        raise NotImplementedError  # raft/election.py

    def _send_fetch(self) -> None:
        raise NotImplementedError  # raft/fetch_protocol.py

    def _find_leader_as_observer(self) -> None:
        raise NotImplementedError  # raft/fetch_protocol.py

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
        if epoch > MAX_EPOCH:
            # Only 2^31 real elections get here (messages beyond it are refused on arrival):
            # stop loudly rather than persist an epoch that overflows int32.
            raise EpochExhaustedError(
                f"node {self.node_id} cannot enter epoch {epoch} ({why}): epochs end at {MAX_EPOCH}"
            )
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
        self.snapshot_fetch = None  # a download from the old leader is not resumed
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

    def _majority(self, count: int) -> bool:
        return count > len(self.voters) // 2

    def _names_new_leader(self, leader_id: int, epoch: int) -> bool:
        """Whether a peer's hint names a leader of our epoch that we may follow. For a voter,
        the leader it gave up on is no news (one peer still naming it proves nothing); for
        an observer, which never votes, any voter's word is good."""
        ignored = (NO_LEADER, self.node_id, self.abandoned_leader if self.is_voter else NO_LEADER)
        return epoch == self.epoch and leader_id not in ignored

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
        self._unread_past(offset)
        self.flushed_end = min(self.flushed_end, offset)
        self._log_dirty = True

    def _unread_past(self, offset: int) -> None:
        """Fetch answers not yet read may name entries at `offset` and above, which the
        log no longer holds (as it did when they were answered): they carry the entries
        below it only (an answer with fewer entries is always a valid one)."""
        self._fetch_reads = [
            read
            if read.end <= offset
            else FetchRead(read.index, read.offset, max(read.offset, offset), read.max_entries)
            for read in self._fetch_reads
        ]

    def _send(self, message: Message) -> None:
        self._outbox.append(message)

    def _send_with_snapshot_data(self, message: Message, read: SnapshotRead) -> None:
        """Sends a leader's FetchSnapshotResponse whose data the driver reads (`read`, its
        index set here) when it carries out the Ready."""
        self._snapshot_reads.append(
            SnapshotRead(len(self._outbox), read.snapshot_id, read.position, read.max_bytes)
        )
        self._outbox.append(message)

    def _send_with_entries(self, message: Message, offset: int, max_entries: int) -> None:
        """Sends a leader's FetchResponse whose entries, from `offset` on, the driver reads
        when it carries out the Ready (raft/ready_reads.py): step() reads no entry."""
        end = self.log.end_offset()
        if offset < end:
            self._fetch_reads.append(FetchRead(len(self._outbox), offset, end, max_entries))
        self._outbox.append(message)


def fenced(request_epoch: int, epoch: int) -> str:
    """The error of a request from an older epoch."""
    return FENCED_LEADER_EPOCH if request_epoch < epoch else "NONE"
