"""What a leader tracks of its replicas: log end offsets, last fetch times, the high watermark.

The high watermark is the largest offset that a majority of voters (the leader counting its
own *flushed* log end) have reached, and it only moves once that offset covers the first
entry of the leader's own epoch (its LeaderChange record): an entry of an older epoch is
never committed by counting replicas alone (Raft §5.4.2). It never moves backwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Observers (any node id may fetch) are tracked only for DescribeQuorum: one idle this long is
# forgotten (Kafka's OBSERVER_SESSION_TIMEOUT_MS), and at most MAX_OBSERVERS are tracked at
# once, so fetches from made-up ids cannot grow the leader's memory without bound (their
# fetches are still answered; DescribeQuorum then lists only the first MAX_OBSERVERS).
OBSERVER_SESSION_TIMEOUT_MS = 300_000
MAX_OBSERVERS = 10_000


@dataclass(slots=True)
class ReplicaState:
    end_offset: int = 0  # the fetch offset it last sent: everything below is on its log
    last_fetch_ms: int = -1
    acknowledged_epoch: bool = False  # has fetched (or acknowledged BeginQuorumEpoch) this epoch
    last_caught_up_ms: int = -1  # it last fetched from the leader's log end (DescribeQuorum)


@dataclass(slots=True)
class LeaderState:
    node_id: int
    voters: frozenset[int]
    epoch_start_offset: int  # offset of this leader's first entry (its LeaderChange record)
    started_ms: int
    high_watermark: int
    replicas: dict[int, ReplicaState] = field(default_factory=dict)
    begin_epoch_sent_ms: int = -1
    observers: int = 0  # how many entries of `replicas` are observers
    observers_swept_ms: int = -1

    def __post_init__(self) -> None:
        for voter in self.voters:
            if voter != self.node_id:
                self.replicas[voter] = ReplicaState()

    def record_fetch(
        self, replica: int, fetch_offset: int, now_ms: int, leader_end_offset: int
    ) -> None:
        state = self._replica(replica, now_ms)
        if state is None:
            return  # an observer beyond MAX_OBSERVERS: answered, not tracked
        state.end_offset = fetch_offset
        state.last_fetch_ms = now_ms
        state.acknowledged_epoch = True
        if fetch_offset >= leader_end_offset:
            state.last_caught_up_ms = now_ms

    def record_alive(self, replica: int, now_ms: int) -> None:
        """A replica fetching a snapshot: alive (check-quorum counts it), no log end news."""
        state = self._replica(replica, now_ms)
        if state is None:
            return
        state.last_fetch_ms = now_ms
        state.acknowledged_epoch = True

    def _replica(self, replica: int, now_ms: int) -> ReplicaState | None:
        state = self.replicas.get(replica)
        if state is not None:
            return state
        if self.observers >= MAX_OBSERVERS:
            self._forget_idle_observers(now_ms)
            if self.observers >= MAX_OBSERVERS:
                return None
        self.observers += 1
        state = self.replicas[replica] = ReplicaState()
        return state

    def _forget_idle_observers(self, now_ms: int) -> None:
        """At most once a second (a flood of new ids must not make every fetch a sweep)."""
        if self.observers_swept_ms >= 0 and now_ms - self.observers_swept_ms < 1000:
            return
        self.observers_swept_ms = now_ms
        for replica, state in list(self.replicas.items()):
            idle = now_ms - state.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS
            if replica not in self.voters and idle:
                del self.replicas[replica]
                self.observers -= 1

    def acknowledge(self, replica: int) -> None:
        if replica in self.replicas:
            self.replicas[replica].acknowledged_epoch = True

    def update_high_watermark(self, own_flushed_end: int) -> bool:
        """Recomputes the high watermark; returns whether it moved."""
        ends = sorted(
            [own_flushed_end]
            + [s.end_offset for r, s in self.replicas.items() if r in self.voters],
            reverse=True,
        )
        majority_end = ends[len(self.voters) // 2]
        if majority_end > self.epoch_start_offset and majority_end > self.high_watermark:
            self.high_watermark = majority_end
            return True
        return False

    def quorum_alive(self, now_ms: int, timeout_ms: int) -> bool:
        """Whether a majority of voters (this leader included) fetched within `timeout_ms`;
        a new leader gets `timeout_ms` of grace from its election."""
        since = max(now_ms - timeout_ms, self.started_ms)
        heard = 1 + sum(
            1 for r, s in self.replicas.items() if r in self.voters and s.last_fetch_ms >= since
        )
        return heard > len(self.voters) // 2 or now_ms - self.started_ms < timeout_ms

    def unacknowledged_voters(self) -> list[int]:
        return sorted(
            r for r, s in self.replicas.items() if r in self.voters and not s.acknowledged_epoch
        )

    def successors_by_progress(self) -> tuple[int, ...]:
        """Other voters, most caught-up first: who should lead after a graceful resign."""
        voters = [(s.end_offset, -r, r) for r, s in self.replicas.items() if r in self.voters]
        return tuple(r for _, _, r in sorted(voters, reverse=True))
