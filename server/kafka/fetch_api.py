"""Fetch (key 1, v4-v16) on the Kafka listener: the request converted to
server/requests/fetch.py's (the one the gRPC ClientService calls), its answer converted back
in the request's version, each partition's records as the bytes read from the log.

Conversion only: max_wait_ms, min_bytes, max_bytes, partition_max_bytes and
current_leader_epoch are handed on; topics named by id (v13+, KIP-516) are looked up in the
broker's image, an id no topic has answered UNKNOWN_TOPIC_ID per partition, as Kafka does.
Answered per partition: Kafka's error code, the high watermark, last stable offset (Strom has
no transactions: the high watermark, under either isolation_level), log start offset,
aborted transactions (null for read_uncommitted, empty for read_committed, as Kafka's log
read gives them), preferred_read_replica -1 (no KIP-392 rack selector) and, from v12, the
current leader on NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH (with its endpoint, v16).
last_fetched_epoch is not checked (diverging_epoch stays -1): consumers find a truncation
through OffsetForLeaderEpoch (KIP-320), which is served.

Fetch sessions (KIP-227, v7+): the broker's one session cache (broker/fetch_sessions.py,
Kafka's FetchManager; max.incremental.fetch.session.cache.slots,
min.incremental.fetch.session.eviction.ms) decides from session_id and session_epoch what
is read: a full fetch reads the request's partitions and may open a session answered with
its id; an incremental one updates the session with the partitions it names and
forgotten_topics_data, and reads all the session's partitions with their cached fetch
state through the same shared path, the answer keeping only the partitions with records,
an error or changed offsets. Sessions are keyed by topic name before v13, by topic id
from v13 (a session made with one is FETCH_SESSION_TOPIC_ID_ERROR asked with the other).
v4-v6 have no session fields: every such fetch is sessionless.

Decided, as Kafka 4 would answer:
- A replica's fetch (replica_id >= 0: in replica_state from v15) is Kafka's follower
  fetch; Strom's followers fetch over gRPC's ReplicaService, and the leader tracks no
  follower that fetches here, so each partition is answered NOT_LEADER_OR_FOLLOWER, as
  Kafka's Partition.fetchRecords answers a replica id it does not count among the
  partition's followers (followerReplicaOrThrow), and nothing is read. Such a fetch gets
  no session (one would hold a slot for partitions never read); an incremental one names
  none: FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i32, i64

from broker.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    NO_SESSION,
    FetchState,
    PartitionKey,
    SessionError,
)
from broker.loop_slices import LoopSlices
from metadata.errors import ApiError
from server.kafka.apis import FETCH
from server.kafka.data_plane import (
    NO_THROTTLE,
    DataPlane,
    code,
    leader_field,
    millis,
    node_endpoints,
)
from server.kafka.frames import Request
from server.kafka.versioned import build, nested
from server.loop_slices import collected
from server.request_session import current_session
from server.requests.fetch import PartitionFetched
from server.requests.fetch_sessions_path import (
    SessionFetchRequest,
    fetch_in_session,
    grouped,
    release,
)
from strom_api.error_codes import ErrorCode

READ_COMMITTED = 1
FIRST_SESSION_VERSION = 7
FIRST_TOPIC_ID_VERSION = 13
_SESSION_ERRORS = {
    SessionError.FETCH_SESSION_ID_NOT_FOUND: KafkaErrorCode.fetch_session_id_not_found,
    SessionError.INVALID_FETCH_SESSION_EPOCH: KafkaErrorCode.invalid_fetch_session_epoch,
    SessionError.FETCH_SESSION_TOPIC_ID_ERROR: KafkaErrorCode.fetch_session_topic_id_error,
}


async def fetch_api(plane: DataPlane, listener_name: str, request: Request) -> Any:
    body = request.body
    version = request.api_version
    response_type = load_response_schema(FETCH, version)
    with_sessions = version >= FIRST_SESSION_VERSION
    session_id = int(body.session_id) if with_sessions else NO_SESSION
    epoch = int(body.session_epoch) if with_sessions else FINAL_EPOCH
    asked = await collected(_asked(body.topics, version))  # maybe 100,000 partitions
    replica_id = int(body.replica_state.replica_id if version >= 15 else body.replica_id)
    if replica_id >= 0:
        if epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
            return _session_error(response_type, SessionError.FETCH_SESSION_ID_NOT_FOUND)
        error = _follower_error(replica_id)
        refused = [(key, PartitionFetched(key[1], error)) for key, _ in asked]
        return await _response(
            response_type, version, body, refused, NO_SESSION, plane, listener_name
        )
    answer = await fetch_in_session(
        plane.replicas,
        plane.authz,
        SessionFetchRequest(
            replica_id,
            millis(body.max_wait),
            int(body.min_bytes),
            int(body.max_bytes),
            session_id,
            epoch,
            asked,
            await collected(_forgotten(body, version)) if with_sessions else [],
            uses_topic_ids=version >= FIRST_TOPIC_ID_VERSION,
        ),
        current_session(),
        functools.partial(_topic_name, plane),
    )
    try:
        if answer.error is not None:
            return _session_error(response_type, answer.error, answer.session_id)
        return await _response(
            response_type,
            version,
            body,
            answer.partitions,
            answer.session_id,
            plane,
            listener_name,
        )
    finally:
        release(plane.replicas, answer)  # the kio response holds the bytes now


def _topic_key(topic: Any, version: int) -> str | bytes:
    """A request topic as the session keys it: its name before v13, its id's bytes after."""
    if version < FIRST_TOPIC_ID_VERSION:
        return str(topic.topic)
    return topic.topic_id.bytes if topic.topic_id is not None else bytes(16)


