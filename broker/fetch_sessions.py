"""Incremental fetch sessions (KIP-227): Kafka's FetchManager, FetchSession and
FetchSessionCache, as a sans-I/O core. A front end hands each fetch's session fields here,
reads the partitions the context names through the shared fetch path, then completes the
context with what each partition's answer says; the core decides the session id and which
partitions the response carries. No clock (now_ms is passed in), no I/O; session ids come
from the random generator the owner passes in. Not thread-safe: one event loop owns it.

The rules, as Kafka's FetchManager.newContext applies them:
- A full fetch (epoch 0) closes the session it names, if any, reads the request's
  partitions, and then creates a session holding them (with the answer's high watermark,
  last stable offset and log start offset) when a slot is free or one can be evicted
  (max.incremental.fetch.session.cache.slots); the response carries the new id, or 0.
- Epoch -1 (FINAL_EPOCH) closes the named session and answers sessionless: the request's
  partitions, in full, session id 0, nothing created.
- An incremental fetch (any other epoch) names a session: none cached is
  FETCH_SESSION_ID_NOT_FOUND; a different epoch than the session expects (the previous
  one + 1) is INVALID_FETCH_SESSION_EPOCH; a session made with topic ids (v13+) asked
  without them, or the reverse, is FETCH_SESSION_TOPIC_ID_ERROR. Otherwise the request's
  partitions are added to the session or update their fetch state there (fetch offset, max
  bytes, leader epochs, log start), forgotten ones leave it, and the whole session is read;
  a session left empty is closed and the fetch answered sessionless.
- The incremental answer carries a partition only if it has records, an error, a preferred
  read replica or a diverging epoch, or its high watermark, last stable offset or log start
  offset changed since the session last answered it (an error resets the cached high
  watermark to -1, so the partition is sent again once the error clears). A partition that
  returned records moves to the end of the session, so the next read's fetch.max.bytes
  goes to the others first. Kafka's CachedPartition does not compare the last stable
  offset; Strom does, so a read_committed client sees it move once transactions exist.
- Completing an incremental context whose session moved on meanwhile (a duplicate request
  raced it, or it was evicted) is INVALID_FETCH_SESSION_EPOCH, as Kafka's
  IncrementalFetchContext answers.

Sessions that follow changes (`follows_changes`, the replica fetch streams' sessions:
docs/architecture.md §6): so that a fetch costs what changed, not the size of the session,
the cache keeps which sessions hold each partition; the owner tells it of every change of a
partition (`partition_changed`: new records, a high watermark or log start moved, a leader
or replica change), and such a session remembers the partitions changed since they were
last read. An incremental fetch of it reads only the partitions the request names plus
those (`take_changed`, asked again on each look of a long poll); the others have nothing to
say and are not read. A partition whose read had more to give than it answered (`pending`:
held back by fetch.max.bytes or the quota) stays marked, so the next fetch reads it again.

Eviction (FetchSessionCache.tryEvict), when a new session finds no free slot: first the
least recently used session if it has been idle longer than
min.incremental.fetch.session.eviction.ms; otherwise the least valuable session that may
be evicted, if it is worth less than the new one (fewer partitions; a follower's,
"privileged", worth more than a consumer's). A consumer's new session may evict only a
session older than the eviction time (as of its last use); a follower's may evict any
consumer's, and old followers'. A new session of equal worth evicts nothing.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

INITIAL_EPOCH = 0  # a full fetch that asks for a session
FINAL_EPOCH = -1  # a full fetch that closes its session and asks for none
NO_SESSION = 0  # Kafka's INVALID_SESSION_ID
_MAX_SESSION_ID = 2**31 - 1

# A partition as the session knows it: its topic by name (before Fetch v13) or by its
# 16-byte id (v13+, KIP-516), and its index.
PartitionKey = tuple[str | bytes, int]


class SessionError(Enum):
    """Kafka's error names for a session that cannot be used."""

    FETCH_SESSION_ID_NOT_FOUND = "FETCH_SESSION_ID_NOT_FOUND"
    INVALID_FETCH_SESSION_EPOCH = "INVALID_FETCH_SESSION_EPOCH"
    FETCH_SESSION_TOPIC_ID_ERROR = "FETCH_SESSION_TOPIC_ID_ERROR"


