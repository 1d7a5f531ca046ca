"""The produce/fetch purgatory (after Kafka's DelayedOperationPurgatory with DelayedProduce
and DelayedFetch): requests that wait, each watching the partitions it waits on, with its
completion rule and its deadline. One class, two kinds of operation:

- a DelayedProduce (acks=all) completes, partition by partition, once the high watermark
  passes the appended batch, or fails as `replication_error` says (the partition went
  offline: its error; leadership moved: NOT_LEADER_OR_FOLLOWER; the ISR shrank below
  min.insync.replicas: NOT_ENOUGH_REPLICAS_AFTER_APPEND); what is still waiting at the
  deadline fails REQUEST_TIMED_OUT;
- a DelayedFetch, a follower's long poll or a consumer's, is answered once a read found
  min_bytes, a partition erred (or diverged, for a follower), the deadline passed, or there
  is no partition to wait on; else it parks until one of its partitions changes, or until
  the leader's replication quota may let held-back records go (then it looks again early),
  or the deadline. A follower's fetch reads again on any change of its partitions (it
  reads up to the log end, so every append may answer it); a consumer's only on a change
  that could answer it (`consumer_may_complete`, Kafka's DelayedFetch.tryComplete): the
  partition went offline, its leadership or leader epoch changed, the broker stopped
  holding it, its fetch offset left the log, or its high watermark passed what the last
  read saw. An append that does not move the high watermark (the followers have not
  copied it yet) or an ISR change wakes no consumer.

No event loop, no clock, no reads: the pump (broker/replica_manager.py on asyncio, the
replication simulator on its own clock) passes the time in, reads the records (file I/O)
and hands in what a read found, and tells the purgatory which partition changed (a
Partition's on_change). The purgatory answers which operations are done and with what,
which must read again, and when to wake it next (`next_wake_ms`). It reads only partitions'
in-memory state (high watermark, log start and end, leader epoch, ISR). Not thread-safe:
one pump drives it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from broker.partition import LeaderAppend, Partition
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode

# A long poll holds a request, and its memory, for up to max_wait_ms. Kafka bounds it only by
# the int32 field; Strom answers after at most this long however much is asked (a fetch may
# always be answered early), so no request can park for days. Clients ask 500 ms by default.
MAX_FETCH_WAIT_MS = 60_000

# Likewise an acks=all produce waits for its replicas at most this long, whatever timeout_ms
# says (Kafka's producer asks 30 s, request.timeout.ms).
MAX_PRODUCE_WAIT_MS = 300_000

TopicPartition = tuple[str, int]  # (topic, index), as the pumps name partitions


def fetch_wait_ms(max_wait_ms: int) -> int:
    """A fetch's max_wait_ms as it is waited: negative as 0, at most MAX_FETCH_WAIT_MS."""
    return min(max(max_wait_ms, 0), MAX_FETCH_WAIT_MS)


def replication_error(partition: Partition, append: LeaderAppend) -> ApiError | None:
    """Why an acks=all produce waiting for its replicas fails now, or None while it may still
    succeed. Decided for Strom: when the ISR shrinks below min.insync.replicas while a produce
    waits, it fails at once with NOT_ENOUGH_REPLICAS_AFTER_APPEND (the high watermark cannot
    move then, so waiting out the timeout would only hide why)."""
    if partition.offline:
        # Kafka's DelayedProduce answers the partition's error: the records may be on the
        # other replicas, but this leader can no longer tell.
        return partition.offline_error()
    leader = partition.leader
    if leader is None or partition.leader_epoch != append.leader_epoch:
        return ApiError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"Leadership of {partition.name} changed while the produce waited for its "
            f"replicas; the records may or may not have been kept.",
        )
    if len(leader.isr) < partition.settings.min_insync_replicas:
        return ApiError(
            ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            f"The ISR {list(leader.isr)} of {partition.name} shrank below "
            f"min.insync.replicas={partition.settings.min_insync_replicas} after the "
            f"records were written.",
        )
    return None


