"""The leader's side of follower fetch sessions (KIP-227 on the replica fetch streams, issue
21; docs/architecture.md §6), sans-I/O: what one follower fetch reads and answers, given the
broker's one FetchSessionCache (broker/fetch_sessions.py). ReplicaManager.replica_fetch and
the replication simulator's leaders (tests/replication_sim/leader.py) both run it around
broker/follower_reads.py's read and the purgatory's long poll.

- A follower's fetch carries Kafka's session fields. Epoch 0 is a full fetch: the partitions
  it names are read, and the answer opens a session (when a slot is free) that follows
  changes; -1 (or no session fields: an older follower) a sessionless one; any other epoch is
  incremental, and names only the partitions whose fetch state changed (and forgets those
  it no longer fetches). A session error is the answer's whole-response error, and the
  follower's next fetch is a full one.
- An incremental fetch reads the partitions it names plus those changed since they were
  last read (`changed` is called on every change of a partition: new records, a high
  watermark or log start moved, a leader, replica set or ISR change). Each look of its long
  poll takes the changes that arrived meanwhile, and it waits on the session's own key in
  the purgatory, so a change of any of its partitions wakes it and nothing else does. An
  idle partition costs the leader nothing per fetch.
- The answer of an incremental fetch carries only the partitions with news (records, an
  error, a diverging epoch, a high watermark or log start that moved).
- A follower stands at its cached fetch offset for every partition of its session at each
  of its fetches. A partition that changes tells the leader so, as of the session's last
  fetch (PartitionLeader.on_follower_standing), before the change counts: so a follower of
  an idle partition is not taken for one that stopped fetching when records arrive.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.fetch_sessions import (
    FINAL_EPOCH,
    NO_SESSION,
    ContextKind,
    FetchContext,
    FetchSessionCache,
    FetchState,
    PartitionKey,
    PartitionNews,
)
from broker.follower_fetch import FetchRequest, FetchResponse, PartitionFetch
from broker.follower_reads import FollowerAnswer, fetch_response
from broker.partition import FollowerRead, Partition
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode

TopicPartition = tuple[str, int]


def session_wait_key(session_id: int) -> TopicPartition:
    """The purgatory key a session's long poll waits on: an empty topic name names no
    topic (Kafka's topic names have at least one character)."""
    return ("", session_id)


def _state(item: PartitionFetch) -> FetchState:
    return FetchState(
        item.fetch_offset,
        item.partition_max_bytes,
        item.current_leader_epoch,
        item.last_fetched_epoch,
        item.log_start_offset,
    )


def _item(key: PartitionKey, state: FetchState) -> PartitionFetch:
    topic_id, index = key
    assert isinstance(topic_id, bytes)
    return PartitionFetch(
        topic_id,
        index,
        state.current_leader_epoch,
        state.fetch_offset,
        state.last_fetched_epoch,
        state.log_start_offset,
        state.max_bytes,
    )


def _news(
    item: PartitionFetch, partition: Partition | None, read: FollowerRead | ApiError, replica: int
) -> PartitionNews:
    if isinstance(read, ApiError):
        log = partition.log if partition is not None else None
        return PartitionNews(
            has_records=False,
            has_error=True,
            high_watermark=log.high_watermark if log is not None else -1,
            last_stable_offset=log.high_watermark if log is not None else -1,
            log_start_offset=log.log_start_offset if log is not None else -1,
        )
    diverging = read.diverging is not None
    return PartitionNews(
        has_records=bool(read.records),
        has_error=False,
        high_watermark=read.high_watermark,
        last_stable_offset=read.high_watermark,  # no transactions: the high watermark
        log_start_offset=read.log_start_offset,
        diverging=diverging,
        # Read it again next time though nothing changes: records were there for it but
        # none answered (fetch.max.bytes spent, the quota); or the follower is out of the
        # ISR, which only its fetches of the partition let back in (Kafka reads every
        # partition of a session each time, so a caught-up follower's expansion is tried
        # again until the controller takes it).
        pending=(not read.records and not diverging and item.fetch_offset < read.log_end_offset)
        or (partition is not None and replica not in partition.isr),
    )


@dataclass(slots=True)
class SessionFetch:
    """One follower fetch under the session rules: what to read (grows with each look of
    the long poll), what else to wait on, and its answer."""

    context: FetchContext
    request: FetchRequest
    reading: dict[PartitionKey, PartitionFetch] = field(default_factory=dict)

    @property
    def error(self) -> str | None:
        """A session error: answered at once, nothing read."""
        error = self.context.error
        return None if error is None else error.value

    @property
    def wait_keys(self) -> tuple[TopicPartition, ...]:
        """What the long poll waits on besides the partitions read."""
        if self.context.kind is ContextKind.INCREMENTAL and self.context.follows_changes:
            return (session_wait_key(self.context.session_id),)
        return ()


class FollowerSessions:
    """The follower fetch sessions of one broker, in its one cache."""

    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache

    def begin(self, request: FetchRequest, now_ms: int, wall_ms: int) -> SessionFetch:
        """The fetch's context. `now_ms`: the cache's clock (monotonic); `wall_ms`: the
        clock of the ISR's times."""
        asked = [((p.topic_id, p.partition), _state(p)) for p in request.partitions]
        forgotten: list[PartitionKey] = list(request.forgotten)
        epoch = request.session_epoch
        if epoch is None:
            epoch = FINAL_EPOCH  # an older follower: no session
        context = self.cache.new_context(
            request.session_id,
            epoch,
            asked,
            forgotten,
            uses_topic_ids=True,
            privileged=True,
            now_ms=now_ms,
            follows_changes=True,
            replica_id=request.replica_id,
            fetched_at_ms=wall_ms,
        )
        fetch = SessionFetch(context, request)
        for key, state in context.partitions:
            fetch.reading[key] = _item(key, state)
        return fetch

    def to_read(self, fetch: SessionFetch) -> FetchRequest:
        """The fetch as broker/follower_reads.py reads it now: the partitions named, and
        for an incremental fetch every partition changed since (taken from the session)."""
        for key, state in self.cache.take_changed(fetch.context):
            if key not in fetch.reading:
                fetch.reading[key] = _item(key, state)
        return FetchRequest(
            correlation_id=fetch.request.correlation_id,
            replica_id=fetch.request.replica_id,
            broker_epoch=fetch.request.broker_epoch,
            max_wait_ms=fetch.request.max_wait_ms,
            min_bytes=fetch.request.min_bytes,
            max_bytes=fetch.request.max_bytes,
            partitions=tuple(fetch.reading.values()),
        )

    def finish(
        self, fetch: SessionFetch, answers: list[FollowerAnswer], now_ms: int
    ) -> FetchResponse:
        """The answer: every partition read for a full or sessionless fetch, those with
        news for an incremental one; the session's id, or a session error."""
        if fetch.context.kind is ContextKind.ERROR:
            return FetchResponse(error=fetch.error, message=_session_message(fetch))
        replica = fetch.request.replica_id
        news = [
            ((item.topic_id, item.partition), _news(item, partition, read, replica))
            for item, partition, read in answers
        ]
        done = self.cache.complete(fetch.context, news, now_ms)
        if done.error is not None:
            return FetchResponse(
                error=done.error.value,
                message=f"Fetch session {done.session_id} moved on while this fetch waited.",
            )
        response = fetch_response(answers)
        if fetch.context.kind is ContextKind.INCREMENTAL:
            carried = set(done.carried)
            kept = tuple(p for p in response.partitions if (p.topic_id, p.partition) in carried)
            return FetchResponse(kept, session_id=done.session_id)
        return FetchResponse(response.partitions, session_id=done.session_id)

    def changed(self, partition: Partition) -> list[TopicPartition]:
        """A partition changed: the sessions holding it mark it, and their followers stood
        at their cached offsets as of their last fetch. Returns the wait keys to wake."""
        key: PartitionKey = (partition.topic_id, partition.index)
        leader = partition.leader
        if leader is not None:
            for session, cached in self.cache.partition_changed(key):
                if session.replica_id >= 0 and session.fetched_at_ms >= 0:
                    leader.on_follower_standing(
                        session.replica_id, cached.state.fetch_offset, session.fetched_at_ms
                    )
        else:
            self.cache.partition_changed(key)
        return [session_wait_key(s) for s in self.cache.following(key)]


def _session_message(fetch: SessionFetch) -> str:
    session_id = fetch.context.session_id
    if fetch.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
        return f"Fetch session {session_id} is not held by this broker (evicted or restarted)."
    if fetch.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH:
        return (
            f"Fetch session {session_id} expects another epoch than {fetch.request.session_epoch}."
        )
    return f"Fetch session {session_id} cannot serve this fetch: {fetch.error}."


__all__ = ["NO_SESSION", "FollowerSessions", "SessionFetch", "session_wait_key"]
