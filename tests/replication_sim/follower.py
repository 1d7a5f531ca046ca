"""A simulated broker's replica fetcher: the product's own FollowerFetch
(broker/follower_fetch.py: which stream follows which partition, what each fetch asks, what
its answer does to each partition, the rests and the broken stream's backoff), pumped as
broker/replica_fetcher.py pumps it over gRPC. One stream per leader broker
(num.replica.fetchers 1) carries every partition this broker follows there: the core's next
fetch goes out on the stream to the leader process (refused after CONNECT_FAIL_MS when that
process is dead; a reply never reaches another incarnation of the follower), the read gives
up after the core's read timeout, a wake-up is set for when the core says a fetch may be
due. What the answers did is counted and traced; nothing is decided here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.follower_fetch import (
    Applied,
    FetchRequest,
    FetchResponse,
    FetchStream,
    FollowerFetch,
    PartitionOutcome,
    StreamKey,
)
from broker.partition import Partition
from broker.replication_settings import ReplicationSettings
from metadata.errors import ApiError
from strom_api.record_batch import parse_header

if TYPE_CHECKING:
    from tests.replication_sim.broker import SimBroker

CONNECT_FAIL_MS = 20  # a connection refused by a dead process comes back about this fast


@dataclass(frozen=True, slots=True)
class FetchCall:
    """A fetch of the follower's core on its stream, between two processes (a reply never
    reaches another incarnation of the follower: its stream died with the process)."""

    follower: int
    follower_incarnation: int
    leader: int
    leader_incarnation: int
    stream: StreamKey
    request: FetchRequest


@dataclass(frozen=True, slots=True)
class HurryCall:
    """ReplicaFetchRequest.hurry on the stream: the leader answers the fetch
    `correlation_id` now, if it still waits."""

    follower: int
    follower_incarnation: int
    leader_incarnation: int
    stream: StreamKey
    correlation_id: int


@dataclass(frozen=True, slots=True)
class FetchReply:
    """What the follower's read on the stream returns: the leader's answer to the fetch
    `correlation_id`, or `broken` (the call failed: reset, refused)."""

    leader: int
    follower_incarnation: int
    stream: StreamKey
    correlation_id: int
    broken: str | None = None
    response: FetchResponse = FetchResponse()


def reset(call: FetchCall) -> FetchReply:
    """The follower's read on a stream whose server process is gone."""
    return FetchReply(
        call.leader, call.follower_incarnation, call.stream, call.request.correlation_id, "reset"
    )


