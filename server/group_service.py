"""The consumer-group RPCs of ClientService (FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups, OffsetDelete): protobuf converted to the dataclasses of
server/requests/groups.py (which holds the authorization and every rule around the
coordinator, shared with the Kafka listener) and its answers back. Nothing is decided here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.replica_manager import ReplicaManager
from coordinator.group.core import OFFSETS_TOPIC
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
from coordinator.group.runtime import GroupCoordinator
from metadata.errors import ApiError
from server.api_errors import error_pb
from server.loop_slices import each
from server.request_authorization import RequestAuthorizer
from server.request_items import named_items
from server.request_session import current_session, peer_host
from server.requests import groups as group_requests
from strom_api.v1 import client_pb2


class GroupApi:
    replicas: ReplicaManager
    groups: GroupCoordinator
    listener_name: str
    create_offsets_topic: Callable[[], Awaitable[None]]
    authz: RequestAuthorizer

    @property
    def group_paths(self) -> group_requests.GroupPaths:
        replicas = self.replicas
        return group_requests.GroupPaths(
            self.groups,
            self.authz,
            lambda: replicas.image,
            self.create_offsets_topic,
            lambda: replicas.settings_for(replicas.image, OFFSETS_TOPIC).log.max_message_bytes,
        )

    async def FindCoordinator(self, request: Any, context: Any) -> Any:  # noqa: N802
        answer = await group_requests.find_coordinator(
            self.group_paths,
            group_requests.GROUP_KEY,
            request.key,
            self.listener_name,
            current_session(),
        )
        response = client_pb2.FindCoordinatorResponse(
            node_id=answer.node_id, host=answer.host, port=answer.port
        )
        _set_error(response, answer.error)
        return response

    async def JoinGroup(self, request: Any, context: Any) -> Any:  # noqa: N802
        join = JoinGroup(
            request.group_id,
            request.member_id,
            request.group_instance_id or None,
            request.client_id,
            peer_host(context),
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            request.protocol_type,
            tuple((p.name, p.metadata) for p in request.protocols),
        )
        answer = await group_requests.join_group(self.group_paths, join, current_session())
        result = answer.result
        if result is None:
            response = client_pb2.JoinGroupResponse(member_id=answer.member_id, generation_id=-1)
            _set_error(response, answer.error)
            return response
        response = client_pb2.JoinGroupResponse(
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            leader=result.leader,
            member_id=result.member_id,
        )
        for m in result.members:
            response.members.add(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
        return response

    async def SyncGroup(self, request: Any, context: Any) -> Any:  # noqa: N802
        sync = SyncGroup(
            request.group_id,
            request.member_id,
            request.generation_id,
            {a.member_id: a.assignment for a in request.assignments},
        )
        answer = await group_requests.sync_group(self.group_paths, sync, current_session())
        if answer.result is None:
            response = client_pb2.SyncGroupResponse()
            _set_error(response, answer.error)
            return response
        return client_pb2.SyncGroupResponse(
            protocol_type=answer.result.protocol_type,
            protocol_name=answer.result.protocol_name,
            assignment=answer.result.assignment,
        )

    async def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        beat = Heartbeat(request.group_id, request.member_id, request.generation_id)
        response = client_pb2.HeartbeatResponse()
        _set_error(
            response, await group_requests.heartbeat(self.group_paths, beat, current_session())
        )
        return response

    async def LeaveGroup(self, request: Any, context: Any) -> Any:  # noqa: N802
        leaving = [
            LeavingMember(m.member_id, m.group_instance_id) async for m in each(request.members)
        ]
        leave = LeaveGroup(request.group_id, tuple(leaving))
        answer = await group_requests.leave_group(self.group_paths, leave, current_session())
        response = client_pb2.LeaveGroupResponse()
        _set_error(response, answer.error)
        async for result in each(answer.members):
            out = response.members.add(
                member_id=result.member_id, group_instance_id=result.group_instance_id
            )
            _set_error(out, result.error)
        return response

    async def OffsetCommit(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.OffsetCommitResponse()
        paths = self.group_paths
        too_large = group_requests.commit_size_refusal(
            paths, request.group_id, ((t.name, len(t.partitions)) for t in request.topics)
        )
        if too_large is not None:  # the whole commit, no partition listed
            _set_error(response, too_large)
            return response
        offsets = [
            CommittedOffset(
                name,
                p.partition,
                p.committed_offset,
                p.committed_leader_epoch,
                p.committed_metadata,
            )
            async for name, p in each(named_items(request.topics))
        ]
        commit = OffsetCommit(
            request.group_id, request.member_id, request.generation_id, tuple(offsets)
        )
        answer = await group_requests.commit_offsets(paths, commit, current_session())
        _set_error(response, answer.error)
        await _add_partition_results(response, answer.partitions)
        return response

    async def OffsetFetch(self, request: Any, context: Any) -> Any:  # noqa: N802
        named = None
        if request.topics:
            named = tuple([pair async for pair in each(named_items(request.topics))])
        fetch = OffsetFetch(request.group_id, named)
        answer = await group_requests.fetch_offsets(self.group_paths, fetch, current_session())
        response = client_pb2.OffsetFetchResponse()
        _set_error(response, answer.error)
        by_topic: dict[str, Any] = {}
        async for fetched in each(answer.partitions):
            out = by_topic.get(fetched.topic)
            if out is None:
                out = by_topic[fetched.topic] = response.topics.add(name=fetched.topic)
            item = out.partitions.add(
                partition=fetched.partition,
                committed_offset=fetched.offset,
                committed_leader_epoch=fetched.leader_epoch,
                metadata=fetched.metadata,
            )
            _set_error(item, fetched.error)
        return response

    async def DescribeGroups(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.DescribeGroupsResponse()
        described = await group_requests.describe_groups(
            self.group_paths, request.groups, current_session()
        )
        async for group in each(described):
            out = response.groups.add(group_id=group.group_id)
            if group.error is not None:
                out.error.CopyFrom(error_pb(group.error))
                continue
            out.state = group.state
            if not group.found:
                continue
            out.protocol_type = group.protocol_type
            out.protocol = group.protocol
            out.generation_id = group.generation_id
            for m in group.members:
                out.members.add(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id or "",
                    client_id=m.client_id,
                    client_host=m.client_host,
                    metadata=m.metadata,
                    assignment=m.assignment,
                )
        return response

    async def ListGroups(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.ListGroupsResponse()
        for group in group_requests.list_groups(
            self.group_paths, request.states_filter, (), current_session()
        ):
            response.groups.add(
                group_id=group.group_id,
                # Strom's own client lists a group without members as a consumer group
                protocol_type=group.protocol_type or "consumer",
                state=group.state,
            )
        return response

    async def DeleteGroups(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.DeleteGroupsResponse()
        results = await group_requests.delete_groups(
            self.group_paths, request.groups, current_session()
        )
        async for group_id, error in each(results):
            _set_error(response.results.add(group_id=group_id), error)
        return response

    async def OffsetDelete(self, request: Any, context: Any) -> Any:  # noqa: N802
        named = tuple([pair async for pair in each(named_items(request.topics))])
        answer = await group_requests.delete_offsets(
            self.group_paths, OffsetDelete(request.group_id, named), current_session()
        )
        response = client_pb2.OffsetDeleteResponse()
        _set_error(response, answer.error)
        await _add_partition_results(response, answer.partitions)
        return response


async def _add_partition_results(
    response: Any, results: tuple[group_requests.PartitionResult, ...]
) -> None:
    """Each partition's error under its topic (OffsetCommit, OffsetDelete), the request's
    topics as it listed them (a topic named twice answered twice)."""
    out = None
    async for result in each(results):
        if out is None or out.name != result.topic:
            out = response.topics.add(name=result.topic)
        _set_error(out.partitions.add(partition=result.partition), result.error)


def _set_error(message: Any, error: ApiError | None) -> None:
    if error is not None:
        message.error.CopyFrom(error_pb(error))
