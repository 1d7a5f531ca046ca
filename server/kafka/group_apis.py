"""The consumer-group APIs on the Kafka listener: FindCoordinator (10), JoinGroup (11),
Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16),
OffsetCommit (8), OffsetFetch (9), DeleteGroups (42) and OffsetDelete (47), over the
ranges of apis.py. Each converts kio's request of its version to the dataclasses of
server/requests/groups.py, calls the path the gRPC servicer calls (so the one group
coordinator and the one authorizer decide), and converts the answer back in the request's
version. OffsetDelete has no gRPC twin yet; its rules are in that shared module all the
same.

What the versions change, and how it is read here (the ranges start at Kafka 4's lowest
versions, as apis.py says why):
- FindCoordinator v4+ asks for a batch of keys (one answer each); v0-3 for one, v0 always
  for a group (it has no key type).
  Coordinators are this listener's endpoints (the caller's listener, as Metadata answers).
- JoinGroup v4+ is always KIP-394's two-step join (MEMBER_ID_REQUIRED with the id to come
  back with); v0-3 join at once under the id the coordinator makes, as Kafka's
  (requireKnownMemberId); v0 has no rebalance timeout, the session timeout serves as it, as
  in Kafka; v5+ carries group_instance_id (KIP-345 static members, as the coordinator
  keeps them); protocol type, names and metadata pass through as bytes, unread.
- SyncGroup v5 names the protocol type and assignor the member was given: another than
  the generation's is INCONSISTENT_GROUP_PROTOCOL (the coordinator's check).
- LeaveGroup v0-2 names one member (its error is the response's), v3+ a batch.
- OffsetCommit: the generation and member checks are the coordinator's; a group-level
  error goes on every partition (the response has no other place for it). retention_time
  (v2-4) is not honoured: offsets expire by offsets.retention.minutes (KIP-211), the way
  Kafka treats clients that send -1.
- OffsetFetch v8+ batches groups; v1-7 one group, a top-level error from v2 (v1 has none:
  a group's error is answered on each partition asked, as Kafka does). require_stable
  (v7+) needs no wait: Strom has no transactions, so no offset is ever pending.
- DescribeGroups v6 answers a group that does not exist GROUP_ID_NOT_FOUND (KIP-1043);
  older versions as Kafka did, a Dead group without error.
- Heartbeat, SyncGroup and OffsetCommit carry group_instance_id from v3/v3/v7; the member
  id alone identifies the member here (a fenced static member's old id is unknown, so it
  hears UNKNOWN_MEMBER_ID where Kafka says FENCED_INSTANCE_ID).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i32, i64

from coordinator.group.messages import (
    CommittedOffset,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    LeavingMember,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
)
from metadata.errors import ApiError
from server.kafka.apis import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from server.kafka.error_codes import kafka_error_code
from server.kafka.frames import Request
from server.kafka.versioned import build, nested
from server.loop_slices import each
from server.request_session import current_session
from server.requests import groups as group_requests
from server.requests.groups import (
    CoordinatorAnswer,
    FetchAnswer,
    FetchedOffset,
    GroupPaths,
    PartitionResult,
)
from strom_api.error_codes import ErrorCode

# Kafka's "authorized operations not requested" value (Integer.MIN_VALUE).
_NOT_REQUESTED = -(2**31)
_NO_THROTTLE = datetime.timedelta(0)
_MS = datetime.timedelta(milliseconds=1)

GroupHandler = Callable[[Request], Awaitable[Any]]


def _code(error: ApiError | None) -> KafkaErrorCode:
    return kafka_error_code(None if error is None else error.error_name)


def _message(error: ApiError | None) -> str | None:
    return None if error is None else error.message


def _response(request: Request) -> type[Any]:
    return load_response_schema(request.api_key, request.api_version)


class GroupApis:
    """The group handlers of one Kafka listener (`listener_name`: coordinators are
    answered by their endpoint on it)."""

    def __init__(self, listener_name: str, paths: GroupPaths) -> None:
        self.listener_name = listener_name
        self.paths = paths

    def handlers(self) -> dict[int, GroupHandler]:
        return {
            FIND_COORDINATOR: self.find_coordinator,
            JOIN_GROUP: self.join_group,
            SYNC_GROUP: self.sync_group,
            HEARTBEAT: self.heartbeat,
            LEAVE_GROUP: self.leave_group,
            OFFSET_COMMIT: self.offset_commit,
            OFFSET_FETCH: self.offset_fetch,
            LIST_GROUPS: self.list_groups,
            DESCRIBE_GROUPS: self.describe_groups,
            DELETE_GROUPS: self.delete_groups,
            OFFSET_DELETE: self.offset_delete,
        }

    # --- FindCoordinator ----------------------------------------------------------------

    async def find_coordinator(self, request: Request) -> Any:
        body = request.body
        response_type = _response(request)
        if request.api_version < 4:
            answer = await self._coordinator(getattr(body, "key_type", 0), body.key)  # v1+
            return build(
                response_type,
                throttle_time=_NO_THROTTLE,
                error_code=_code(answer.error),
                error_message=_message(answer.error),
                node_id=i32(answer.node_id),
                host=answer.host,
                port=i32(answer.port),
            )
        coordinator_type = nested(response_type, "Coordinator")
        coordinators = []
        # In loop slices: an await that never suspends lets nothing else run, and a request
        # may name 64,285 keys (the Kafka-protocol fuzzer's seed 19, case 581: 0.65 s).
        async for key in each(body.coordinator_keys):
            answer = await self._coordinator(body.key_type, key)
            coordinators.append(
                build(
                    coordinator_type,
                    key=key,
                    node_id=i32(answer.node_id),
                    host=answer.host,
                    port=i32(answer.port),
                    error_code=_code(answer.error),
                    error_message=_message(answer.error),
                )
            )
        return build(response_type, throttle_time=_NO_THROTTLE, coordinators=tuple(coordinators))

    async def _coordinator(self, key_type: int, key: str) -> CoordinatorAnswer:
        return await group_requests.find_coordinator(
            self.paths, int(key_type), str(key), self.listener_name, current_session()
        )

    # --- membership ---------------------------------------------------------------------

    async def join_group(self, request: Request) -> Any:
        body = request.body
        session = current_session()
        session_timeout = body.session_timeout // _MS
        join = JoinGroup(
            str(body.group_id),
            body.member_id,
            getattr(body, "group_instance_id", None) or None,  # v5+
            request.client_id or "",
            session.host if session is not None else "",
            session_timeout,
            getattr(body, "rebalance_timeout", body.session_timeout) // _MS,  # v1+
            body.protocol_type,
            tuple((p.name, bytes(p.metadata)) for p in body.protocols),
            require_known_member_id=request.api_version >= 4,
        )
        answer = await group_requests.join_group(self.paths, join, session)
        response_type = _response(request)
        result = answer.result
        if result is None:
            return build(
                response_type,
                throttle_time=_NO_THROTTLE,
                error_code=_code(answer.error),
                generation_id=i32(-1),
                protocol_type=None,
                protocol_name=None if request.api_version >= 7 else "",
                leader="",
                member_id=answer.member_id,
                members=(),
            )
        member_type = nested(response_type, "JoinGroupResponseMember")
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            error_code=KafkaErrorCode.none,
            generation_id=i32(result.generation_id),
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            leader=result.leader,
            member_id=result.member_id,
            members=tuple(
                build(
                    member_type,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id or None,
                    metadata=m.metadata,
                )
                for m in result.members
            ),
        )

    async def sync_group(self, request: Request) -> Any:
        body = request.body
        sync = SyncGroup(
            str(body.group_id),
            body.member_id,
            int(body.generation_id),
            {a.member_id: bytes(a.assignment) for a in body.assignments},
            getattr(body, "protocol_type", None),  # v5+
            getattr(body, "protocol_name", None),
        )
        answer = await group_requests.sync_group(self.paths, sync, current_session())
        result = answer.result
        return build(
            _response(request),
            throttle_time=_NO_THROTTLE,
            error_code=_code(answer.error),
            protocol_type=None if result is None else result.protocol_type,
            protocol_name=None if result is None else result.protocol_name,
            assignment=b"" if result is None else result.assignment,
        )

    async def heartbeat(self, request: Request) -> Any:
        body = request.body
        beat = Heartbeat(str(body.group_id), body.member_id, int(body.generation_id))
        error = await group_requests.heartbeat(self.paths, beat, current_session())
        return build(_response(request), throttle_time=_NO_THROTTLE, error_code=_code(error))

    async def leave_group(self, request: Request) -> Any:
        body = request.body
        response_type = _response(request)
        if request.api_version < 3:  # one member, whose error is the response's
            leave = LeaveGroup(str(body.group_id), (LeavingMember(body.member_id, ""),))
            answer = await group_requests.leave_group(self.paths, leave, current_session())
            error = answer.error or next((m.error for m in answer.members if m.error), None)
            return build(response_type, throttle_time=_NO_THROTTLE, error_code=_code(error))
        leaving = [
            LeavingMember(m.member_id, m.group_instance_id or "") async for m in each(body.members)
        ]
        leave = LeaveGroup(str(body.group_id), tuple(leaving))
        answer = await group_requests.leave_group(self.paths, leave, current_session())
        member_type = nested(response_type, "MemberResponse")
        members = [
            build(
                member_type,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id or None,
                error_code=_code(m.error),
            )
            async for m in each(answer.members)
        ]
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            error_code=_code(answer.error),
            members=tuple(members),
        )

    # --- offsets ------------------------------------------------------------------------

    async def offset_commit(self, request: Request) -> Any:
        body = request.body
        response_type = _response(request)
        pairs = ((t, p) for t in body.topics for p in t.partitions)
        too_large = group_requests.commit_size_refusal(
            self.paths, str(body.group_id), ((str(t.name), len(t.partitions)) for t in body.topics)
        )
        if too_large is not None:  # on every partition: the response has no top-level error
            results = [
                PartitionResult(str(t.name), int(p.partition_index), too_large)
                async for t, p in each(pairs)
            ]
        else:
            offsets = [
                CommittedOffset(
                    str(t.name),
                    int(p.partition_index),
                    int(p.committed_offset),
                    int(getattr(p, "committed_leader_epoch", -1)),  # v6+
                    p.committed_metadata or "",
                )
                async for t, p in each(pairs)
            ]
            commit = OffsetCommit(
                str(body.group_id),
                body.member_id,
                int(body.generation_id_or_member_epoch),
                tuple(offsets),
            )
            answer = await group_requests.commit_offsets(self.paths, commit, current_session())
            results = list(answer.partitions)
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            topics=await _partition_errors(response_type, "OffsetCommitResponse", results),
        )

    async def offset_fetch(self, request: Request) -> Any:
        body = request.body
        response_type = _response(request)
        if request.api_version < 8:
            answer = await self._fetch(body.group_id, body.topics)
            if request.api_version < 2 and answer.error is not None:
                answer = await _on_each_partition(answer, body.topics)
            return build(
                response_type,
                throttle_time=_NO_THROTTLE,
                topics=await _fetched_topics(response_type, answer, "OffsetFetchResponse"),
                error_code=_code(answer.error),
            )
        group_type = nested(response_type, "OffsetFetchResponseGroup")
        out = []
        # each(): a v8 request of 32,142 groups held the loop 1.35 s (the Kafka-protocol
        # fuzzer, seed 7 case 761): a group's fetch need not wait, so its await never yields.
        async for group in each(body.groups):
            answer = await self._fetch(group.group_id, group.topics)
            out.append(
                build(
                    group_type,
                    group_id=group.group_id,
                    topics=await _fetched_topics(response_type, answer, "OffsetFetchResponse", "s"),
                    error_code=_code(answer.error),
                )
            )
        return build(response_type, throttle_time=_NO_THROTTLE, groups=tuple(out))

    async def _fetch(self, group_id: str, topics: Any) -> FetchAnswer:
        partitions = None
        if topics is not None:
            pairs = ((t, p) for t in topics for p in t.partition_indexes)
            partitions = tuple([(str(t.name), int(p)) async for t, p in each(pairs)])
        return await group_requests.fetch_offsets(
            self.paths, OffsetFetch(str(group_id), partitions), current_session()
        )

    # --- administration -----------------------------------------------------------------

    async def describe_groups(self, request: Request) -> Any:
        body = request.body
        response_type = _response(request)
        group_type = nested(response_type, "DescribedGroup")
        member_type = nested(response_type, "DescribedGroupMember")
        include_operations = bool(getattr(body, "include_authorized_operations", False))
        out = []
        described = await group_requests.describe_groups(
            self.paths, (str(g) for g in body.groups), current_session(), include_operations
        )
        async for group in each(described):
            error = group.error
            if error is None and not group.found and request.api_version >= 6:
                error = ApiError(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Group {group.group_id} not found.",
                )
            operations = _NOT_REQUESTED
            if group.authorized_operations is not None:
                operations = sum(1 << int(op) for op in group.authorized_operations)
            out.append(
                build(
                    group_type,
                    error_code=_code(error),
                    error_message=_message(error),
                    group_id=group.group_id,
                    group_state=group.state if group.error is None else "",
                    protocol_type=group.protocol_type,
                    protocol_data=group.protocol,
                    members=tuple(
                        build(
                            member_type,
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in group.members
                    ),
                    authorized_operations=i32(operations),
                )
            )
        return build(response_type, throttle_time=_NO_THROTTLE, groups=tuple(out))

    async def list_groups(self, request: Request) -> Any:
        body = request.body
        response_type = _response(request)
        listed_type = nested(response_type, "ListedGroup")
        listed = group_requests.list_groups(
            self.paths,
            getattr(body, "states_filter", ()),  # v4+
            getattr(body, "types_filter", ()),  # v5+
            current_session(),
        )
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            error_code=KafkaErrorCode.none,
            groups=tuple(
                build(
                    listed_type,
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type=g.group_type,
                )
                for g in listed
            ),
        )

    async def delete_groups(self, request: Request) -> Any:
        response_type = _response(request)
        result_type = nested(response_type, "DeletableGroupResult")
        results = await group_requests.delete_groups(
            self.paths, (str(g) for g in request.body.groups_names), current_session()
        )
        answers = [
            build(result_type, group_id=group_id, error_code=_code(error))
            async for group_id, error in each(results)
        ]
        return build(response_type, throttle_time=_NO_THROTTLE, results=tuple(answers))

    async def offset_delete(self, request: Request) -> Any:
        body = request.body
        pairs = ((t, p) for t in body.topics for p in t.partitions)
        named = [(str(t.name), int(p.partition_index)) async for t, p in each(pairs)]
        delete = OffsetDelete(str(body.group_id), tuple(named))
        answer = await group_requests.delete_offsets(self.paths, delete, current_session())
        response_type = _response(request)
        return build(
            response_type,
            error_code=_code(answer.error),
            throttle_time=_NO_THROTTLE,
            topics=await _partition_errors(
                response_type, "OffsetDeleteResponse", answer.partitions
            ),
        )


async def _partition_errors(response_type: Any, prefix: str, results: Any) -> tuple[Any, ...]:
    """Each partition's error, grouped by topic as Kafka's response builders group them
    (OffsetCommit, OffsetDelete: `prefix`Topic holding `prefix`Partition entries)."""
    topic_type = nested(response_type, f"{prefix}Topic")
    partition_type = nested(response_type, f"{prefix}Partition")
    by_topic: dict[str, list[Any]] = {}
    async for result in each(results):
        by_topic.setdefault(result.topic, []).append(
            build(
                partition_type,
                partition_index=i32(result.partition),
                error_code=_code(result.error),
            )
        )
    return tuple(
        build(topic_type, name=name, partitions=tuple(partitions))
        for name, partitions in by_topic.items()
    )


async def _on_each_partition(answer: FetchAnswer, topics: Any) -> FetchAnswer:
    """OffsetFetch v1's answer to a group-level error: that error on each partition asked
    (offset -1), since v1 has no top-level error code."""
    pairs = ((t, p) for t in topics for p in t.partition_indexes)
    failed = [
        FetchedOffset(str(t.name), int(p), -1, -1, "", answer.error) async for t, p in each(pairs)
    ]
    return dataclasses.replace(answer, partitions=tuple(failed))


async def _fetched_topics(
    response_type: type[Any], answer: FetchAnswer, prefix: str, plural: str = ""
) -> tuple[Any, ...]:
    """OffsetFetch's topics of one group (v8+ names its nested types with an 's')."""
    topic_type = nested(response_type, f"{prefix}Topic{plural}")
    partition_type = nested(response_type, f"{prefix}Partition{plural}")
    by_topic: dict[str, list[Any]] = {}
    async for fetched in each(answer.partitions):
        by_topic.setdefault(fetched.topic, []).append(
            build(
                partition_type,
                partition_index=i32(fetched.partition),
                committed_offset=i64(fetched.offset),
                committed_leader_epoch=i32(fetched.leader_epoch),
                metadata=fetched.metadata,
                error_code=_code(fetched.error),
            )
        )
    return tuple(
        build(topic_type, name=name, partitions=tuple(partitions))
        for name, partitions in by_topic.items()
    )
