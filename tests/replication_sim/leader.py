"""A simulated broker's leader side: follower fetches, produces, consumer reads and
DeleteRecords on the partitions it leads. Follower fetches and acks=all produces wait in the
product's Purgatory (broker/purgatory.py: when a long poll is answered, what a waiting
produce answers and when), pumped as ReplicaManager pumps it: a partition's change reaches
it on the next turn of the loop, a wake-up is set at its next deadline. A follower fetch
is read by the product's broker/follower_reads.py (each partition it names within what is
left of the request's max bytes, each read followed by the ISR check, isr.py) under the
product's fetch session rules (broker/replica_sessions.py over a FetchSessionCache, kept in
the process's memory: a restart loses the sessions, as the node's do); DeleteRecords
(server/requests/delete_records.py) moves the leader's log start, then writes the offset
checkpoints before answering.
"""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING, Any

from broker.fetch_sessions import FetchSessionCache
from broker.follower_reads import NEW_REPLICA_KEY, read_follower_fetch, read_summary
from broker.partition import LeaderAppend, Partition
from broker.purgatory import (
    DelayedFetch,
    DelayedOperation,
    DelayedProduce,
    Purgatory,
)
from broker.replica_sessions import FollowerSessions, SessionFetch
from broker.replication_quota import ReplicationQuota
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode
from tests.replication_sim.clients import PRODUCER_STATE_ERRORS
from tests.replication_sim.controller import TopicPartition
from tests.replication_sim.follower import FetchCall, FetchReply, HurryCall, reset

if TYPE_CHECKING:
    from tests.replication_sim.broker import SimBroker


