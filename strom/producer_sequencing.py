"""The producer's sending rules (the decisions of Kafka's Sender and of its idempotent
TransactionManager), with no I/O: no clock, no sockets, no asyncio, no gRPC. Time comes in
as arguments (milliseconds on the caller's monotonic clock); decisions go out as return
values. strom/sender.py (asyncio and gRPC) and the replicated-partition simulator's
producers (tests/replication_sim/clients.py, on the simulated network and clock) drive this
same class, so the simulator checks the rules the client ships (docs/architecture.md §2, §8).

The pump's loop, and what this class answers at each point:
- `send_step()`: send, wait for the answers in flight, send only the batches whose fate is
  unknown and those queued before them (`resolving(batch)` says which may leave), or first
  ask for a producer id / epoch (InitProducerId, then `producer_id_granted`).
- `room(tp)`: how many more batches of a partition may leave now; `drained(batch)` as each
  leaves the queue, then `dispatched(batch)` (it joins the partition's batches in flight)
  or `put_back(batch, now_ms)` (no leader to send it to); `sending(batch)` as its request
  is built: the producer id, epoch and sequence it carries.
- Per batch of an answered or failed request: `acknowledged`, `refused` (an error answer),
  `no_answer` (the request failed or the answer lacked the partition), then
  `request_ended` once the request is done with; `expired` for a batch that waited past
  `delivery.timeout.ms`; `dropped` for one the pump failed itself. Each outcome is a
  `Succeed`, a `Fail` or a `Retry` (put it back in the queue, to leave again at `at_ms`).

The rules (Kafka's producer's, unless said otherwise):
- Up to `max.in.flight.requests.per.connection` x 5 batches of a partition in flight, in
  however many requests (strom/produce_requests.py): Kafka's producer has at most one batch
  of a partition per request, and Strom's leader remembers a producer's last 25 batches of
  a partition where Kafka's remembers 5 (strom_api/idempotence.py). After any error a partition
  sends one batch at a time until one succeeds with nothing else in flight; batches sent
  again go in the order they were first sent, so with idempotence order holds across
  retries (without it, a retry may land after a later batch).
- Retriable errors send the batch again after `retry.backoff.ms`, until `retries` attempts or
  `delivery.timeout.ms` from the batch's creation; other errors fail it at once.
- Idempotence: the producer gets an id and epoch and numbers each partition's batches; a
  retry carries the same numbers, so a batch the broker already wrote is answered with its
  original offsets, never written twice. A batch refused outright never used its numbers:
  they are given back when no later batch was numbered (and no earlier attempt of it went
  unanswered), else the epoch is bumped.
  OUT_OF_ORDER_SEQUENCE_NUMBER behind an earlier batch of the partition that failed or is
  unanswered only means "after that one": the batch goes again behind it. When the broker
  lost track of the producer (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER otherwise)
  or a batch's fate is unknown (it timed out), the epoch is bumped and numbering restarts
  (KIP-360), once every request in flight was answered and every batch of unknown fate was
  resolved under its old numbers; no batch of the new epoch is sent for a partition while
  batches of the old one are in flight there. A batch of unknown fate is never renumbered:
  refused so itself (by a deposed leader, say), it fails, as Kafka's producer fails it.
- A batch whose request got no answer is known to be written once a later batch of the same
  partition and epoch is acknowledged: the leader takes sequence n+1 only after n. Such a
  batch succeeds (offset unknown, -1, as Kafka's RecordMetadata without one) whatever its
  retry is answered, rather than being renumbered under a new epoch and written twice (the
  leader remembers only the last 25 batches, so an older retry is answered
  OUT_OF_ORDER_SEQUENCE_NUMBER). Kafka's producer lets such a batch time out instead.

Not thread-safe: one event loop (or the simulator) owns an instance.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from strom.errors import KafkaTimeoutError, StromError
from strom_api.error_codes import ErrorCode
from strom_api.idempotence import BATCHES_PER_IN_FLIGHT_REQUEST

TopicPartition = tuple[str, int]

# Errors after which the producer asks for metadata again before retrying.
STALE_METADATA = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.BROKER_NOT_AVAILABLE,
    }
)
_RESET_PRODUCER = frozenset({ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER})
# Answers for a batch the leader appended before the acks=all wait failed.
_APPENDED_ERRORS = frozenset(
    {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
)
SEQUENCES = 2**31  # sequence numbers wrap here


class Batch(Protocol):
    """What the rules read and write of a batch. The pump's batch type carries these fields;
    only this class writes the last six."""

    @property
    def tp(self) -> TopicPartition: ...

    @property
    def record_count(self) -> int: ...

    @property
    def created_ms(self) -> float: ...

    attempts: int
    epoch: int  # the producer epoch and first sequence it carries, once numbered
    sequence: int
    order: int  # its place among the partition's batches, from its first drain
    fate_unknown: bool  # sent, and no answer came back (written or not: unknown)
    last_error: Exception | None  # the retriable error of its last attempt


B = TypeVar("B", bound=Batch)


@dataclass(frozen=True)
class SequencingConfig:
    idempotent: bool
    retries: int
    delivery_timeout_ms: int
    retry_backoff_ms: int
    max_in_flight: int = 5  # requests per partition
    # A partition's unanswered batches per request allowed (strom_api/idempotence.py).
    batches_per_request: int = BATCHES_PER_IN_FLIGHT_REQUEST


class SendStep(enum.Enum):
    SEND = "send"  # drain and send what room() allows
    WAIT = "wait"  # send nothing until the requests in flight are answered
    RESOLVE_UNKNOWN = "resolve unknown"  # send only batches of unknown fate (old numbers)
    INIT_PRODUCER_ID = "init producer id"  # ask for an id / new epoch before sending


class RetryReason(enum.Enum):
    BACKOFF = "backoff"  # a retriable error: again after retry.backoff.ms
    BEHIND_EARLIER = "behind earlier"  # out of order behind an unsettled earlier batch
    NEW_EPOCH = "new epoch"  # the broker lost the producer's state: again under a new epoch


@dataclass(frozen=True)
class Succeed(Generic[B]):
    batch: B
    base_offset: int = -1  # -1: known written, where unknown
    append_time_ms: int = -1


@dataclass(frozen=True)
class Fail(Generic[B]):
    batch: B
    error: Exception


@dataclass(frozen=True)
class Retry(Generic[B]):
    """Put the batch back in its partition's queue (in first-sent order); it may leave again
    from `at_ms`."""

    batch: B
    at_ms: float
    reason: RetryReason
    error: StromError


Outcome = Succeed[B] | Fail[B] | Retry[B]


@dataclass(frozen=True)
class Numbers:
    """What a batch's encoding carries: -1s without idempotence."""

    producer_id: int
    epoch: int
    sequence: int
    renumbered: bool  # changed since its last attempt: encode it again