class FollowerPump:
    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        replication = ReplicationSettings(broker.id, broker.replica_config, self._clock_s)
        self.fetch = FollowerFetch(broker.id, broker.replica_config, replication)
        # the transport's state of each stream: the leader incarnation it reaches, the next
        # wake-up set
        self.connected_to: dict[StreamKey, int] = {}
        self.wakes: dict[StreamKey, int] = {}

    def _clock_s(self) -> float:
        return self.broker.world.now_ms / 1000

    @property
    def followed(self) -> list[int]:
        """The leaders whose streams fetch some partition of ours."""
        return sorted({leader for (leader, _), s in self.fetch.streams.items() if s.partitions})

    def follow(self, partition: Partition) -> None:
        """FetcherManager.follow (every leader is reachable at its one address)."""
        stream = self.fetch.follow(partition, lambda leader: f"b{leader}").stream
        if stream is None:
            return
        incarnation = self.connected_to.get(stream.key)
        if incarnation is not None and stream.take_hurry():  # ReplicaFetcher._maybe_hurry
            broker = self.broker
            broker.stats.hurries += 1
            hurry = HurryCall(
                broker.id, broker.incarnation, incarnation, stream.key, stream.correlation_id
            )
            leader = broker.world.brokers[stream.leader_id]
            broker.world.network.send(broker.id, leader.id, leader.handle_hurry, hurry)
        self._pump(stream)

    def _pump(self, stream: FetchStream) -> None:
        """One turn of ReplicaFetcher._run: the core's next fetch, if one is due, goes out on
        the stream (connecting first: a dead leader refuses the connection); else a wake-up
        when the core says one may be due."""
        broker = self.broker
        request = stream.next_fetch(broker.now, broker.broker_epoch)
        if request is None:
            at = stream.wake_at(broker.now)
            if at is not None:
                self._wake(stream, at)
            return
        leader = broker.world.brokers[stream.leader_id]
        incarnation = self.connected_to.get(stream.key)
        if incarnation is None:
            if not leader.alive:
                why = "connection refused"
                refused = FetchReply(
                    leader.id, broker.incarnation, stream.key, request.correlation_id, why
                )
                broker.later(CONNECT_FAIL_MS, self.answered, refused)
                return
            incarnation = self.connected_to[stream.key] = leader.incarnation
        broker.stats.fetches += 1
        broker.stats.multi_partition_fetches += len(stream.sent) > 1
        broker.stats.incremental_fetches += (request.session_epoch or 0) > 0
        call = FetchCall(broker.id, broker.incarnation, leader.id, incarnation, stream.key, request)
        broker.world.network.send(broker.id, leader.id, leader.handle_fetch, call)
        broker.later(stream.read_timeout_ms, self._timeout, stream.key, request.correlation_id)

    def _wake(self, stream: FetchStream, at_ms: int) -> None:
        pending = self.wakes.get(stream.key)
        if pending is not None and pending <= at_ms:
            return  # an earlier wake-up is set already
        self.wakes[stream.key] = at_ms
        self.broker.later(at_ms - self.broker.now, self._woken, stream.key, at_ms)

    def _woken(self, key: StreamKey, at_ms: int) -> None:
        if self.wakes.get(key) != at_ms:
            return
        del self.wakes[key]
        stream = self.fetch.streams.get(key)
        if stream is not None:
            self._pump(stream)

    def _timeout(self, key: StreamKey, correlation_id: int) -> None:
        stream = self.fetch.streams.get(key)
        if stream is not None and stream.awaiting(correlation_id):
            self._break(stream, "read timed out")

    def break_stream(self, leader_id: int) -> None:
        """A fault: the streams to `leader_id` fail now (a reset connection)."""
        for (leader, _), stream in self.fetch.streams.items():
            if leader == leader_id:
                self._break(stream, "connection reset (fault)")

    def _break(self, stream: FetchStream, why: str) -> None:
        broker = self.broker
        broker.stats.broken_streams += 1
        broker.trace(f"fetch stream to {stream.leader_id} broke: {why}; backoff")
        self.connected_to.pop(stream.key, None)
        self._wake(stream, stream.broken(broker.now, why))

    def answered(self, reply: FetchReply) -> None:
        """ReplicaFetcher: the read returned (or failed) on the stream."""
        stream = self.fetch.streams.get(reply.stream)
        if stream is None or not stream.awaiting(reply.correlation_id):
            self.broker.stats.stale_answers += 1  # of a fetch given up with its stream
            return
        if reply.broken is not None:
            self._break(stream, reply.broken)
            return
        answered = stream.answered(reply.correlation_id, reply.response, self.broker.now)
        for outcome in answered.outcomes:
            self._applied(stream, outcome)
        if answered.broken is not None:
            self._break(stream, answered.broken)
            return
        self._pump(stream)

    def _applied(self, stream: FetchStream, o: PartitionOutcome) -> None:
        """The stats and the trace of what the core did with one partition's answer."""
        broker, answer = self.broker, o.answer
        name = o.partition.name
        if o.applied is Applied.STALE:
            broker.stats.stale_answers += 1  # the partition moved on while the fetch was out
        elif o.applied is Applied.FAILED:
            assert o.cause is not None
            raise o.cause  # no disk fails here: a bug of the code under test
        elif o.applied is Applied.RESTARTED:
            broker.stats.restarts_at += 1
            start = answer.log_start_offset
            broker.trace(f"{name} behind the leader's log start {start}: restarted")
        elif o.applied is Applied.TRUNCATED:
            self._truncated(o.fetch_offset, o.log_end_offset)
        elif o.applied is Applied.DIVERGED:
            assert answer.diverging is not None
            self._truncated(o.fetch_offset, o.log_end_offset)
            broker.trace(
                f"{name} diverged from {stream.leader_id} at epoch {answer.diverging[0]} (end "
                f"{answer.diverging[1]}): log end {o.fetch_offset} -> {o.log_end_offset}"
            )
        elif o.applied is Applied.RESTING and isinstance(o.cause, ApiError):
            broker.trace(f"{name}: answer from {stream.leader_id} not applied: {o.cause}; rest")
            if (
                o.cause.error_name == "INVALID_RECORD"
                and answer.records
                and parse_header(answer.records).base_offset < o.fetch_offset
            ):
                # The leader's first batch starts below our log end: its log start (a
                # DeleteRecords offset) is inside that batch, and we were not told to
                # truncate. An empty log restarts at the batch (Partition.append_as_follower,
                # as Kafka's follower); a non-empty one is refused again at every fetch.
                broker.stats.mid_batch_refusals += 1

    def _truncated(self, before: int, after: int) -> None:
        if after < before:
            self.broker.stats.truncations += 1
            self.broker.stats.truncated_records += before - after