class LeaderSide:
    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        # The product's purgatory, the requests of its parked operations (a produce: the
        # clients.ProduceRequest and its append), and the wake-up set
        self.purgatory = Purgatory()
        self.quota = ReplicationQuota(clock=lambda: broker.now / 1000)
        self.fetches: dict[DelayedFetch, tuple[FetchCall, SessionFetch]] = {}
        # The product's follower fetch sessions, in a cache of Kafka's default size
        seed = broker.world.rngs["fetch sessions"].getrandbits(64)
        self.sessions = FollowerSessions(FetchSessionCache(1000, 120_000, random.Random(seed)))
        self.produces: dict[DelayedProduce, tuple[Any, TopicPartition, LeaderAppend]] = {}
        self.wake: int | None = None
        self.changed: dict[TopicPartition, None] = {}  # partitions changed this turn

    def drop_all(self) -> None:
        """The process stops: parked fetches' streams break, parked produces' calls fail."""
        broker = self.broker
        network = broker.world.network
        for op in self.purgatory.drop_all():
            if isinstance(op, DelayedFetch):  # their streams break: the followers see a reset
                call = self.fetches[op][0]
                follower = broker.world.brokers[call.follower]
                network.send(broker.id, follower.id, follower.handle_fetch_answer, reset(call))
            else:
                self.produces[op][0].fail("connection reset")

    # --- follower fetches (ReplicaManager.replica_fetch) -----------------------------------

    def handle_fetch(self, call: FetchCall) -> None:
        request = call.request
        now = self.broker.now
        session = self.sessions.begin(request, now, self.broker.wall)
        if session.error is not None:
            self._reply(call, self.sessions.finish(session, [], now))
            return
        fetch = self.purgatory.follower_fetch(request.max_wait_ms, request.min_bytes, now)
        self.fetches[fetch] = (call, session)
        self._serve_fetch(fetch)
        self._arm()

    def handle_hurry(self, hurry: HurryCall) -> None:
        """ReplicaServicer: a hurry read while the stream's fetch waits answers it now; one
        that finds none waiting (answered already, or from another incarnation) is
        ignored."""
        for fetch, (call, _) in self.fetches.items():
            if (
                call.follower == hurry.follower
                and call.follower_incarnation == hurry.follower_incarnation
                and call.stream == hurry.stream
                and call.request.correlation_id == hurry.correlation_id
            ):
                self._decided(self.purgatory.hurry(fetch, self.broker.now))
                self._arm()
                return

    def _serve_fetch(self, fetch: DelayedFetch) -> None:
        """One read of ReplicaManager.replica_fetch; answered if the purgatory says so."""
        broker = self.broker
        call, session = self.fetches[fetch]
        request = self.sessions.to_read(session)
        # The product's read of the fetch (ReplicaManager._read_for_follower); this model
        # sets no replication throttle, so the quota (unlimited) never holds records back.
        answers, held_back = read_follower_fetch(
            request,
            lambda topic_id, index: broker.replicas.by_id.get((topic_id, index)),
            request.max_bytes,
            self.quota,
            broker.wall,
            broker.id,
            broker.isr.maybe_change,
        )
        summary = read_summary(answers, self.quota, held_back)
        if session.wait_keys:
            summary = dataclasses.replace(summary, keys=summary.keys + session.wait_keys)
        if not self.purgatory.fetch_read(fetch, summary, broker.now):
            return  # parked
        del self.fetches[fetch]
        self._reply(call, self.sessions.finish(session, answers, broker.now))

    def _reply(self, call: FetchCall, response: Any) -> None:
        broker = self.broker
        follower = broker.world.brokers[call.follower]
        reply = FetchReply(
            broker.id,
            call.follower_incarnation,
            call.stream,
            call.request.correlation_id,
            response=response,
        )
        broker.world.network.send(broker.id, follower.id, follower.handle_fetch_answer, reply)

    # --- the purgatory's pump (ReplicaManager._fire, _drain_changes, _arm, _expire) ---------

    def partition_changed(self, tp: TopicPartition) -> None:
        """Partition.on_change (ReplicaManager._fire): the follower sessions holding the
        partition hear of it now; waiting produces and parked fetches look again on the next
        turn of the (simulated) event loop."""
        partition = self.broker.replicas.partitions.get(tp)
        if partition is not None:
            for key in self.sessions.changed(partition):
                self._wake_key(key)
        self._wake_key(tp)

    def replica_created(self) -> None:
        """ReplicaManager._apply's wake for a new replica: follower fetches that named it
        before this broker held it (follower_reads.follower_ahead) read again."""
        self._wake_key(NEW_REPLICA_KEY)

    def _wake_key(self, tp: TopicPartition) -> None:
        if self.purgatory.watched(tp):
            if not self.changed:
                self.broker.later(0, self._drain_changes)
            self.changed[tp] = None

    def _drain_changes(self) -> None:
        changed, self.changed = self.changed, {}
        for tp in changed:
            self._decided(self.purgatory.changed(tp, self.broker.now))
        self._arm()

    def _decided(self, ops: list[DelayedOperation]) -> None:
        """What the purgatory decided: produces to answer, fetches to read again."""
        for op in ops:
            if isinstance(op, DelayedFetch):
                self._serve_fetch(op)
            else:
                self._answer_produce(op, *self.produces.pop(op))

    def _arm(self) -> None:
        """ReplicaManager._arm: one wake-up, at the purgatory's next deadline."""
        at = self.purgatory.next_wake_ms()
        if at is not None and at != self.wake:
            self.wake = at
            self.broker.later(at - self.broker.now, self._expire, at)

    def _expire(self, at: int) -> None:
        if self.wake != at:
            return  # a wake-up set again since
        self.wake = None
        self._decided(self.purgatory.expire(self.broker.now))
        self._arm()

    # --- producers and consumers ----------------------------------------------------------

    def leader_partition(self, tp: TopicPartition) -> Partition:
        """ReplicaManager.leader_partition."""
        partition = self.broker.replicas.partitions.get(tp)
        if partition is not None and partition.is_leader:
            return partition
        registration = self.broker.image.topics.partition(*tp)
        if registration is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition here")
        if not registration.has_leader:
            raise ApiError(ErrorCode.LEADER_NOT_AVAILABLE, "no leader right now")
        raise ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"the leader is {registration.leader}")

    def handle_produce(self, request: Any) -> None:
        broker = self.broker
        tp = request.tp
        try:
            partition = self.leader_partition(tp)
            append = partition.append_as_leader(request.records, request.acks, broker.wall)
        except ApiError as exc:
            if exc.error_name in PRODUCER_STATE_ERRORS and request.producer.idempotent:
                broker.world.checker.producer_state_error(broker, request, exc)
            request.answer(broker, None, exc.error_name)
            return
        broker.trace(
            f"append {request.describe()} at {append.base_offset}..."
            f"{append.next_offset - 1} (le {append.leader_epoch}"
            + (", duplicate)" if append.duplicate else ")")
        )
        if request.acks != -1:
            request.answer(broker, append, None)
            return
        op = self.purgatory.produce([(tp, partition, append)], request.timeout_ms, broker.now)
        if op.done:
            self._answer_produce(op, request, tp, append)
            return
        self.produces[op] = (request, tp, append)
        self._arm()

    def _answer_produce(
        self, op: DelayedProduce, request: Any, tp: TopicPartition, append: LeaderAppend
    ) -> None:
        """ReplicaManager._await_replication's answer, as the purgatory decided it."""
        error = op.results[tp]
        if error is not None:
            request.answer(self.broker, None, error.error_name)
            return
        self.broker.world.checker.acknowledged(self.broker, request, append)
        request.answer(self.broker, append, None)

    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """server/requests/delete_records.py for one partition (an admin's request; its answer is
        not modelled): the leader moves its log start (Partition.delete_records_before, which
        persists the truncated leader epoch cache at once), then writes the offset checkpoints
        (persist_offsets -> Node._checkpoint_now, in a thread: a later turn of the event loop)
        and only then answers. Raises the ApiError the request would be answered with."""
        partition = self.leader_partition(tp)
        start = partition.delete_records_before(offset)
        self.broker.later(0, self.broker.replicas.checkpoint)
        return start

    def handle_consume(self, request: Any) -> None:
        broker = self.broker
        try:
            partition = self.leader_partition(request.tp)
            records = partition.read_for_consumer(request.offset, request.max_bytes)
        except ApiError as exc:
            request.answer(broker, None, exc.error_name)
            return
        broker.world.checker.consumed(broker, request, records, partition.log.high_watermark)
        request.answer(broker, records, None)
