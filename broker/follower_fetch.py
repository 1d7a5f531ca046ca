"""The follower's side of replication as decisions without I/O (docs/architecture.md §6): which
stream follows which partition, what the next fetch of a stream asks, and what its answer
does to each partition (after Kafka's ReplicaFetcherManager, AbstractFetcherThread and
PartitionFetchState). The node's replica fetcher (broker/replica_fetcher.py: gRPC streams,
awaits, tasks) and the replication simulator (tests/replication_sim/follower.py: a simulated
network and clock) both drive these classes, so the rules the simulator checks are the ones
the broker runs. Nothing here opens, awaits, sleeps or reads a clock: time comes in as
`now_ms`, requests go out and answers come in as the dataclasses below (the pump converts
them to and from the wire), and what an answer did comes back as one outcome per partition,
for the pump to log. Applying an answer writes to the Partition (its log does file I/O), as
broker/isr_proposals.py commits an ISR on it; the core itself does no I/O.

The rules:
- Placement: a partition is followed when another broker leads it and the partition is not
  offline, on stream (leader, crc32("topic-index") mod num.replica.fetchers), so a broker
  follows a leader through at most that many streams. A new pool size re-hashes every
  partition; a stream left with no partition is retired, and so is one whose leader came
  back on another address (a new stream takes its partitions over).
- One fetch in flight per stream. A partition followed while it is out (not asked for, or
  at another leader epoch) makes the stream send the leader a hurry, once per fetch: the
  leader answers that fetch at once and the next one names the partition (take_hurry),
  rather than the partition waiting out the long poll (up to replica.fetch.wait.max.ms).
  A fetch asks for every partition of the stream that is neither
  resting nor held back by the follower's replication quota (Kafka's
  shouldFollowerThrottle, broker/replication_quota.py), each at its log end (the fetch
  offset), with the epoch of its last batch and the leader epoch it follows. While a
  throttled partition is left out, the leader may hold the fetch no longer than the quota's
  debt.
- Fetch sessions (KIP-227, Kafka's FetchSessionHandler; the leader's side is
  broker/replica_sessions.py): the first fetch of a stream is a full one (epoch 0), naming
  all of them and asking for a session; once the leader answers with a session id, each
  fetch names only the partitions whose fetch state changed since the last one (or whose
  answer was dropped) and forgets those it no longer fetches, and only the partitions that
  may have changed (answered, followed, unfollowed, done resting) are looked at. A session
  error, a whole-response error or a broken stream makes the next fetch a full one.
- The answer is applied to a partition only if it still follows the same leader epoch on the
  same stream from the same log end: a reply that crossed a leader change, an unfollow or a
  truncation is dropped (STALE), never written.
- Per partition: records are appended (the lag to the leader's high watermark kept for the
  throttle, the throttled bytes recorded against the quota); a diverging epoch truncates
  there (KIP-320); OFFSET_OUT_OF_RANGE restarts at the leader's log start when behind it,
  truncates to the leader's log end when past it (only without epochs to compare, KIP-101's
  old path), else rests; any other error of the leader's, or a local ApiError, rests the
  partition for replica.fetch.backoff.ms (or until the metadata moves it: a follow clears
  the rest). KAFKA_STORAGE_ERROR or an unexpected error fails the partition alone (Kafka's
  markPartitionFailed): it leaves the stream, the others go on, and it comes back only when
  the metadata gives it a leader again.
- A whole-response error, or a stream that broke (reset, timed out: no answer within
  replica.fetch.wait.max.ms + 30 s), applies nothing; the stream reconnects after
  replica.fetch.backoff.ms.

Not thread-safe: one event loop (or the simulator) owns it.
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from broker.replication_settings import ReplicationSettings
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode

Key = tuple[bytes, int]  # (topic id, partition)
StreamKey = tuple[int, int]  # (leader broker id, fetcher index)
Planned = tuple[Partition, int, int]  # the partition, the leader epoch and log end asked at
# A partition as the leader's fetch session holds it: as planned, and the rest of what the
# request said of it (the epoch of its last batch, its log start, the max bytes).
Sent = tuple[Partition, int, int, int, int, int]
# Session errors (KIP-227): the stream goes on, its next fetch is a full one.
SESSION_ERRORS = frozenset(
    {
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    }
)
_MAX_EPOCH = 2**31 - 1
# A stream read waits this much longer than replica.fetch.wait.max.ms before giving up.
READ_TIMEOUT_EXTRA_MS = 30_000
# Where the pump looks again when nothing is due (a follow wakes it sooner).
IDLE_MS = 60_000


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition of a ReplicaFetchRequest."""

    topic_id: bytes
    partition: int
    current_leader_epoch: int
    fetch_offset: int  # the follower's log end
    last_fetched_epoch: int  # the epoch of its last batch
    log_start_offset: int
    partition_max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A ReplicaFetchRequest; `correlation_id` numbers the fetches of a stream (it does not go
    on the wire: the stream's one fetch in flight is the one an answer is for)."""

    correlation_id: int
    replica_id: int
    broker_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: tuple[PartitionFetch, ...]
    # The fetch session (KIP-227): its id (0: none), the epoch (0 full, asking for a session;
    # -1 or None sessionless; else the session's next), the partitions it stops fetching.
    session_id: int = 0
    session_epoch: int | None = None
    forgotten: tuple[Key, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionAnswer:
    """One partition of a ReplicaFetchResponse, as the leader's servicer fills it (the log
    bounds on errors too: after OFFSET_OUT_OF_RANGE the follower needs them)."""

    topic_id: bytes
    partition: int
    error: str | None = None  # Kafka's error name
    records: bytes = b""
    high_watermark: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    diverging: tuple[int, int] | None = None  # (epoch, end offset) where the logs parted
    message: str = ""  # the error's sentence


@dataclass(frozen=True, slots=True)
class FetchResponse:
    partitions: tuple[PartitionAnswer, ...] = ()
    error: str | None = None  # a whole-response error: the stream is given up
    message: str = ""
    session_id: int = 0  # the fetch session the leader keeps for the stream (0: none)


class Applied(enum.Enum):
    APPENDED = "appended"
    DIVERGED = "truncated where the logs diverged"
    RESTARTED = "restarted at the leader's log start"
    TRUNCATED = "truncated to the leader's log end"
    RESTING = "rests for replica.fetch.backoff.ms"
    FAILED = "failed: no longer fetched"
    STALE = "moved on while the fetch was out: dropped"


@dataclass(frozen=True, slots=True)
class PartitionOutcome:
    partition: Partition
    applied: Applied
    fetch_offset: int
    log_end_offset: int  # after the answer
    answer: PartitionAnswer
    cause: Exception | None = None  # the local error that made it rest or fail


@dataclass(frozen=True, slots=True)
class Answered:
    """What one answer did: `stale` when it is not the stream's fetch in flight (an answer of
    an earlier, abandoned fetch), `broken` (the reason) when the stream must be given up."""

    outcomes: tuple[PartitionOutcome, ...] = ()
    stale: bool = False
    broken: str | None = None


class FetchStream:
    """One stream of this broker to one leader: the partitions it follows there and their
    fetch state (PartitionFetchState), the fetch in flight, the reconnect backoff."""

    def __init__(
        self,
        key: StreamKey,
        address: str,
        broker_id: int,
        config: ReplicaConfig,
        replication: ReplicationSettings,
    ) -> None:
        self.key = key
        self.leader_id = key[0]
        self.address = address  # the leader's inter-broker address, opaque here
        self.broker_id = broker_id
        self.config = config
        self.replication = replication
        self.partitions: dict[Key, Partition] = {}
        self.resting_until: dict[Key, int] = {}
        # How far each partition was behind the leader's high watermark after its last
        # answer (Kafka's PartitionFetchState.lag); none yet: not in sync.
        self.lag: dict[Key, int] = {}
        self.throttled_out = False  # the last plan left a throttled partition out
        self.in_flight: dict[Key, Sent] | None = None
        # A partition was followed anew while the fetch in flight does not ask for it as it
        # is now (take_hurry).
        self.hurry_wanted = False
        # The fetch session (KIP-227, Kafka's FetchSessionHandler): its id (0: none yet),
        # the epoch of the next fetch (0: a full fetch, which asks for a session), what the
        # leader's session holds of each partition (as the last fetch sent them), and the
        # partitions whose state may have changed since (only those are looked at: an idle
        # partition costs a fetch nothing); `renamed`: those to name again even unchanged
        # (their answer was dropped, so the leader must read them again).
        self.session_id = 0
        self.session_epoch = 0
        self.sent: dict[Key, Sent] = {}
        self.dirty: dict[Key, None] = {}
        self.renamed: set[Key] = set()
        self.full_fetches = 0
        self.correlation_id = 0  # the last fetch's
        self.reconnect_at = 0  # after a broken stream, no fetch before this
        self.fetches = 0  # answers read
        self.failed = 0  # partitions marked failed (Kafka's FailedPartitionsCount)
        self.broken_count = 0
        self.last_error = ""

    @property
    def read_timeout_ms(self) -> int:
        """How long the pump waits for an answer before it gives the stream up."""
        return self.config.fetch_wait_max_ms + READ_TIMEOUT_EXTRA_MS

    # --- events ---------------------------------------------------------------------------

    def add(self, partition: Partition) -> None:
        key = (partition.topic_id, partition.index)
        self.partitions[key] = partition
        self.resting_until.pop(key, None)
        self.dirty[key] = None
        self.renamed.add(key)  # followed anew: the leader reads it whatever the session says
        if self.in_flight is not None:
            sent = self.in_flight.get(key)
            if sent is None or sent[0] is not partition or sent[1] != partition.leader_epoch:
                self.hurry_wanted = True

    def take_hurry(self) -> bool:
        """Whether to ask the leader to answer the fetch in flight now (a hurry, once per
        fetch): a partition followed since it left (a topic just created, a new leader
        epoch) would otherwise wait for that fetch's long poll, up to
        replica.fetch.wait.max.ms, before the next fetch names it. The answer is applied as
        any other; the next fetch asks for the partition."""
        wanted, self.hurry_wanted = self.hurry_wanted, False
        return wanted and self.in_flight is not None

    def remove(self, partition: Partition) -> None:
        key = (partition.topic_id, partition.index)
        if self.partitions.get(key) is partition:
            del self.partitions[key]
            self.resting_until.pop(key, None)
            self.lag.pop(key, None)
            self.dirty[key] = None

    def next_fetch(self, now_ms: int, broker_epoch: int) -> FetchRequest | None:
        """The fetch to send now, marked in flight; None while one is out, while the stream
        backs off, or while every partition rests or is held back (`wake_at` says when to
        ask again)."""
        if self.in_flight is not None or now_ms < self.reconnect_at:
            return None
        if self.session_epoch == 0:
            request = self._full_fetch(now_ms, broker_epoch)
        else:
            request = self._incremental_fetch(now_ms, broker_epoch)
        if request is None:
            return None
        self.in_flight = self.sent
        return request

    def wake_at(self, now_ms: int) -> int | None:
        """When a fetch may be due, after `next_fetch` gave none: the end of the backoff, of
        the first rest, or of the follower quota's debt; None while a fetch is out (its answer
        or the stream's break comes first) and while nothing is due until a follow."""
        if self.in_flight is not None:
            return None
        if now_ms < self.reconnect_at:
            return self.reconnect_at
        times = [t for t in self.resting_until.values() if t > now_ms]
        if self.throttled_out:
            times.append(now_ms + round(self.replication.follower.delay_s() * 1000))
        return min(times, default=None)

    def awaiting(self, correlation_id: int) -> bool:
        """Whether that fetch is the one in flight."""
        return self.in_flight is not None and correlation_id == self.correlation_id

    def answered(self, correlation_id: int, response: FetchResponse, now_ms: int) -> Answered:
        """The answer to the fetch in flight: applied partition by partition."""
        if not self.awaiting(correlation_id):
            return Answered(stale=True)
        sent = self.in_flight
        assert sent is not None
        self.in_flight = None
        self.hurry_wanted = False
        self.fetches += 1
        if response.error in SESSION_ERRORS:
            # Kafka's FetchSessionHandler.handleError: start over with a full fetch (one the
            # leader no longer knows is asked for anew; another is closed by the full fetch).
            if response.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = 0
            self._start_over()
            self.last_error = f"{response.error}: {response.message}"
            return Answered()
        if response.error is not None:
            self._start_over()
            return Answered(broken=f"{response.error}: {response.message}")
        if self.session_epoch == 0 or response.session_id != self.session_id:
            # A full fetch's answer opens the session (or none: no slot was free); an
            # incremental fetch that forgot its last partition is answered sessionless.
            self.session_id = response.session_id
            self.session_epoch = 1 if response.session_id else 0
            if not response.session_id:
                self._start_over()
        else:
            self.session_epoch = 1 if self.session_epoch == _MAX_EPOCH else self.session_epoch + 1
        outcomes = []
        for answer in response.partitions:
            key = (answer.topic_id, answer.partition)
            planned = sent.get(key)
            if planned is not None:
                outcome = self._apply(key, planned[:3], answer, now_ms)
                self.dirty[key] = None  # its log end or log start may have moved
                if outcome.applied is Applied.STALE:
                    self.renamed.add(key)
                outcomes.append(outcome)
        return Answered(tuple(outcomes))

    def broken(self, now_ms: int, why: str, back_off: bool = True) -> int:
        """The stream failed (reset, refused, timed out, given up): the fetch out is lost.
        Returns when to reconnect: after replica.fetch.backoff.ms, or at once when the
        stream only ended for its session to be renewed (`back_off` False)."""
        self.in_flight = None
        self.hurry_wanted = False
        self.broken_count += 1
        self.last_error = why
        self.reconnect_at = now_ms + (self.config.fetch_backoff_ms if back_off else 0)
        self._start_over()  # a fetch may have been lost: the leader's session is unknown
        return self.reconnect_at

    def _start_over(self) -> None:
        """The next fetch is a full one (closing the session this stream had, if any)."""
        self.session_epoch = 0
        self.sent = {}
        self.dirty.clear()
        self.renamed.clear()

    # --- the request ------------------------------------------------------------------------

    def plan(self, now_ms: int) -> dict[Key, Planned]:
        """The partitions not resting nor held back by the follower's quota."""
        self.throttled_out = False
        plan = {}
        for key in self.partitions:
            planned = self._planned(key, now_ms)
            if planned is not None:
                plan[key] = planned
        return plan

    def _planned(self, key: Key, now_ms: int) -> Planned | None:
        """What a fetch would ask of the partition now: None when it is not followed here,
        rests, or is held back by the follower's quota."""
        p = self.partitions.get(key)
        if p is None or self.resting_until.get(key, 0) > now_ms:
            return None
        if self.replication.follower.should_throttle(p.topic, p.index, self.lag.get(key, 1) <= 0):
            self.throttled_out = True
            return None
        return (p, p.leader_epoch, p.log.log_end_offset)

    def _sent(self, planned: Planned, max_bytes: int) -> Sent:
        p, epoch, end = planned
        log = p.log
        return (p, epoch, end, log.leader_epochs.latest_epoch(), log.log_start_offset, max_bytes)

    def _full_fetch(self, now_ms: int, broker_epoch: int) -> FetchRequest | None:
        """Every partition not resting nor held back, asking the leader for a session."""
        plan = self.plan(now_ms)
        if not plan:
            return None
        max_bytes = self.replication.fetch_max_bytes
        self.sent = {key: self._sent(planned, max_bytes) for key, planned in plan.items()}
        self.dirty.clear()
        self.renamed.clear()
        self.full_fetches += 1
        return self._request(list(self.sent.items()), (), broker_epoch)

    def _incremental_fetch(self, now_ms: int, broker_epoch: int) -> FetchRequest:
        """The partitions whose fetch state changed since the last fetch (Kafka's
        FetchSessionHandler.Builder): those the session does not hold or holds otherwise,
        and, forgotten, those it holds that are no longer fetched. Only the partitions that
        may have changed are looked at (an answer, a follow, a rest that ended; every one
        while the follower's quota throttles any)."""
        self.throttled_out = False
        looked = self.dirty
        self.dirty = {}
        for key, until in list(self.resting_until.items()):
            if until <= now_ms:
                del self.resting_until[key]
                looked[key] = None
        if self.replication.follower.throttles_any:
            looked.update(dict.fromkeys(self.partitions))
            looked.update(dict.fromkeys(self.sent))
        max_bytes = self.replication.fetch_max_bytes
        named: list[tuple[Key, Sent]] = []
        forgotten: list[Key] = []
        renamed, self.renamed = self.renamed, set()
        for key in looked:
            planned = self._planned(key, now_ms)
            before = self.sent.get(key)
            if planned is None:
                if before is not None:
                    del self.sent[key]
                    forgotten.append(key)
                continue
            now = self._sent(planned, max_bytes)
            if now != before or key in renamed:
                self.sent[key] = now
                named.append((key, now))
        return self._request(named, tuple(forgotten), broker_epoch)

    def _request(
        self, named: list[tuple[Key, Sent]], forgotten: tuple[Key, ...], broker_epoch: int
    ) -> FetchRequest:
        self.correlation_id += 1
        config = self.config
        max_wait_ms = config.fetch_wait_max_ms
        if self.throttled_out:
            # The left-out partitions may go again once the quota has paid its debt: the
            # leader's long poll must not hold them back longer than that.
            delay_ms = int(self.replication.follower.delay_s() * 1000) + 1
            max_wait_ms = min(max_wait_ms, delay_ms)
        return FetchRequest(
            correlation_id=self.correlation_id,
            replica_id=self.broker_id,
            broker_epoch=broker_epoch,
            max_wait_ms=max_wait_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_response_max_bytes,
            partitions=tuple(
                PartitionFetch(
                    topic_id=topic_id,
                    partition=index,
                    current_leader_epoch=epoch,
                    fetch_offset=end,
                    last_fetched_epoch=last_epoch,
                    log_start_offset=log_start,
                    partition_max_bytes=max_bytes,
                )
                for (topic_id, index), (_, epoch, end, last_epoch, log_start, max_bytes) in named
            ),
            session_id=self.session_id,
            session_epoch=self.session_epoch,
            forgotten=forgotten,
        )

    # --- the answer -------------------------------------------------------------------------

    def _apply(
        self, key: Key, planned: Planned, answer: PartitionAnswer, now_ms: int
    ) -> PartitionOutcome:
        partition, epoch, end = planned
        if (
            self.partitions.get(key) is not partition
            or partition.leader_epoch != epoch
            or partition.log.log_end_offset != end
        ):
            return self._outcome(partition, Applied.STALE, end, answer)
        try:
            applied = self._apply_one(key, partition, answer, end, now_ms)
        except ApiError as exc:
            if exc.error_name == ErrorCode.KAFKA_STORAGE_ERROR:
                self._fail(partition)
                return self._outcome(partition, Applied.FAILED, end, answer, exc)
            self._rest(key, now_ms)
            return self._outcome(partition, Applied.RESTING, end, answer, exc)
        except Exception as exc:  # a bug in one partition must not stall the others
            self._fail(partition)
            return self._outcome(partition, Applied.FAILED, end, answer, exc)
        return self._outcome(partition, applied, end, answer)

    def _apply_one(
        self, key: Key, partition: Partition, answer: PartitionAnswer, end: int, now_ms: int
    ) -> Applied:
        if answer.error is not None:
            if answer.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                return self._out_of_range(key, partition, answer, end, now_ms)
            self._rest(key, now_ms)
            return Applied.RESTING
        if answer.diverging is not None:
            partition.truncate_on_divergence(*answer.diverging)
            return Applied.DIVERGED
        partition.append_as_follower(answer.records, answer.high_watermark, answer.log_start_offset)
        self.lag[key] = max(answer.high_watermark - partition.log.log_end_offset, 0)
        quota = self.replication.follower
        if answer.records and quota.is_throttled(partition.topic, partition.index):
            quota.record(len(answer.records))
        return Applied.APPENDED

    def _out_of_range(
        self, key: Key, partition: Partition, answer: PartitionAnswer, end: int, now_ms: int
    ) -> Applied:
        if end < answer.log_start_offset:
            partition.restart_at(answer.log_start_offset)
            return Applied.RESTARTED
        if end > answer.log_end_offset:
            partition.truncate_to(answer.log_end_offset)
            return Applied.TRUNCATED
        self._rest(key, now_ms)
        return Applied.RESTING

    def _outcome(
        self,
        partition: Partition,
        applied: Applied,
        end: int,
        answer: PartitionAnswer,
        cause: Exception | None = None,
    ) -> PartitionOutcome:
        after = partition.log.log_end_offset
        return PartitionOutcome(partition, applied, end, after, answer, cause)

    def _fail(self, partition: Partition) -> None:
        self.failed += 1
        self.remove(partition)

    def _rest(self, key: Key, now_ms: int) -> None:
        self.resting_until[key] = now_ms + self.config.fetch_backoff_ms


@dataclass(frozen=True, slots=True)
class Placement:
    """Where `follow` put a partition: on `stream`, or on none (this broker leads it, it has
    no leader, it is offline, or `no_address`: its leader's address is not known)."""

    stream: FetchStream | None
    no_address: bool = False


class FollowerFetch:
    """Every stream of one broker, by (leader, fetcher index), and which partition is on
    which. The pump keeps one connection per stream in `streams` and lets go of any stream
    that leaves it (retired: emptied by a resize, or replaced after an address change)."""

    def __init__(
        self, broker_id: int, config: ReplicaConfig, replication: ReplicationSettings
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.replication = replication
        self.size = replication.num_fetchers
        self.streams: dict[StreamKey, FetchStream] = {}
        self._of: dict[Key, FetchStream] = {}

    def follow(self, partition: Partition, address_of: Callable[[int], str | None]) -> Placement:
        """Puts the partition on the stream of its current leader (or on none), after its
        role or leader changed; `address_of` gives a broker's inter-broker address."""
        self.unfollow(partition)
        leader = partition.leader_id
        if partition.is_leader or leader < 0 or leader == self.broker_id or partition.offline:
            return Placement(None)
        address = address_of(leader)
        if address is None:
            return Placement(None, no_address=True)
        index = zlib.crc32(f"{partition.topic}-{partition.index}".encode()) % max(self.size, 1)
        stream = self.streams.get((leader, index))
        if stream is None or stream.address != address:
            old = stream
            stream = self.streams[(leader, index)] = FetchStream(
                (leader, index), address, self.broker_id, self.config, self.replication
            )
            if old is not None:  # the leader came back on another address
                for moved in list(old.partitions.values()):
                    stream.add(moved)
                    self._of[(moved.topic_id, moved.index)] = stream
        stream.add(partition)
        self._of[(partition.topic_id, partition.index)] = stream
        return Placement(stream)

    def unfollow(self, partition: Partition) -> None:
        stream = self._of.pop((partition.topic_id, partition.index), None)
        if stream is not None:
            stream.remove(partition)

    def resize(
        self, size: int, address_of: Callable[[int], str | None]
    ) -> list[tuple[Partition, Placement]]:
        """A new num.replica.fetchers (Kafka's resizeThreadPool): every followed partition
        re-hashed, the streams left empty retired. Returns where each partition went."""
        self.size = size
        followed = [s.partitions[k] for k, s in self._of.items() if k in s.partitions]
        placed = [(p, self.follow(p, address_of)) for p in followed]
        for key, stream in list(self.streams.items()):
            if not stream.partitions:
                del self.streams[key]
        return placed