def _asked(topics: Any, version: int) -> Iterator[tuple[PartitionKey, FetchState]]:
    for topic in topics:
        key = _topic_key(topic, version)
        for p in topic.partitions:
            yield (
                (key, int(p.partition)),
                FetchState(
                    int(p.fetch_offset),
                    int(p.partition_max_bytes),
                    int(getattr(p, "current_leader_epoch", -1)),  # v9+
                    int(getattr(p, "last_fetched_epoch", -1)),  # v12+
                    int(getattr(p, "log_start_offset", -1)),  # v5+
                ),
            )


def _forgotten(body: Any, version: int) -> Iterator[PartitionKey]:
    for topic in body.forgotten_topics_data:
        key = _topic_key(topic, version)
        for partition in topic.partitions:
            yield (key, int(partition))


def _topic_name(plane: DataPlane, topic: str | bytes) -> str | None:
    """A session key's topic name; None for an id (v13+) no topic has."""
    if isinstance(topic, str):
        return topic
    found = plane.replicas.image.topics.by_id.get(topic)
    return None if found is None else found.name


def _follower_error(replica_id: int) -> ApiError:
    return ApiError(
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        f"Replica {replica_id} fetches as a follower on a Kafka listener; Strom's followers "
        "fetch over ReplicaService, so this leader does not count it as a follower.",
    )


def _session_error(
    response_type: type[Any], error: SessionError, session_id: int = NO_SESSION
) -> Any:
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=_SESSION_ERRORS[error],
        session_id=i32(session_id),
        responses=(),
    )


async def _response(
    response_type: type[Any],
    version: int,
    body: Any,
    answer: list[tuple[PartitionKey, PartitionFetched]],
    session_id: int,
    plane: DataPlane,
    listener_name: str,
) -> Any:
    """The answer's partitions, consecutive ones of one topic under one topic entry."""
    topic_type = nested(response_type, "FetchableTopicResponse")
    partition_type = nested(response_type, "PartitionData")
    leader_type = nested(response_type, "LeaderIdAndEpoch") if version >= 12 else None
    aborted: tuple[Any, ...] | None = () if int(body.isolation_level) == READ_COMMITTED else None
    leaders: list[int] = []
    for _, p in answer:
        if p.current_leader is not None and p.current_leader.leader_id >= 0:
            leaders.append(p.current_leader.leader_id)
    topics = []
    slices = LoopSlices()
    for topic, fetched in grouped(answer):
        built = []
        for p in fetched:
            built.append(_partition(partition_type, leader_type, p, aborted))
            await slices.step()
        partitions = tuple(built)
        topics.append(
            topic_type(topic_id=uuid.UUID(bytes=topic), partitions=partitions)
            if isinstance(topic, bytes)
            else topic_type(topic=topic, partitions=partitions)
        )
    endpoints = (
        node_endpoints(
            nested(response_type, "NodeEndpoint"), plane.replicas.image, listener_name, leaders
        )
        if version >= 16
        else ()
    )
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=KafkaErrorCode.none,
        session_id=i32(session_id),
        responses=tuple(topics),
        node_endpoints=endpoints,
    )


def _partition(
    partition_type: type[Any],
    leader_type: type[Any] | None,
    p: PartitionFetched,
    aborted: tuple[Any, ...] | None,
) -> Any:
    return build(
        partition_type,
        partition_index=i32(p.partition),
        error_code=code(p.error),
        high_watermark=i64(p.high_watermark),
        last_stable_offset=i64(p.last_stable_offset),
        log_start_offset=i64(p.log_start_offset),
        current_leader=leader_field(leader_type, p.current_leader) if leader_type else None,
        aborted_transactions=aborted,
        preferred_read_replica=i32(-1),
        records=p.records,
    )