class ContextKind(Enum):
    FULL = "full"  # read the request's partitions; completing may create a session
    SESSIONLESS = "sessionless"  # read the request's partitions; session id 0
    INCREMENTAL = "incremental"  # read the session's partitions; answer what changed
    ERROR = "error"  # read nothing; answer the error


@dataclass(frozen=True, slots=True)
class FetchState:
    """What a fetcher asks of one partition (a Fetch request's partition fields)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own log start; -1 for a consumer


@dataclass(frozen=True, slots=True)
class PartitionNews:
    """What one partition's answer says, as far as the session needs to know."""

    has_records: bool
    has_error: bool
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    preferred_read_replica: int = -1
    diverging: bool = False
    # The read left records for this fetcher unanswered (max bytes, a quota): a session
    # that follows changes reads the partition again next time, as if it had changed.
    pending: bool = False


@dataclass(slots=True)
class CachedPartition:
    state: FetchState
    # The values last answered; -1 until answered (so the first answer always carries it).
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def must_respond(self, news: PartitionNews) -> bool:
        """Kafka's maybeUpdateResponseData: whether the answer carries this partition; the
        cached values take the answer's."""
        respond = (
            news.has_records
            or news.preferred_read_replica >= 0
            or news.diverging
            or news.high_watermark != self.high_watermark
            or news.last_stable_offset != self.last_stable_offset
            or news.log_start_offset != self.log_start_offset
        )
        self.high_watermark = news.high_watermark
        self.last_stable_offset = news.last_stable_offset
        self.log_start_offset = news.log_start_offset
        if news.has_error:
            self.high_watermark = -1  # sent again once the error clears
            respond = True
        return respond


@dataclass(slots=True)
class FetchSession:
    id: int
    privileged: bool  # a follower's
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    epoch: int  # the epoch the next incremental fetch must carry
    # In read order: dicts keep insertion order, and a re-inserted key goes last.
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)
    # A session that follows changes: the fetching replica (-1: a consumer) and the
    # partitions changed since last read (in the order they changed).
    follows_changes: bool = False
    replica_id: int = -1
    changed: dict[PartitionKey, None] = field(default_factory=dict)
    # When its last fetch arrived, on the clock of the owner's replica times (wall ms).
    fetched_at_ms: int = -1

    def update(
        self, asked: Iterable[tuple[PartitionKey, FetchState]], forgotten: Iterable[PartitionKey]
    ) -> None:
        for key, state in asked:
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(state)
            else:
                cached.state = state
        for key in forgotten:
            self.partitions.pop(key, None)


@dataclass(frozen=True, slots=True)
class FetchContext:
    """What to read for one fetch, and how to answer it (`FetchSessionCache.complete`)."""

    kind: ContextKind
    partitions: tuple[tuple[PartitionKey, FetchState], ...] = ()
    error: SessionError | None = None
    session_id: int = NO_SESSION  # the incremental session; the one an error names
    expected_epoch: int = 0  # an incremental session's epoch once this fetch was taken
    uses_topic_ids: bool = False
    privileged: bool = False
    # A session that follows changes: `partitions` are only those the request named (the
    # changed ones come from `take_changed`).
    follows_changes: bool = False
    replica_id: int = -1
    fetched_at_ms: int = -1  # a full fetch's, for the session it creates


@dataclass(frozen=True, slots=True)
class Completion:
    """The response's session id and error, and the answered partitions it carries, in
    the order given to `complete`."""

    session_id: int
    error: SessionError | None
    carried: tuple[PartitionKey, ...]


@dataclass(frozen=True, slots=True)
class FetchSessionStats:
    sessions: int  # NumIncrementalFetchSessions
    partitions_cached: int  # NumIncrementalFetchPartitionsCached
    evictions: int  # IncrementalFetchSessionEvictionsPerSec's count