def replicated(partition: Partition, append: LeaderAppend) -> bool:
    """The in-sync replicas all hold the batch: the high watermark passed it."""
    return partition.high_watermark >= append.next_offset


@dataclass(frozen=True, slots=True)
class FetchReadSummary:
    """What one read of a follower fetch found: the record bytes, whether a partition erred
    or diverged (the follower must hear of it now), the partitions to wait on (those this
    broker holds), and, when the leader's replication quota held records back, how long
    until it may let them go."""

    record_bytes: int
    stopped: bool
    keys: tuple[TopicPartition, ...]
    throttled_for_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ConsumerPartitionRead:
    """What one read of a consumer fetch saw of one partition it was served: the replica,
    where the fetch reads from, and the replica's state then (leader epoch, whether this
    broker led it, high watermark). `filled`: the read already brought as many bytes as the
    partition's limit allows, so more records there would add nothing (Kafka counts a
    partition's available bytes up to its partition_max_bytes)."""

    key: TopicPartition
    partition: Partition
    fetch_offset: int
    leader_epoch: int
    leading: bool
    high_watermark: int
    filled: bool = False


@dataclass(frozen=True, slots=True)
class ConsumerReadSummary:
    """What one read of a consumer fetch found: the record bytes, whether a partition
    erred (the consumer must hear of it now), and each partition it was served (those to
    wait on). Consumers read up to the high watermark; Strom has no transactions, so the
    last stable offset of read_committed is the high watermark too."""

    record_bytes: int
    stopped: bool
    partitions: tuple[ConsumerPartitionRead, ...]


def consumer_may_complete(seen: ConsumerPartitionRead) -> bool:
    """Whether a change of a partition may answer a consumer fetch parked on it (Kafka's
    DelayedFetch.tryComplete, a partition at a time): it went offline, leadership moved or
    its leader epoch changed (a read now answers the error, or FENCED_LEADER_EPOCH), the
    fetch offset left the log (records deleted before it, or the log cut below it: a read
    answers OFFSET_OUT_OF_RANGE), or new records became readable (its high watermark passed
    both the fetch offset and what the last read saw) where the partition's limit still has
    room. Reading again finds how many bytes: Strom's log keeps no file position for its
    high watermark (Kafka's LogOffsetMetadata), so the read counts them, per batch."""
    partition = seen.partition
    if partition.offline or partition.leader_epoch != seen.leader_epoch:
        return True
    if partition.is_leader != seen.leading:
        return True
    log = partition.log
    if not log.log_start_offset <= seen.fetch_offset <= log.log_end_offset:
        return True
    if seen.filled:
        return False
    return partition.high_watermark > max(seen.high_watermark, seen.fetch_offset)


@dataclass(eq=False, slots=True)
class DelayedProduce:
    """An acks=all produce: the batches still waiting, and each partition's outcome once
    decided (None: replicated; else the error to answer)."""

    waiting: list[tuple[TopicPartition, Partition, LeaderAppend]]
    timeout_ms: int
    deadline_ms: int
    results: dict[TopicPartition, ApiError | None] = field(default_factory=dict)
    keys: tuple[TopicPartition, ...] = ()  # the partitions it is parked on

    @property
    def done(self) -> bool:
        return not self.waiting


@dataclass(eq=False, slots=True)
class DelayedFetch:
    """A long poll between two reads: answered at `deadline_ms` at the latest; parked on
    `keys` until `wake_ms`. A consumer's fetch keeps what its last read saw of each
    partition (`seen`), which decides whether a change wakes it; a follower's has none."""

    min_bytes: int
    deadline_ms: int
    keys: tuple[TopicPartition, ...] = ()
    wake_ms: int | None = None
    seen: dict[TopicPartition, ConsumerPartitionRead] | None = None


DelayedOperation = DelayedProduce | DelayedFetch


