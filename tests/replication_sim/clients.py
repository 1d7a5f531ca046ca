"""Producers and consumers over every partition, talking to whichever broker their (possibly
stale) metadata names as each partition's leader.

A client learns the leader as a real one does, from some live broker's metadata (which may lag
the controller's), and refreshes it after NOT_LEADER_OR_FOLLOWER and friends. Requests and
answers cross the simulated network as RPCs (they may be lost; the client then times out).

Producers run strom/sender.py's loop on the simulated clock (a queue of batches per
partition, requests in flight; each batch goes to a partition drawn from the producer's
stream, and each request carries one batch) and follow the client's own sending rules: they drive
strom/producer_sequencing.py, the class strom/sender.py pumps, with answers decoded as the
client decodes the servicer's (server.api_errors.make_error, then strom.errors.from_pb). What
to send and resend, with which producer id, epoch and sequence (per partition, as the client
numbers them), and when to give up or bump the epoch is decided there, not here:
- plain ones (retries=0, one batch at a time) send acks=all or acks=1 batches of 1-3 records,
  every value unique in the run, and never resend a failed batch (the next batch has new
  values), so no value may ever appear twice in a log;
- idempotent ones (acks=all, as Kafka requires; retries until delivery.timeout.ms) have up to
  5 batches in flight (max.in.flight.requests.per.connection; half of them 1; the client
  allows 5 times as many, which the leaders remember too, but more batches here would
  change every seed's run, and the mutation tests' seeds with them), which is where
  most of the rules show: out of order behind an earlier batch, a batch known written by a
  later acknowledgement, batches of unknown fate resolved before an epoch bump. InitProducerId
  is answered by a stand-in for the broker's coordinator, which the simulation does not
  model: the producer's fixed id, the next epoch (KIP-360).
Consumers read a partition drawn at random from its leader, at random offsets up to the high
watermark they last saw there.
What the brokers acknowledge and serve is recorded by the checker when the broker decides it,
not when the answer arrives.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.partition import LeaderAppend
from server.api_errors import make_error
from strom.errors import StromError, from_pb
from strom.producer_sequencing import (
    STALE_METADATA,
    Numbers,
    Outcome,
    ProducerSequencing,
    Retry,
    SendStep,
    SequencingConfig,
    Succeed,
)
from strom_api.records import Record, encode_batch
from tests.replication_sim.controller import TopicPartition
from tests.replication_sim.network import CLIENTS

if TYPE_CHECKING:
    from tests.replication_sim.broker import SimBroker
    from tests.replication_sim.world import World

RETRY_BACKOFF_MS = 100
MAX_IN_FLIGHT = 5  # Kafka's default max.in.flight.requests.per.connection
CLIENT_TIMEOUT_EXTRA_MS = 1_000
# Kafka's default retries: an idempotent producer retries until delivery.timeout.ms.
IDEMPOTENT_RETRIES = 2**31 - 1
# Errors that say the producer's state on the partition is not what it wrote: never expected
# from the current leader, whose log holds every acknowledged batch (checker.py (8)).
PRODUCER_STATE_ERRORS = frozenset(
    {"OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID", "INVALID_PRODUCER_EPOCH"}
)


def leaders_from_metadata(world: World, rng: random.Random) -> dict[TopicPartition, int]:
    """A metadata request to a random live broker: the leaders its image names."""
    live = [b for b in world.brokers.values() if b.alive]
    if not live:
        return {}
    image = rng.choice(live).image
    leaders = {}
    for tp in world.controller.partitions:
        registration = image.topics.partition(*tp)
        if registration is not None and registration.leader >= 0:
            leaders[tp] = registration.leader
    return leaders


def leader_from_metadata(world: World, rng: random.Random, tp: TopicPartition) -> int | None:
    """A metadata request to a random live broker: the leader its image names for `tp`."""
    return leaders_from_metadata(world, rng).get(tp)


@dataclass
class ClientStats:
    batches: int = 0
    acked_all: int = 0
    acked_one: int = 0
    acked_records: int = 0
    duplicates_answered: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    reads: int = 0
    records_read: int = 0
    abandoned: int = 0


@dataclass(eq=False)
class Batch:
    """A producer's batch: its values, and the fields the sequencing rules keep
    (strom.producer_sequencing.Batch)."""

    number: int
    tp: TopicPartition
    values: list[bytes]
    acks: int
    created_ms: float
    retry_at_ms: float = 0.0  # when it may leave again, after a retry was decided
    attempts: int = 0
    epoch: int = -1
    sequence: int = -1
    order: int = -1
    fate_unknown: bool = False
    last_error: Exception | None = None

    @property
    def record_count(self) -> int:
        return len(self.values)


class ProduceRequest:
    def __init__(
        self, producer: Producer, batch: Batch, broker: SimBroker, timeout_ms: int, numbers: Numbers
    ) -> None:
        self.producer = producer
        self.batch = batch
        self.numbers = numbers
        self.tp = batch.tp
        self.broker_id = broker.id
        self.incarnation = broker.incarnation
        self.acks = batch.acks
        self.values = batch.values
        self.timeout_ms = timeout_ms
        world = producer.world
        records = [Record(i, world.wall_ms, None, v) for i, v in enumerate(batch.values)]
        self.records = encode_batch(
            records,
            producer_id=numbers.producer_id,
            producer_epoch=numbers.epoch,
            base_sequence=numbers.sequence,
        )

    def describe(self) -> str:
        p, n = self.producer, self.numbers
        text = (
            f"p{p.index}#{self.batch.number} to {self.tp[0]}-{self.tp[1]} acks={self.acks} "
            f"x{len(self.values)}"
        )
        if p.idempotent:
            text += f" pid={n.producer_id} e{n.epoch} seq={n.sequence}"
        return text

    def answer(self, broker: SimBroker, append: LeaderAppend | None, error: str | None) -> None:
        world = self.producer.world
        world.network.send(
            broker.id, CLIENTS, self.producer.on_answer, self, append, error, lossy=True
        )

    def fail(self, why: str) -> None:
        world = self.producer.world
        world.network.send(self.broker_id, CLIENTS, self.producer.on_answer, self, None, why)


class Producer:
    """strom/sender.py's loop on the simulated clock: a queue of batches per partition
    (RecordAccumulator's, resends ahead of new batches in first-sent order), requests in
    flight, and the rules deciding what leaves and what each answer means."""

    def __init__(self, world: World, index: int, idempotent: bool, rng: random.Random) -> None:
        self.world = world
        self.index = index
        self.idempotent = idempotent
        self.rng = rng
        # Kafka's max.in.flight.requests.per.connection, for idempotent producers (whose
        # sequencing rules pipelining exercises): its default, or one at a time. Plain ones
        # send one batch at a time, so that a run's volume stays about what it was.
        self.max_in_flight = rng.choice((1, MAX_IN_FLIGHT)) if idempotent else 1
        # The id the coordinator stand-in grants (_init_producer_id).
        self.producer_id = 1000 + index if idempotent else -1
        self.batches = 0
        self.unsettled = 0  # batches made and not yet acknowledged or failed
        # waiting to be sent (again), per partition
        self.queues: dict[TopicPartition, list[Batch]] = {}
        self.requests: list[ProduceRequest] = []  # in flight
        self.leaders: dict[TopicPartition, int] = {}  # as its metadata last said
        self.active = False
        self.stats = world.client_stats
        self.delivery_timeout_ms = 4 * world.plan.produce_timeout_ms
        self.rules: ProducerSequencing[Batch] = self._rules()
        # In the current producer epoch, per partition: the last sequence acknowledged, and
        # where the last batch acknowledged with its offsets ends (checker.py (8)).
        self.acked_sequence: dict[TopicPartition, int] = {}
        self.last_acked_offset: dict[TopicPartition, int] = {}
        self.limit: int | None = None  # stop after this many acknowledged batches
        self.acked = 0
        self._ticking = False  # a _next is scheduled
        self._wake_at: int | None = None  # a _send_ready is scheduled then

    def _rules(self) -> ProducerSequencing[Batch]:
        return ProducerSequencing(
            SequencingConfig(
                idempotent=self.idempotent,
                retries=IDEMPOTENT_RETRIES if self.idempotent else 0,
                delivery_timeout_ms=self.delivery_timeout_ms,
                retry_backoff_ms=RETRY_BACKOFF_MS,
                max_in_flight=self.max_in_flight,
            )
        )

    def start(self) -> None:
        self.active = True
        self.rules = self._rules()  # with the delivery timeout as set by now
        self._tick(self.rng.randint(0, self.world.plan.produce_every_ms))

    def stop(self) -> None:
        self.active = False

    def _later(self, delay_ms: float, action: Any, *args: Any) -> None:
        self.world.queue.after(max(0, math.ceil(delay_ms)), action, *args)

    @property
    def idle(self) -> bool:
        return self.unsettled == 0

    def in_order_after_acks(self, request: ProduceRequest) -> int | None:
        """For checker.py (8): when `request` is still awaited and every batch of its producer
        epoch numbered before it was acknowledged, where the last one acknowledged with its
        offsets ends; else None."""
        n = request.numbers
        if (
            request not in self.requests
            or n.epoch != self.rules.producer_epoch
            or n.sequence != self.acked_sequence.get(request.tp, -1) + 1
        ):
            return None
        return self.last_acked_offset.get(request.tp)

    def _think_ms(self) -> int:
        """The pause before the next batch: about produce_every_ms; twice that for a
        pipelining producer, which does not wait for answers in between, so that a run's
        volume (and its checking time) stays about what it was with one batch at a time."""
        pause = self.rng.randint(1, 2 * self.world.plan.produce_every_ms)
        return pause if self.max_in_flight == 1 else 2 * pause

    def _tick(self, delay_ms: int) -> None:
        if not self._ticking:
            self._ticking = True
            self._later(delay_ms, self._next)

    def _next(self) -> None:
        """A new batch now and then, while fewer than max_in_flight are unsettled (the
        ticking resumes when one settles)."""
        self._ticking = False
        if self.limit is not None and self.acked >= self.limit:
            self.active = False
        if not self.active:
            return
        if self.unsettled < self.max_in_flight:
            self.batches += 1
            self.stats.batches += 1
            self.unsettled += 1
            count = self.rng.randint(1, 3)
            values = [f"p{self.index}-{self.batches}-{i}".encode() for i in range(count)]
            acks = -1 if self.idempotent or self.rng.random() < self.world.plan.acks_all else 1
            tp = self.rng.choice(self.world.controller.partitions)
            batch = Batch(self.batches, tp, values, acks, created_ms=self.world.now_ms)
            self.queues.setdefault(tp, []).append(batch)
        if self.unsettled < self.max_in_flight:
            self._tick(self._think_ms())
        self._send_ready()

    def _wake(self, at_ms: float) -> None:
        """_send_ready at `at_ms`, unless one is due by then already."""
        at = math.ceil(at_ms)
        if self._wake_at is not None and self.world.now_ms <= self._wake_at <= at:
            return
        self._wake_at = at
        self._later(at - self.world.now_ms, self._woken, at)

    def _woken(self, at: int) -> None:
        if self._wake_at == at:
            self._wake_at = None
        self._send_ready()

    def _send_ready(self) -> None:
        """One turn of strom/sender.py's loop: expire, ask the rules, drain, send."""
        rules, now = self.rules, self.world.now_ms
        busy = rules.busy_partitions()
        for tp, queue in self.queues.items():  # RecordAccumulator.expire: not while busy
            while queue and tp not in busy:
                if now - queue[0].created_ms <= self.delivery_timeout_ms:
                    break
                batch = queue.pop(0)
                self._settle(rules.expired(batch, now, self.leaders.get(tp, -1)))
        step = rules.send_step()
        if step is SendStep.WAIT:
            return
        if step is SendStep.INIT_PRODUCER_ID:
            self._init_producer_id()
        drained: list[Batch] = []
        for tp, queue in self.queues.items():  # RecordAccumulator.drain
            free = rules.room(tp)
            while free > 0 and queue:
                batch = queue[0]
                if step is SendStep.RESOLVE_UNKNOWN and not rules.resolving(batch):
                    break
                if batch.retry_at_ms > now:
                    self._wake(batch.retry_at_ms)
                    break
                drained.append(queue.pop(0))
                free -= 1
        if any(b.tp not in self.leaders for b in drained):
            # one metadata look per turn, as the Sender's
            self.leaders.update(leaders_from_metadata(self.world, self.rng))
        for batch in drained:
            rules.drained(batch)
            leader = self.leaders.get(batch.tp)
            if leader is None:
                batch.retry_at_ms = rules.put_back(batch, now)
                self._requeue(batch)
                self._wake(batch.retry_at_ms)
                continue
            rules.dispatched(batch)
            self._send(batch, self.world.brokers[leader], rules.sending(batch))

    def _send(self, batch: Batch, broker: SimBroker, numbers: Numbers) -> None:
        request = ProduceRequest(self, batch, broker, self.world.plan.produce_timeout_ms, numbers)
        self.requests.append(request)
        timeout = request.timeout_ms + CLIENT_TIMEOUT_EXTRA_MS
        if not broker.alive:
            request.fail("connection refused")
        else:
            deadline = self.world.now_ms + timeout
            self.world.network.send(
                CLIENTS, broker.id, broker.handle_produce, request, lossy=True, deadline_ms=deadline
            )
        self._later(timeout, self._client_timeout, request)

    def _requeue(self, batch: Batch) -> None:
        """RecordAccumulator.requeue: in first-sent order, ahead of batches never sent."""
        queue = self.queues.setdefault(batch.tp, [])
        at = 0
        while at < len(queue) and 0 <= queue[at].order < batch.order:
            at += 1
        queue.insert(at, batch)

    def _init_producer_id(self) -> None:
        """The coordinator stand-in: the first epoch, then the next one (KIP-360's bump)."""
        rules = self.rules
        epoch = 0 if rules.producer_id < 0 else rules.producer_epoch + 1
        rules.producer_id_granted(self.producer_id, epoch)
        self.world.trace.record(f"p{self.index}: producer id {self.producer_id} epoch {epoch}")
        self.acked_sequence, self.last_acked_offset = {}, {}

    def _client_timeout(self, request: ProduceRequest) -> None:
        if request in self.requests:
            self.on_answer(request, None, "client timeout")

    def on_answer(
        self, request: ProduceRequest, append: LeaderAppend | None, error: str | None
    ) -> None:
        if request not in self.requests:
            return  # a late answer to a request the producer gave up on
        self.requests.remove(request)
        batch, rules, now = request.batch, self.rules, self.world.now_ms
        outcome: Outcome[Batch]
        if error is None:
            assert append is not None
            self.stats.duplicates_answered += int(append.duplicate)
            n, tp = request.numbers, batch.tp
            if self.idempotent and n.epoch == rules.producer_epoch:
                last = n.sequence + len(batch.values) - 1
                if last > self.acked_sequence.get(tp, -1):
                    self.acked_sequence[tp] = last
                    self.last_acked_offset[tp] = append.next_offset - 1
            outcome = rules.acknowledged(batch, append.base_offset, -1)
        elif error.startswith(("connection", "client")):  # the RPC failed: no answer
            self.stats.errors[error] += 1
            self._forget(request.broker_id)
            failed = StromError("NETWORK_EXCEPTION", f"broker {request.broker_id}: {error}", True)
            outcome = rules.no_answer(batch, failed, now)
        else:
            self.stats.errors[error] += 1
            answered = from_pb(make_error(error, "refused by the simulated broker"))
            outcome = rules.refused(batch, answered, now)
            if not isinstance(outcome, Succeed) and answered.name in STALE_METADATA:
                self.leaders.pop(batch.tp, None)
        rules.request_ended([batch])
        self._settle(outcome)
        self._send_ready()

    def _forget(self, broker_id: int) -> None:
        """The broker did not answer: what the metadata said it leads is looked up again."""
        for tp in [tp for tp, leader in self.leaders.items() if leader == broker_id]:
            del self.leaders[tp]

    def _settle(self, outcome: Outcome[Batch]) -> None:
        batch = outcome.batch
        if isinstance(outcome, Retry):
            batch.retry_at_ms = outcome.at_ms
            self._requeue(batch)
            self._wake(outcome.at_ms)
            return
        self.unsettled -= 1
        if isinstance(outcome, Succeed):
            if batch.acks == -1:
                self.stats.acked_all += 1
            else:
                self.stats.acked_one += 1
            self.stats.acked_records += len(batch.values)
            self.acked += 1
            self._tick(self._think_ms())
            return
        if self.idempotent:
            self.stats.abandoned += 1
        self._tick(RETRY_BACKOFF_MS)


class ConsumeRequest:
    def __init__(
        self,
        consumer: Consumer,
        broker: SimBroker,
        tp: TopicPartition,
        offset: int,
        max_bytes: int,
    ) -> None:
        self.consumer = consumer
        self.tp = tp
        self.broker_id = broker.id
        self.incarnation = broker.incarnation
        self.offset = offset
        self.max_bytes = max_bytes

    def answer(self, broker: SimBroker, records: bytes | None, error: str | None) -> None:
        hw = start = -1
        partition = broker.partition_of(self.tp)
        if partition is not None:
            hw, start = partition.log.high_watermark, partition.log.log_start_offset
        world = self.consumer.world
        on_answer = self.consumer.on_answer
        world.network.send(broker.id, CLIENTS, on_answer, self, hw, start, error, lossy=True)

    def fail(self, why: str) -> None:
        world = self.consumer.world
        world.network.send(self.broker_id, CLIENTS, self.consumer.on_answer, self, -1, -1, why)


class Consumer:
    def __init__(self, world: World, index: int, rng: random.Random) -> None:
        self.world = world
        self.index = index
        self.rng = rng
        # per partition, as its last answers said: the leader, the high watermark, the
        # log start
        self.leaders: dict[TopicPartition, int] = {}
        self.high_watermark: dict[TopicPartition, int] = {}
        self.log_start: dict[TopicPartition, int] = {}
        self.in_flight: ConsumeRequest | None = None
        self.active = False

    def start(self) -> None:
        self.active = True
        self.world.queue.after(self.rng.randint(0, self.world.plan.consume_every_ms), self._next)

    def stop(self) -> None:
        self.active = False

    def _next(self) -> None:
        if not self.active:
            return
        self.world.queue.after(
            self.rng.randint(1, 2 * self.world.plan.consume_every_ms), self._next
        )
        if self.in_flight is not None:
            return
        tp = self.rng.choice(self.world.controller.partitions)
        if tp not in self.leaders:
            self.leaders.update(leaders_from_metadata(self.world, self.rng))
            if tp not in self.leaders:
                return
        broker = self.world.brokers[self.leaders[tp]]
        if not broker.alive:
            del self.leaders[tp]
            return
        low = self.log_start.get(tp, 0)
        hw = max(self.high_watermark.get(tp, 0), low)
        offset = (
            self.rng.randint(max(low, hw - 30), hw)
            if self.rng.random() < 0.7
            else self.rng.randint(low, hw)
        )
        size = self.rng.choice((100, 1_000, 20_000))
        request = ConsumeRequest(self, broker, tp, offset, size)
        self.in_flight = request
        self.world.network.send(CLIENTS, broker.id, broker.handle_consume, request, lossy=True)
        self.world.queue.after(2_000, self._timeout, request)

    def _timeout(self, request: ConsumeRequest) -> None:
        if self.in_flight is request:
            self.in_flight = None
            self.leaders.pop(request.tp, None)

    def on_answer(self, request: ConsumeRequest, hw: int, start: int, error: str | None) -> None:
        if self.in_flight is not request:
            return
        self.in_flight = None
        tp = request.tp
        if hw >= 0:
            self.high_watermark[tp], self.log_start[tp] = hw, start
        if error is not None and error != "OFFSET_OUT_OF_RANGE":
            self.leaders.pop(tp, None)