class ProducerSequencing(Generic[B]):
    def __init__(self, config: SequencingConfig) -> None:
        self.config = config
        self.producer_id = -1
        self.producer_epoch = -1
        self._next_sequence: dict[TopicPartition, int] = {}
        # Per partition, the last sequence acknowledged: (producer id, epoch, sequence).
        self._acked_through: dict[TopicPartition, tuple[int, int, int]] = {}
        self._bump_needed = False
        # Batches in flight per partition, in the order they were sent.
        self._in_flight: dict[TopicPartition, list[B]] = {}
        self._recovering: set[TopicPartition] = set()  # one batch at a time after an error
        self._next_order: dict[TopicPartition, int] = {}
        # Batches drained once and put back in the queue, per partition: to be sent again.
        self._to_resend: dict[TopicPartition, list[B]] = {}

    # --- what may be sent ---------------------------------------------------------------

    def send_step(self) -> SendStep:
        if not self.config.idempotent or (self.producer_id >= 0 and not self._bump_needed):
            return SendStep.SEND
        if self._in_flight:
            # As Kafka's producer: the epoch changes once every request in flight was
            # answered, so each batch to resend is known to be unwritten or written.
            return SendStep.WAIT
        if self._bump_needed and any(
            b.fate_unknown for queue in self._to_resend.values() for b in queue
        ):
            # A batch whose request got no answer may be written: renumbered under a new
            # epoch it would be written again (a duplicate, out of order). Resolve such
            # batches first, with their old numbers (the broker answers a written one as a
            # duplicate); the epoch changes once none is left (Kafka keeps unresolved
            # batches in flight for the same reason).
            return SendStep.RESOLVE_UNKNOWN
        return SendStep.INIT_PRODUCER_ID

    def resolving(self, batch: B) -> bool:
        """In the RESOLVE_UNKNOWN step, whether `batch` (at the head of its partition's
        queue) may leave: one of unknown fate, or one sent before a batch of unknown fate of
        its partition. The latter go too, with their old numbers, in order: waiting, they
        would hold the queue (and with it the epoch bump, every partition's sends) until
        delivery.timeout.ms."""
        if batch.fate_unknown:
            return True
        return any(
            b.fate_unknown and b.order > batch.order for b in self._to_resend.get(batch.tp, ())
        )

    def producer_id_granted(self, producer_id: int, epoch: int) -> None:
        """InitProducerId answered: numbering restarts at 0 on every partition."""
        self.producer_id, self.producer_epoch = producer_id, epoch
        self._next_sequence.clear()
        self._bump_needed = False

    def bump_needed(self) -> bool:
        return self._bump_needed

    def room(self, tp: TopicPartition) -> int:
        """How many more batches of `tp` may be sent now."""
        flying = self._in_flight.get(tp, ())
        recovering = tp in self._recovering
        if flying and (
            recovering or (self.config.idempotent and flying[-1].epoch != self.producer_epoch)
        ):
            return 0
        limit = 1 if recovering else self.config.max_in_flight * self.config.batches_per_request
        return limit - len(flying)

    def busy_partitions(self) -> set[TopicPartition]:
        """Partitions with batches in flight (their queued batches do not expire now)."""
        return set(self._in_flight)

    def has_in_flight(self, tp: TopicPartition) -> bool:
        return tp in self._in_flight

    def any_in_flight(self) -> bool:
        return bool(self._in_flight)

    # --- a batch leaves the queue -------------------------------------------------------

    def drained(self, batch: B) -> None:
        """The batch left its partition's queue, to be sent or put back."""
        if batch.order < 0:
            batch.order = self._next_order.get(batch.tp, 0)
            self._next_order[batch.tp] = batch.order + 1
        self._forget_queued(batch)

    def put_back(self, batch: B, now_ms: float) -> float:
        """No leader to send it to: back in the queue; returns when it may leave again."""
        self._queued(batch)
        return now_ms + self.config.retry_backoff_ms

    def dispatched(self, batch: B) -> None:
        """The batch goes in a request: it is in flight until `request_ended`."""
        self._in_flight.setdefault(batch.tp, []).append(batch)

    def sending(self, batch: B) -> Numbers:
        """The batch's request is being built: one more attempt, with these numbers. A batch
        keeps its numbers while the epoch stays; in a new epoch it takes the partition's next
        sequence."""
        batch.attempts += 1
        if not self.config.idempotent:
            return Numbers(-1, -1, -1, False)
        renumbered = batch.epoch != self.producer_epoch
        if renumbered:
            batch.epoch = self.producer_epoch
            batch.sequence = self._next_sequence.get(batch.tp, 0)
            self._next_sequence[batch.tp] = (batch.sequence + batch.record_count) % SEQUENCES
        return Numbers(self.producer_id, batch.epoch, batch.sequence, renumbered)

    def request_ended(self, batches: Iterable[B]) -> None:
        """The request carrying `batches` is done with (answered, failed or abandoned)."""
        for batch in batches:
            flying = self._in_flight.get(batch.tp)
            if flying is not None:
                flying[:] = [b for b in flying if b is not batch]
                if not flying:
                    del self._in_flight[batch.tp]

    # --- outcomes -----------------------------------------------------------------------

    def acknowledged(self, batch: B, base_offset: int, append_time_ms: int) -> Succeed[B]:
        if self.config.idempotent and batch.epoch >= 0:
            last = _last_sequence(batch)
            acked = self._acked_through.get(batch.tp)
            if (
                acked is None
                or acked[:2] != (self.producer_id, batch.epoch)
                or _after(last, acked[2])
            ):
                self._acked_through[batch.tp] = (self.producer_id, batch.epoch, last)
        batch.fate_unknown = False
        if batch.tp in self._recovering and all(
            b is batch for b in self._in_flight.get(batch.tp, ())
        ):
            self._recovering.discard(batch.tp)
        return Succeed(batch, base_offset, append_time_ms)

    def no_answer(self, batch: B, error: StromError, now_ms: float) -> Outcome[B]:
        """The request failed (no answer: written or not, unknown), or its answer left the
        partition out."""
        batch.fate_unknown = True
        return self._retry_or_fail(batch, error, now_ms)

    def refused(self, batch: B, error: StromError, now_ms: float) -> Outcome[B]:
        """The leader answered the batch with an error."""
        if self._known_written(batch):
            return self.acknowledged(batch, -1, -1)
        # Appended but not replicated in time: written on the leader, maybe kept. Any other
        # error: this attempt was refused, not written; an earlier attempt that got no
        # answer may still be, whoever refuses this one (a deposed leader, say).
        earlier_unknown = batch.fate_unknown
        batch.fate_unknown = earlier_unknown or error.name in _APPENDED_ERRORS
        self._recovering.add(batch.tp)
        idempotent = self.config.idempotent
        if (
            idempotent
            and error.name == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            and self._earlier_unsettled(batch)
        ):
            # Refused because an earlier batch of the partition is not written (yet): it
            # goes again right behind that one, numbers unchanged.
            return self._retry(batch, now_ms, RetryReason.BEHIND_EARLIER, error)
        if idempotent and error.name in _RESET_PRODUCER:
            # The broker lost this producer's state for the partition: a new epoch starts
            # the numbering again.
            self._bump_needed = True
            if earlier_unknown:
                # Renumbered under the new epoch, a batch an earlier attempt may have
                # written would be written twice: it fails instead, as Kafka's producer
                # fails a batch refused so while its partition has an unresolved sequence.
                return Fail(batch, error)
            return self._retry(batch, now_ms, RetryReason.NEW_EPOCH, error)
        if error.retriable:
            return self._retry_or_fail(batch, error, now_ms)
        if idempotent and batch.epoch == self.producer_epoch:
            end = (batch.sequence + batch.record_count) % SEQUENCES
            if not earlier_unknown and self._next_sequence.get(batch.tp) == end:
                # Refused before anything was written and nothing numbered after it: its
                # numbers are free again.
                self._next_sequence[batch.tp] = batch.sequence
            else:
                # Later batches carry numbers after the gap it leaves: start again.
                self._bump_needed = True
        return Fail(batch, error)

    def expired(self, batch: B, now_ms: float, leader: int) -> Succeed[B] | Fail[B]:
        """The batch waited in the queue past delivery.timeout.ms (`leader`: the one the
        metadata names, for the error's sentence)."""
        self._forget_queued(batch)
        if self._known_written(batch):
            return self.acknowledged(batch, -1, -1)
        if self.config.idempotent and batch.epoch >= 0:
            self._bump_needed = True
        if batch.last_error is not None:
            # Waiting to be sent again: the error it kept getting is why it expired.
            why = f"; last error {batch.last_error}"
        else:
            why = f" without being sent (leader {leader})"
        topic, partition = batch.tp
        error = KafkaTimeoutError(
            f"{topic}-{partition}: {batch.record_count} record(s) expired after "
            f"delivery.timeout.ms={self.config.delivery_timeout_ms}{why}"
        )
        error.__cause__ = batch.last_error
        return Fail(batch, error)

    def dropped(self, batch: B) -> None:
        """The pump failed a queued batch itself (a fatal error, the producer closed)."""
        self._forget_queued(batch)

    # --- the rules behind the outcomes --------------------------------------------------

    def _retry_or_fail(self, batch: B, error: StromError, now_ms: float) -> Outcome[B]:
        if self._known_written(batch):
            return self.acknowledged(batch, -1, -1)
        self._recovering.add(batch.tp)
        batch.last_error = error
        waited = now_ms - batch.created_ms
        timed_out = waited > self.config.delivery_timeout_ms
        if batch.attempts > self.config.retries or timed_out:
            if self.config.idempotent:
                # Written or not, nobody knows: numbering cannot go on from here.
                self._bump_needed = True
            if not timed_out:
                return Fail(batch, error)
            topic, partition = batch.tp
            failure = KafkaTimeoutError(
                f"{topic}-{partition}: not delivered after {batch.attempts} attempt(s) in "
                f"{waited:.0f} ms; last error {error}"
            )
            failure.__cause__ = error
            return Fail(batch, failure)
        return self._retry(batch, now_ms + self.config.retry_backoff_ms, RetryReason.BACKOFF, error)

    def _retry(self, batch: B, at_ms: float, reason: RetryReason, error: StromError) -> Retry[B]:
        self._queued(batch)
        return Retry(batch, at_ms, reason, error)

    def _known_written(self, batch: B) -> bool:
        """A later batch of its partition and epoch was acknowledged (see the module doc)."""
        acked = self._acked_through.get(batch.tp)
        if not self.config.idempotent or batch.epoch < 0 or acked is None:
            return False
        producer_id, epoch, through = acked
        return (producer_id, epoch) == (self.producer_id, batch.epoch) and _after(
            through, _last_sequence(batch)
        )

    def _earlier_unsettled(self, batch: B) -> bool:
        """A batch of the same partition sent before `batch` is unanswered or to be resent."""
        tp = batch.tp
        if any(b is not batch and b.order < batch.order for b in self._in_flight.get(tp, ())):
            return True
        return any(0 <= b.order < batch.order for b in self._to_resend.get(tp, ()))

    def _queued(self, batch: B) -> None:
        self._to_resend.setdefault(batch.tp, []).append(batch)

    def _forget_queued(self, batch: B) -> None:
        queue = self._to_resend.get(batch.tp)
        if queue is not None and any(b is batch for b in queue):
            queue[:] = [b for b in queue if b is not batch]
            if not queue:
                del self._to_resend[batch.tp]


def _last_sequence(batch: Batch) -> int:
    return (batch.sequence + batch.record_count - 1) % SEQUENCES


def _after(a: int, b: int) -> bool:
    """Sequence a comes after b (they wrap at 2**31)."""
    return 0 < (a - b) % SEQUENCES < SEQUENCES // 2
