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

Decided, as Kafka 4 would answer:
- Fetch sessions (KIP-227): this listener answers as a Kafka broker whose fetch session
  cache has no slots (max.incremental.fetch.session.cache.slots=0), by Kafka's
  FetchManager.newContext: a full fetch (session epoch 0 or -1, any session id) is answered
  in full with session_id 0, so clients keep sending full fetches; an incremental one
  (any other epoch) names a session that does not exist: FETCH_SESSION_ID_NOT_FOUND, no
  partitions (INVALID_FETCH_SESSION_EPOCH needs a cached session, so never arises).
  Incremental sessions come with a shared session cache (issue 21).
- A replica's fetch (replica_id >= 0: in replica_state from v15) is Kafka's follower
  fetch; Strom's followers fetch over gRPC's ReplicaService, and the leader tracks no
  follower that fetches here, so each partition is answered NOT_LEADER_OR_FOLLOWER, as
  Kafka's Partition.fetchRecords answers a replica id it does not count among the
  partition's followers (followerReplicaOrThrow), and nothing is read.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i32, i64

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
from server.request_session import current_session
from server.requests.fetch import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    PartitionFetched,
    TopicFetched,
    fetch,
    release,
)
from strom_api.error_codes import ErrorCode

READ_COMMITTED = 1
FULL_FETCH_EPOCHS = (0, -1)  # Kafka's INITIAL_EPOCH and FINAL_EPOCH
FIRST_TOPIC_ID_VERSION = 13


async def fetch_api(plane: DataPlane, listener_name: str, request: Request) -> Any:
    body = request.body
    version = request.api_version
    response_type = load_response_schema(FETCH, version)
    # v4-v6 have no session fields: every such fetch is a full one
    if int(getattr(body, "session_epoch", -1)) not in FULL_FETCH_EPOCHS:
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=KafkaErrorCode.fetch_session_id_not_found,
            session_id=i32(0),
            responses=(),
        )
    replica_id = int(body.replica_state.replica_id if version >= 15 else body.replica_id)
    names = _topic_names(plane, body.topics, version)
    if replica_id >= 0:
        answer = _refused(body.topics, names, _follower_error(replica_id))
        return _response(response_type, version, body, names, answer, plane, listener_name)
    shared = FetchRequest(
        replica_id,
        millis(body.max_wait),
        int(body.min_bytes),
        int(body.max_bytes),
        [
            FetchTopic(
                name,
                [
                    FetchPartition(
                        int(p.partition),
                        int(p.fetch_offset),
                        int(p.partition_max_bytes),
                        int(getattr(p, "current_leader_epoch", -1)),  # v9+
                    )
                    for p in topic.partitions
                ],
            )
            for topic, name in zip(body.topics, names, strict=True)
            if name is not None
        ],
    )
    held = await fetch(plane.replicas, plane.authz, shared, current_session())
    try:
        answer = _with_unknown_ids(body.topics, names, held.topics)
        return _response(response_type, version, body, names, answer, plane, listener_name)
    finally:
        release(plane.replicas, held)  # the kio response holds the bytes now


def _topic_names(plane: DataPlane, topics: Any, version: int) -> list[str | None]:
    """Each request topic's name; None for an id (v13+) no topic has."""
    if version < FIRST_TOPIC_ID_VERSION:
        return [str(t.topic) for t in topics]
    by_id = plane.replicas.image.topics.by_id
    names: list[str | None] = []
    for t in topics:
        found = by_id.get(t.topic_id.bytes) if t.topic_id is not None else None
        names.append(None if found is None else found.name)
    return names


def _unknown_id(topic_id: uuid.UUID | None) -> ApiError:
    return ApiError(ErrorCode.UNKNOWN_TOPIC_ID, f"This server does not host topic id {topic_id}.")


def _follower_error(replica_id: int) -> ApiError:
    return ApiError(
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        f"Replica {replica_id} fetches as a follower on a Kafka listener; Strom's followers "
        "fetch over ReplicaService, so this leader does not count it as a follower.",
    )


def _refused(topics: Any, names: list[str | None], error: ApiError) -> list[TopicFetched]:
    return [
        TopicFetched(
            name or "",
            [
                PartitionFetched(
                    int(p.partition), error if name is not None else _unknown_id(t.topic_id)
                )
                for p in t.partitions
            ],
        )
        for t, name in zip(topics, names, strict=True)
    ]


def _with_unknown_ids(
    topics: Any, names: list[str | None], fetched: list[TopicFetched]
) -> list[TopicFetched]:
    """The shared answer (known topics, in order) with each unknown id's partitions
    answered UNKNOWN_TOPIC_ID in their place."""
    if all(name is not None for name in names):
        return fetched
    known = iter(fetched)
    return [
        next(known)
        if name is not None
        else TopicFetched(
            "", [PartitionFetched(int(p.partition), _unknown_id(t.topic_id)) for p in t.partitions]
        )
        for t, name in zip(topics, names, strict=True)
    ]


def _response(
    response_type: type[Any],
    version: int,
    body: Any,
    names: list[str | None],
    answer: list[TopicFetched],
    plane: DataPlane,
    listener_name: str,
) -> Any:
    topic_type = nested(response_type, "FetchableTopicResponse")
    partition_type = nested(response_type, "PartitionData")
    leader_type = nested(response_type, "LeaderIdAndEpoch") if version >= 12 else None
    aborted: tuple[Any, ...] | None = () if int(body.isolation_level) == READ_COMMITTED else None
    leaders: list[int] = []
    topics = []
    for request_topic, topic in zip(body.topics, answer, strict=True):
        partitions = []
        for p in topic.partitions:
            partitions.append(_partition(partition_type, leader_type, p, aborted))
            if p.current_leader is not None and p.current_leader.leader_id >= 0:
                leaders.append(p.current_leader.leader_id)
        if version >= FIRST_TOPIC_ID_VERSION:
            topics.append(topic_type(topic_id=request_topic.topic_id, partitions=tuple(partitions)))
        else:
            topics.append(topic_type(topic=topic.name, partitions=tuple(partitions)))
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
        session_id=i32(0),  # no session was created: the client sends full fetches
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