class Purgatory:
    def __init__(self) -> None:
        # Each parked operation with the number of its parking (in the order they parked);
        # the operations waiting on each partition, in that order; and the wake-ups as a
        # heap of (when, parking number, operation), an entry stale once the operation is
        # no longer parked under that number (dropped when it reaches the top, or when
        # stale ones outnumber the live). So a thousand produces waiting on one hot
        # partition cost no more per event than one.
        self._parked: dict[DelayedOperation, int] = {}
        self._watchers: dict[TopicPartition, dict[DelayedOperation, None]] = {}
        self._wakes: list[tuple[int, int, DelayedOperation]] = []
        self._parkings = itertools.count()

    # --- what waits ---------------------------------------------------------------------

    def watched(self, key: TopicPartition) -> bool:
        """Whether an operation waits on the partition (a change of one nobody waits on
        need not reach the purgatory)."""
        return key in self._watchers

    def parked(self) -> list[DelayedOperation]:
        return list(self._parked)

    def next_wake_ms(self) -> int | None:
        """When `expire` has something to do next: the earliest deadline or early look."""
        wakes = self._wakes
        while wakes and self._parked.get(wakes[0][2]) != wakes[0][1]:
            heapq.heappop(wakes)
        return wakes[0][0] if wakes else None

    # --- events in ----------------------------------------------------------------------

    def produce(
        self,
        waiting: Sequence[tuple[TopicPartition, Partition, LeaderAppend]],
        timeout_ms: int,
        now_ms: int,
    ) -> DelayedProduce:
        """An acks=all produce whose batches were appended: decided at once where it can be,
        parked on its partitions otherwise (`done` says which)."""
        wait = min(max(timeout_ms, 0), MAX_PRODUCE_WAIT_MS)
        op = DelayedProduce(list(waiting), timeout_ms, now_ms + wait)
        self._try_produce(op, now_ms)
        if not op.done:
            op.keys = tuple(key for key, _, _ in op.waiting)
            self._park(op)
        return op

    def follower_fetch(self, max_wait_ms: int, min_bytes: int, now_ms: int) -> DelayedFetch:
        """A follower's fetch arrived; the pump reads it next (`fetch_read`)."""
        return DelayedFetch(max(min_bytes, 1), now_ms + fetch_wait_ms(max_wait_ms))

    def fetch_read(self, op: DelayedFetch, read: FetchReadSummary, now_ms: int) -> bool:
        """What a read of the fetch found. True: answer it now with that read. False: it is
        parked until a partition changes or `expire` says to look again."""
        if read.record_bytes >= op.min_bytes or read.stopped or now_ms >= op.deadline_ms:
            return True
        if not read.keys and read.throttled_for_ms is None:
            return True  # no partition to wait on (Kafka answers at once)
        op.keys = read.keys
        op.wake_ms = None
        if read.throttled_for_ms is not None:  # look again once the quota has paid its debt
            op.wake_ms = min(op.deadline_ms, now_ms + max(read.throttled_for_ms, 1))
        self._park(op)
        return False

    def consumer_fetch(self, max_wait_ms: int, min_bytes: int, now_ms: int) -> DelayedFetch:
        """A consumer's fetch arrived; the pump reads it next (`consumer_read`). min_bytes
        is taken as asked: 0 (or less) answers the first read, as Kafka does."""
        return DelayedFetch(min_bytes, now_ms + fetch_wait_ms(max_wait_ms), seen={})

    def consumer_read(self, op: DelayedFetch, read: ConsumerReadSummary, now_ms: int) -> bool:
        """What a read of a consumer fetch found. True: answer it now with that read
        (min_bytes reached, a partition erred, the deadline passed, or no partition to wait
        on). False: it is parked until a change of a partition may answer it
        (`consumer_may_complete`) or its deadline."""
        if read.record_bytes >= op.min_bytes or read.stopped or now_ms >= op.deadline_ms:
            return True
        if not read.partitions:
            return True  # nothing to wait on (Kafka answers at once)
        op.seen = {seen.key: seen for seen in read.partitions}
        op.keys = tuple(op.seen)
        op.wake_ms = None
        self._park(op)
        return False

    def changed(
        self, key: TopicPartition, now_ms: int, gone: bool = False
    ) -> list[DelayedOperation]:
        """A partition changed (high watermark, leadership, ISR, offline), or, `gone`, the
        broker no longer holds it (deleted, moved away). Returns the produces it decided
        (answer them from `results`) and the fetches to read again."""
        woken: list[DelayedOperation] = []
        for op in list(self._watchers.get(key, ())):
            if isinstance(op, DelayedFetch):
                if op.seen is not None and not gone and not consumer_may_complete(op.seen[key]):
                    continue  # a consumer's fetch that no read could answer yet
                self._unpark(op)
                woken.append(op)
                continue
            self._try_produce(op, now_ms)
            if op.done:
                self._unpark(op)
                woken.append(op)
        return woken

    def expire(self, now_ms: int) -> list[DelayedOperation]:
        """The time is now: produces past their deadline are decided (REQUEST_TIMED_OUT for
        what is still waiting), fetches past their deadline or early look read again."""
        woken: list[DelayedOperation] = []
        while (at := self.next_wake_ms()) is not None and at <= now_ms:
            op = heapq.heappop(self._wakes)[2]
            if isinstance(op, DelayedProduce):
                self._try_produce(op, now_ms)
            self._unpark(op)
            woken.append(op)
        return woken

    def hurry(self, op: DelayedFetch, now_ms: int) -> list[DelayedOperation]:
        """The follower asked for its fetch's answer now (a hurry: it follows a partition the
        fetch does not ask for): its deadline is now. Returned to be read again if parked;
        a fetch being read is answered by that read."""
        op.deadline_ms = min(op.deadline_ms, now_ms)
        if op in self._parked:
            self._unpark(op)
            return [op]
        return []

    def cancel(self, op: DelayedOperation) -> None:
        """The request went away (its caller was cancelled): forget it."""
        if op in self._parked:
            self._unpark(op)

    def drop_all(self) -> list[DelayedOperation]:
        """The process stops: every parked operation, in the order they were parked."""
        ops = list(self._parked)
        self._parked.clear()
        self._watchers.clear()
        self._wakes.clear()
        return ops

    # --- the rules ----------------------------------------------------------------------

    def _try_produce(self, op: DelayedProduce, now_ms: int) -> None:
        still = []
        for key, partition, append in op.waiting:
            error = replication_error(partition, append)
            if error is not None:
                op.results[key] = error
            elif replicated(partition, append):
                op.results[key] = None
            else:
                still.append((key, partition, append))
        op.waiting = still
        if still and now_ms >= op.deadline_ms:
            for key, partition, append in still:
                op.results[key] = ApiError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"{partition.name}: the in-sync replicas {list(partition.isr)} did not "
                    f"all reach offset {append.next_offset} within {op.timeout_ms} ms "
                    f"(high watermark {partition.high_watermark}).",
                )
            op.waiting = []

    # --- bookkeeping --------------------------------------------------------------------

    def _park(self, op: DelayedOperation) -> None:
        parking = self._parked[op] = next(self._parkings)
        heapq.heappush(self._wakes, (_wake_of(op), parking, op))
        if len(self._wakes) > 2 * len(self._parked) + 64:
            # Mostly stale (produces done long before their deadline): rebuilt, so the heap
            # holds no finished operation for long (amortized O(1) a parking).
            self._wakes = [e for e in self._wakes if self._parked.get(e[2]) == e[1]]
            heapq.heapify(self._wakes)
        for key in op.keys:
            self._watchers.setdefault(key, {})[op] = None

    def _unpark(self, op: DelayedOperation) -> None:
        del self._parked[op]  # its wake-up entry goes stale
        for key in op.keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.pop(op, None)
                if not watchers:
                    del self._watchers[key]


def _wake_of(op: DelayedOperation) -> int:
    if isinstance(op, DelayedFetch) and op.wake_ms is not None:
        return op.wake_ms
    return op.deadline_ms
