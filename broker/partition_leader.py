"""What a partition leader knows of its followers: their log ends, when each was last caught
up, the ISR it may propose to change, and the high watermark (docs/architecture.md §6, after Kafka's
Partition and Replica). Sans-I/O: time comes in as arguments, nothing here touches a log,
a socket or a clock, so the replicated-partition simulator can drive it.

- A follower's fetch at offset o tells the leader o is its log end. It counts as caught up
  at that fetch if o reached the leader's log end then, or at its previous fetch if o
  reached what the leader's log end was at that previous fetch (Kafka's rule, so a follower
  fetching steadily behind a busy leader is not dropped for never touching the moving end).
- ISR shrink: a member not at the leader's log end and not caught up within
  `replica.lag.time.max.ms` (Kafka's isCaughtUp). ISR expand: a
  follower whose log end reached the high watermark and the start of the leader's epoch,
  and that the controller would accept (unfenced, not shutting down). Both are proposals
  to the controller (AlterPartition); until it answers, the ISR used for the high
  watermark is the larger of the two ("maximal ISR", as Kafka's pending states), so an
  expansion in flight cannot let the high watermark run ahead of the new member, nor a
  shrink in flight let it pass a member being removed.
- The high watermark is the smallest log end over the maximal ISR (the leader's own
  included); it never moves back, and while the ISR is smaller than `min.insync.replicas`
  it does not move at all (an acks=all produce is then refused with NOT_ENOUGH_REPLICAS).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass(slots=True)
class FollowerState:
    # -1 until its first fetch (Kafka's UnknownOffset): a replica that never fetched is not
    # caught up, however empty the log, and cannot join the ISR.
    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_at_last_fetch: int = 0


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An ISR the leader asks the controller for (AlterPartition), and why."""

    isr: tuple[int, ...]
    added: tuple[int, ...]
    removed: tuple[int, ...]


@dataclass
class PartitionLeader:
    leader_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]  # as the controller last committed it
    leader_epoch: int
    partition_epoch: int
    epoch_start_offset: int  # the leader's log end when it took this epoch
    high_watermark: int
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending: IsrChange | None = None  # proposed, not yet answered by the controller

    def __post_init__(self) -> None:
        for replica in self.replicas:
            if replica != self.leader_id:
                self.followers.setdefault(replica, FollowerState())

    @classmethod
    def elected(
        cls,
        leader_id: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        leader_epoch: int,
        partition_epoch: int,
        log_end_offset: int,
        high_watermark: int,
        now_ms: int,
        *,
        min_insync_replicas: int = 1,
        replica_lag_time_max_ms: int = 30_000,
    ) -> PartitionLeader:
        """A new leader: every follower is given the benefit of the doubt (caught up now),
        as Kafka does, so the ISR is not shrunk before anyone had a chance to fetch."""
        state = cls(
            leader_id,
            tuple(replicas),
            tuple(isr),
            leader_epoch,
            partition_epoch,
            log_end_offset,
            high_watermark,
            min_insync_replicas,
            replica_lag_time_max_ms,
        )
        for follower in state.followers.values():
            follower.last_caught_up_ms = now_ms
            follower.leader_end_at_last_fetch = log_end_offset
        return state

    # --- what the ISR is, for the high watermark -----------------------------------------

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending is None:
            return self.isr
        return tuple(dict.fromkeys(self.isr + self.pending.isr))

    def under_min_isr(self) -> bool:
        return len(self.isr) < self.min_insync_replicas

    # --- events ----------------------------------------------------------------------------

    def on_follower_fetch(
        self, follower_id: int, fetch_offset: int, leader_end_offset: int, now_ms: int
    ) -> bool:
        """A follower fetched from `fetch_offset` (so its log ends there). Returns whether
        the high watermark moved (the caller then completes waiting produces and fetches)."""
        state = self.followers.get(follower_id)
        if state is None:
            raise KeyError(f"broker {follower_id} is not a replica of this partition")
        if fetch_offset >= leader_end_offset:
            state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.leader_end_at_last_fetch and state.last_fetch_ms >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now_ms
        state.leader_end_at_last_fetch = leader_end_offset
        return self.update_high_watermark(leader_end_offset)

    def on_follower_standing(self, follower_id: int, fetch_offset: int, at_ms: int) -> None:
        """The follower's fetch session fetched at `at_ms` while its log end for this
        partition was still `fetch_offset`, and nothing changed here since the partition was
        last read for it: as a fetch then, against the leader's end as it was at that read
        (a session that follows changes does not read an unchanged partition, so without
        this an idle partition's follower would look as if it stopped fetching)."""
        state = self.followers.get(follower_id)
        if state is None or state.last_fetch_ms >= at_ms or state.log_end_offset != fetch_offset:
            return
        if fetch_offset >= state.leader_end_at_last_fetch:
            state.last_caught_up_ms = max(state.last_caught_up_ms, at_ms)
        state.last_fetch_ms = at_ms

    def update_high_watermark(self, leader_end_offset: int) -> bool:
        """Recomputes it over the maximal ISR; returns whether it moved."""
        if self.under_min_isr():
            return False
        candidate = leader_end_offset
        for replica in self.maximal_isr:
            if replica != self.leader_id:
                candidate = min(candidate, self.followers[replica].log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def caught_up(self, state: FollowerState, leader_end_offset: int, now_ms: int) -> bool:
        """Kafka's ReplicaState.isCaughtUp: at the leader's log end, or caught up within
        replica.lag.time.max.ms. A follower of an idle partition stays in the ISR however
        long ago it last fetched it, as in Kafka (its broker's fencing takes it out), so an
        idle partition needs no fetch, and no clock, to keep its ISR."""
        return (
            state.log_end_offset == leader_end_offset
            or now_ms - state.last_caught_up_ms <= self.replica_lag_time_max_ms
        )

    def isr_change_needed(
        self, leader_end_offset: int, now_ms: int, eligible: Callable[[int], bool]
    ) -> IsrChange | None:
        """The ISR to propose now, if any: lagging members out, caught-up eligible followers
        in. None while a proposal is in flight (one at a time, as Kafka) or nothing to do."""
        if self.pending is not None:
            return None
        removed = tuple(
            r
            for r in self.isr
            if r != self.leader_id
            and not self.caught_up(self.followers[r], leader_end_offset, now_ms)
        )
        # Kafka expands only on the follower's own fetch: one that stopped fetching (not
        # caught up within replica.lag.time.max.ms) is not let back in, whatever its offset.
        added = tuple(
            r
            for r, state in sorted(self.followers.items())
            if r not in self.isr
            and eligible(r)
            and state.last_fetch_ms >= 0
            and now_ms - state.last_caught_up_ms <= self.replica_lag_time_max_ms
            and state.log_end_offset >= self.high_watermark
            and state.log_end_offset >= self.epoch_start_offset
        )
        if not removed and not added:
            return None
        isr = tuple(r for r in self.isr if r not in removed) + added
        change = IsrChange(isr, added, removed)
        self.pending = change
        return change

    def on_isr_committed(self, isr: Iterable[int], partition_epoch: int) -> None:
        """The controller's answer (or a metadata delta) set the ISR."""
        self.isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending = None

    def on_isr_refused(self) -> None:
        """The proposal was refused (a stale epoch, an ineligible member): try again later."""
        self.pending = None