class FetchSessionCache:
    def __init__(self, max_slots: int, eviction_ms: int, rng: random.Random) -> None:
        if max_slots < 0 or eviction_ms < 0:
            raise ValueError(f"max_slots {max_slots} and eviction_ms {eviction_ms} must be >= 0")
        self.max_slots = max_slots  # max.incremental.fetch.session.cache.slots
        self.eviction_ms = eviction_ms  # min.incremental.fetch.session.eviction.ms
        self._rng = rng
        # Least recently used first: touching a session moves it to the end.
        self._sessions: dict[int, FetchSession] = {}
        self._evictions = 0
        # The sessions that follow changes, by each partition they hold.
        self._following: dict[PartitionKey, dict[int, None]] = {}

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    @property
    def stats(self) -> FetchSessionStats:
        return FetchSessionStats(
            len(self._sessions),
            sum(len(s.partitions) for s in self._sessions.values()),
            self._evictions,
        )

    def new_context(
        self,
        session_id: int,
        epoch: int,
        asked: Sequence[tuple[PartitionKey, FetchState]],
        forgotten: Sequence[PartitionKey],
        *,
        uses_topic_ids: bool,
        privileged: bool,
        now_ms: int,
        follows_changes: bool = False,
        replica_id: int = -1,
        fetched_at_ms: int = -1,
    ) -> FetchContext:
        """The context of a fetch with these session fields (FetchManager.newContext).
        `follows_changes`: a session this fetch creates reads only what changed (the module
        says how); `replica_id` names the replica fetching, -1 for a consumer;
        `fetched_at_ms`: now on the clock of the owner's replica times, kept by the session."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != NO_SESSION:
                self._close(session_id)  # a full fetch closes its session
            kind = ContextKind.FULL if epoch == INITIAL_EPOCH else ContextKind.SESSIONLESS
            return FetchContext(
                kind,
                tuple(asked),
                uses_topic_ids=uses_topic_ids,
                privileged=privileged,
                follows_changes=follows_changes,
                replica_id=replica_id,
                fetched_at_ms=fetched_at_ms,
            )
        session = self._sessions.get(session_id)
        if session is None:
            return self._error(SessionError.FETCH_SESSION_ID_NOT_FOUND, session_id)
        if session.epoch != epoch:
            return self._error(SessionError.INVALID_FETCH_SESSION_EPOCH, session_id)
        if session.uses_topic_ids != uses_topic_ids:
            return self._error(SessionError.FETCH_SESSION_TOPIC_ID_ERROR, session_id)
        session.update(asked, forgotten)
        if session.follows_changes:
            for key, _ in asked:
                self._following.setdefault(key, {})[session_id] = None
                session.changed.pop(key, None)  # read now, as the request names it
                # ...and answered whatever it has: a follower names a partition whose state
                # moved (a truncation, a dropped answer), so what the session told it
                # before (the high watermark) may no longer be what it holds.
                session.partitions[key].high_watermark = -1
            for key in forgotten:
                self._unfollow(key, session)
        if not session.partitions:  # nothing left to follow: closed, answered sessionless
            self._close(session_id)
            return FetchContext(
                ContextKind.SESSIONLESS, tuple(asked), uses_topic_ids=uses_topic_ids
            )
        session.fetched_at_ms = fetched_at_ms
        self._touch(session, now_ms)
        session.epoch = _next_epoch(session.epoch)
        if session.follows_changes:
            read = tuple((key, session.partitions[key].state) for key, _ in asked)
        else:
            read = tuple((key, cached.state) for key, cached in session.partitions.items())
        return FetchContext(
            ContextKind.INCREMENTAL,
            read,
            session_id=session_id,
            expected_epoch=session.epoch,
            uses_topic_ids=uses_topic_ids,
            privileged=session.privileged,
            follows_changes=session.follows_changes,
            replica_id=session.replica_id,
        )

    def take_changed(self, context: FetchContext) -> list[tuple[PartitionKey, FetchState]]:
        """The partitions of the context's session (one that follows changes) changed since
        they were last read, with their fetch state; they are no longer marked. Nothing
        when the session is gone or moved on (its completion is then refused anyway)."""
        if context.kind is not ContextKind.INCREMENTAL or not context.follows_changes:
            return []
        session = self._sessions.get(context.session_id)
        if session is None or session.epoch != context.expected_epoch or not session.changed:
            return []
        changed, session.changed = session.changed, {}
        return [(key, session.partitions[key].state) for key in changed]

    def partition_changed(self, key: PartitionKey) -> list[tuple[FetchSession, CachedPartition]]:
        """A partition changed: each session following changes that holds it marks it.
        Returns those sessions with their cached partition (the fetch state the session's
        fetcher last stood at), where the partition was not marked already: they had read
        it since its last change, so their fetcher stood at that state until now."""
        sessions = self._following.get(key)
        if not sessions:
            return []
        clean = []
        for session_id in sessions:
            session = self._sessions[session_id]
            if key not in session.changed:
                session.changed[key] = None
                clean.append((session, session.partitions[key]))
        return clean

    def following(self, key: PartitionKey) -> list[int]:
        """The ids of the sessions following changes that hold the partition."""
        return list(self._following.get(key, ()))

    def complete(
        self,
        context: FetchContext,
        answered: Sequence[tuple[PartitionKey, PartitionNews]],
        now_ms: int,
    ) -> Completion:
        """The response for a context whose partitions were read (`answered`, in the
        context's order): a full fetch's new session, an incremental one's changes."""
        if context.kind is ContextKind.ERROR:
            return Completion(NO_SESSION, context.error, ())
        everything = tuple(key for key, _ in answered)
        if context.kind is ContextKind.SESSIONLESS:
            return Completion(NO_SESSION, None, everything)
        if context.kind is ContextKind.FULL:
            return Completion(self._maybe_create(context, answered, now_ms), None, everything)
        session = self._sessions.get(context.session_id)
        if session is None or session.epoch != context.expected_epoch:
            return Completion(context.session_id, SessionError.INVALID_FETCH_SESSION_EPOCH, ())
        carried = []
        for key, news in answered:
            cached = session.partitions.get(key)
            if cached is None:
                continue
            if news.pending and session.follows_changes:
                session.changed[key] = None
            if not cached.must_respond(news):
                continue
            carried.append(key)
            if news.has_records:  # to the end: the next read serves the others first
                session.partitions[key] = session.partitions.pop(key)
        return Completion(session.id, None, tuple(carried))

    def _error(self, error: SessionError, session_id: int) -> FetchContext:
        return FetchContext(ContextKind.ERROR, error=error, session_id=session_id)

    def _maybe_create(
        self,
        context: FetchContext,
        answered: Sequence[tuple[PartitionKey, PartitionNews]],
        now_ms: int,
    ) -> int:
        states = dict(context.partitions)
        size = len(dict(answered))
        if len(self._sessions) >= self.max_slots and not self._try_evict(
            context.privileged, size, now_ms
        ):
            return NO_SESSION
        partitions = {}
        changed: dict[PartitionKey, None] = {}
        for key, news in answered:
            cached = CachedPartition(states[key])
            cached.must_respond(news)  # remembers what this answer told the client
            partitions[key] = cached
            if news.pending:
                changed[key] = None
        session = FetchSession(
            self._new_id(),
            context.privileged,
            context.uses_topic_ids,
            now_ms,
            now_ms,
            _next_epoch(INITIAL_EPOCH),
            partitions,
            follows_changes=context.follows_changes,
            replica_id=context.replica_id,
            changed=changed if context.follows_changes else {},
            fetched_at_ms=context.fetched_at_ms,
        )
        self._sessions[session.id] = session
        if session.follows_changes:
            for key in partitions:
                self._following.setdefault(key, {})[session.id] = None
        return session.id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self._sessions:
            return False  # max_slots is 0
        oldest = next(iter(self._sessions.values()))
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest)  # idle too long: stale
            return True
        candidates = [
            s
            for s in self._sessions.values()
            if (s.last_used_ms - s.created_ms > self.eviction_ms)
            or (privileged and not s.privileged)
        ]
        if not candidates:
            return False
        least = min(candidates, key=_worth)
        if (privileged, size, 0) < _worth(least):
            return False  # the new session is worth no more than the least one cached
        self._evict(least)
        return True

    def _evict(self, session: FetchSession) -> None:
        self._close(session.id)
        self._evictions += 1

    def _close(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None and session.follows_changes:
            for key in session.partitions:
                self._unfollow(key, session)

    def _unfollow(self, key: PartitionKey, session: FetchSession) -> None:
        sessions = self._following.get(key)
        if sessions is not None:
            sessions.pop(session.id, None)
            if not sessions:
                del self._following[key]
        session.changed.pop(key, None)

    def _touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        self._sessions[session.id] = self._sessions.pop(session.id)  # most recently used

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _MAX_SESSION_ID)
            if session_id not in self._sessions:
                return session_id


def _worth(session: FetchSession) -> tuple[bool, int, int]:
    """Kafka's EvictableKey order: consumers' before followers', smaller before larger."""
    return (session.privileged, len(session.partitions), session.id)


def _next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: the final epoch stays final, after the largest
    int comes 1 again."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_SESSION_ID else epoch + 1
