"""A consumer's Fetch within an incremental fetch session (KIP-227), for every front end:
the Kafka listener's Fetch (server/kafka/fetch_api.py) and ClientService's Fetch and
FetchStream (server/client_service.py) convert their request to a `SessionFetchRequest`
and their answer from a `SessionFetchAnswer`; this module holds what they share.

The broker's one session cache (broker/fetch_sessions.py, Kafka's FetchManager) decides
from session_id and session_epoch what is read: a full fetch (epoch 0) reads the request's
partitions and may open a session; epoch -1 reads them sessionless; an incremental fetch
updates the session with the partitions it names and the forgotten ones, and all the
session's partitions are read with their cached fetch state through the shared read
(server/requests/fetch.py); its answer keeps only the partitions with records, an error or
changed offsets. A session that cannot be used is the whole answer's error, nothing read.

Topics are keyed as the front end names them: by name (gRPC; Kafka before v13) or by the
16 bytes of their id (Kafka v13+): `topic_name` turns a key into the name read, None for an
id no topic has (answered UNKNOWN_TOPIC_ID, as Kafka does, nothing read for it).

The answer's records stay reserved in the request memory until the front end has handed
the response over and calls `release`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from broker.fetch_sessions import (
    NO_SESSION,
    ContextKind,
    FetchState,
    PartitionKey,
    PartitionNews,
    SessionError,
)
from broker.loop_slices import LoopSlices
from broker.replica_manager import ReplicaManager
from metadata.errors import ApiError
from server.loop_slices import collected
from server.request_authorization import RequestAuthorizer
from server.request_session import Session
from server.requests import fetch as shared
from server.requests.fetch import FetchAnswer, FetchPartition, FetchTopic, PartitionFetched
from strom_api.error_codes import ErrorCode


@dataclass(frozen=True, slots=True)
class SessionFetchRequest:
    replica_id: int  # -1 a consumer, -2 Kafka's debugging consumer
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    session_id: int
    epoch: int  # 0 full (opens a session), -1 sessionless, else incremental
    asked: Sequence[tuple[PartitionKey, FetchState]]
    forgotten: Sequence[PartitionKey] = ()
    uses_topic_ids: bool = False


@dataclass(frozen=True, slots=True)
class SessionFetchAnswer:
    session_id: int  # the session opened or followed; 0 none
    # The whole fetch's, no partitions then; session_id is 0, except for an incremental
    # fetch's session that moved on while it read (INVALID_FETCH_SESSION_EPOCH, as Kafka's
    # IncrementalFetchContext answers it).
    error: SessionError | None
    # The answered partitions in the session's order (one topic's may not be consecutive).
    partitions: list[tuple[PartitionKey, PartitionFetched]]
    held: FetchAnswer | None = None  # the read, whose bytes stay reserved until `release`


def session_error_message(error: SessionError, session_id: int) -> str:
    """Kafka's sentence for a session that cannot be used."""
    if error is SessionError.FETCH_SESSION_ID_NOT_FOUND:
        return f"Fetch session {session_id} was not found (evicted, or the broker restarted)."
    if error is SessionError.INVALID_FETCH_SESSION_EPOCH:
        return f"The fetch session epoch of session {session_id} is not the one expected."
    return f"Fetch session {session_id} was made with topic ids and asked without, or the reverse."


async def fetch_in_session(
    replicas: ReplicaManager,
    authz: RequestAuthorizer,
    request: SessionFetchRequest,
    session: Session | None,
    topic_name: Callable[[str | bytes], str | None],
    api: str = "Fetch",
) -> SessionFetchAnswer:
    sessions = replicas.fetch_sessions
    context = sessions.new_context(
        request.session_id,
        request.epoch,
        request.asked,
        request.forgotten,
        uses_topic_ids=request.uses_topic_ids,
        privileged=False,
        now_ms=_now_ms(),
    )
    if context.kind is ContextKind.ERROR:  # answered with session id 0, as Kafka does
        return SessionFetchAnswer(NO_SESSION, context.error, [])
    keys = [key for key, _ in context.partitions]
    names = await collected(topic_name(key[0]) for key in keys)
    read = shared.FetchRequest(
        request.replica_id,
        request.max_wait_ms,
        request.min_bytes,
        request.max_bytes,
        await collected(_read_topics(context.partitions, names)),
    )
    held = await shared.fetch(replicas, authz, read, session, api)
    try:
        results = iter([p for topic in held.topics for p in topic.partitions])
        answered = []
        news = []
        slices = LoopSlices()
        for key, name in zip(keys, names, strict=True):
            fetched = next(results) if name is not None else _unknown_id(key)
            answered.append((key, fetched))
            news.append((key, _news(fetched)))
            await slices.step()
        done = sessions.complete(context, news, _now_ms())
    except BaseException:
        shared.release(replicas, held)
        raise
    if done.error is not None:  # the session moved on while this fetch read
        shared.release(replicas, held)
        return SessionFetchAnswer(done.session_id, done.error, [])
    if context.kind is ContextKind.INCREMENTAL:
        carried = set(done.carried)
        answered = [(k, p) for k, p in answered if k in carried]
    return SessionFetchAnswer(done.session_id, None, answered, held)


def release(replicas: ReplicaManager, answer: SessionFetchAnswer) -> None:
    """The answer was handed over: its records no longer count against the request memory."""
    if answer.held is not None:
        shared.release(replicas, answer.held)


def grouped(
    partitions: Sequence[tuple[PartitionKey, PartitionFetched]],
) -> list[tuple[str | bytes, list[PartitionFetched]]]:
    """Consecutive partitions of one topic under one entry, as Kafka's FetchResponse.of
    groups them (a session's order may interleave topics)."""
    out: list[tuple[str | bytes, list[PartitionFetched]]] = []
    for (topic, _), p in partitions:
        if not out or out[-1][0] != topic:
            out.append((topic, []))
        out[-1][1].append(p)
    return out


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _read_topics(
    partitions: Sequence[tuple[PartitionKey, FetchState]], names: list[str | None]
) -> Iterator[FetchTopic]:
    """The shared read's topics: consecutive partitions of one topic together, in order,
    those of unknown topic ids left out."""
    current: tuple[str, list[FetchPartition]] | None = None
    for (key, state), name in zip(partitions, names, strict=True):
        if name is None:
            continue
        partition = FetchPartition(
            key[1], state.fetch_offset, state.max_bytes, state.current_leader_epoch
        )
        if current is not None and current[0] == name:
            current[1].append(partition)
            continue
        if current is not None:
            yield FetchTopic(*current)
        current = (name, [partition])
    if current is not None:
        yield FetchTopic(*current)


def _news(p: PartitionFetched) -> PartitionNews:
    return PartitionNews(
        has_records=bool(p.records),
        has_error=p.error is not None,
        high_watermark=p.high_watermark,
        last_stable_offset=p.last_stable_offset,
        log_start_offset=p.log_start_offset,
    )


def _unknown_id(key: PartitionKey) -> PartitionFetched:
    topic, partition = key
    topic_id = uuid.UUID(bytes=topic) if isinstance(topic, bytes) else topic
    return PartitionFetched(
        partition,
        ApiError(ErrorCode.UNKNOWN_TOPIC_ID, f"This server does not host topic id {topic_id}."),
    )
