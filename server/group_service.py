"""The consumer-group RPCs of ClientService (FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups): protobuf converted to the coordinator's dataclasses
(coordinator/group/messages.py) and its answers back; the decisions are the coordinator's
(coordinator/group/core.py), the authorization checks this servicer's.

FindCoordinator creates `__consumer_offsets` on first use (offsets.topic.num.partitions
partitions, offsets.topic.replication.factor replicas, compacted), answering
COORDINATOR_NOT_AVAILABLE until it has leaders, as Kafka does.
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
    MemberIdRequired,
    OffsetCommit,
    OffsetFetch,
    SyncGroup,
)
from coordinator.group.runtime import GroupCoordinator
from metadata.errors import ApiError
from server.api_errors import error_pb, make_error
from server.request_authorization import RequestAuthorizer
from server.request_session import peer_host
from strom_api.error_codes import ErrorCode
from strom_api.v1 import client_pb2


class GroupApi:
    replicas: ReplicaManager
    groups: GroupCoordinator
    listener_name: str
    create_offsets_topic: Callable[[], Awaitable[None]]
    authz: RequestAuthorizer

    async def FindCoordinator(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.FindCoordinatorResponse(node_id=-1, port=-1)
        image = self.replicas.image
        topic = image.topics.by_name.get(OFFSETS_TOPIC)
        if not request.key:
            response.error.CopyFrom(
                make_error(ErrorCode.INVALID_GROUP_ID, "The group id must not be empty.")
            )
            return response
        refusal = self.authz.group("FindCoordinator", request.key)
        if refusal is not None:
            response.error.CopyFrom(error_pb(refusal))
            return response
        if topic is None:
            await self.create_offsets_topic()
            response.error.CopyFrom(
                make_error(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is being created."
                )
            )
            return response
        index = self.groups.partition_for(request.key)
        registration = topic.partitions.get(index)
        leader = registration.leader if registration is not None else -1
        broker = image.cluster.brokers.get(leader)
        endpoint = None
        if broker is not None and not broker.fenced:
            endpoint = next((e for e in broker.endpoints if e.name == self.listener_name), None)
        if endpoint is None:
            response.error.CopyFrom(
                make_error(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    f"{OFFSETS_TOPIC}-{index}, which holds group '{request.key}', has no "
                    "leader now.",
                )
            )
            return response
        response.node_id, response.host, response.port = leader, endpoint.host, endpoint.port
        return response

    async def JoinGroup(self, request: Any, context: Any) -> Any:  # noqa: N802
        refusal = self.authz.group("JoinGroup", request.group_id)
        if refusal is not None:
            return client_pb2.JoinGroupResponse(
                error=error_pb(refusal), member_id=request.member_id, generation_id=-1
            )
        try:
            answer = await self.groups.join_group(_join(request, peer_host(context)))
        except MemberIdRequired as exc:
            return client_pb2.JoinGroupResponse(
                error=error_pb(exc), member_id=exc.member_id, generation_id=-1
            )
        except ApiError as exc:
            return client_pb2.JoinGroupResponse(
                error=error_pb(exc), member_id=request.member_id, generation_id=-1
            )
        response = client_pb2.JoinGroupResponse(
            generation_id=answer.generation_id,
            protocol_type=answer.protocol_type,
            protocol_name=answer.protocol_name,
            leader=answer.leader,
            member_id=answer.member_id,
        )
        for m in answer.members:
            response.members.add(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
        return response

    async def SyncGroup(self, request: Any, context: Any) -> Any:  # noqa: N802
        refusal = self.authz.group("SyncGroup", request.group_id)
        if refusal is not None:
            return client_pb2.SyncGroupResponse(error=error_pb(refusal))
        try:
            answer = await self.groups.sync_group(
                SyncGroup(
                    request.group_id,
                    request.member_id,
                    request.generation_id,
                    {a.member_id: a.assignment for a in request.assignments},
                )
            )
        except ApiError as exc:
            return client_pb2.SyncGroupResponse(error=error_pb(exc))
        return client_pb2.SyncGroupResponse(
            protocol_type=answer.protocol_type,
            protocol_name=answer.protocol_name,
            assignment=answer.assignment,
        )

    async def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        refusal = self.authz.group("Heartbeat", request.group_id)
        if refusal is not None:
            return client_pb2.HeartbeatResponse(error=error_pb(refusal))
        try:
            await self.groups.heartbeat(
                Heartbeat(request.group_id, request.member_id, request.generation_id)
            )
        except ApiError as exc:
            return client_pb2.HeartbeatResponse(error=error_pb(exc))
        return client_pb2.HeartbeatResponse()

    async def LeaveGroup(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.LeaveGroupResponse()
        refusal = self.authz.group("LeaveGroup", request.group_id)
        if refusal is not None:
            response.error.CopyFrom(error_pb(refusal))
            return response
        try:
            results = await self.groups.leave_group(
                LeaveGroup(
                    request.group_id,
                    tuple(LeavingMember(m.member_id, m.group_instance_id) for m in request.members),
                )
            )
        except ApiError as exc:
            response.error.CopyFrom(error_pb(exc))
            return response
        for result in results:
            out = response.members.add(
                member_id=result.member_id, group_instance_id=result.group_instance_id
            )
            if result.error is not None:
                out.error.CopyFrom(error_pb(result.error))
        return response

    async def OffsetCommit(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.OffsetCommitResponse()
        results: dict[tuple[str, int], ApiError | None] = {}
        error = None
        refused: dict[str, ApiError] = {}
        group_refusal = self.authz.group("OffsetCommit", request.group_id)
        if group_refusal is not None:
            error = error_pb(group_refusal)
        else:
            # READ on the group, then on each topic: the others' offsets are committed.
            refused = self.authz.topics("OffsetCommit", (t.name for t in request.topics))
            allowed = [t for t in request.topics if t.name not in refused]
            try:
                if allowed or not request.topics:
                    results = await self.groups.commit_offsets(_commit(request, allowed))
            except ApiError as exc:
                error = error_pb(exc)
        for topic in request.topics:
            out = response.topics.add(name=topic.name)
            for p in topic.partitions:
                item = out.partitions.add(partition=p.partition)
                refusal = results.get((topic.name, p.partition)) or refused.get(topic.name)
                if error is not None:
                    item.error.CopyFrom(error)
                elif refusal is not None:
                    item.error.CopyFrom(error_pb(refusal))
        if error is not None:
            response.error.CopyFrom(error)
        return response

    async def OffsetFetch(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.OffsetFetchResponse()
        group_refusal = self.authz.group("OffsetFetch", request.group_id)
        if group_refusal is not None:
            response.error.CopyFrom(error_pb(group_refusal))
            return response
        try:
            offsets = await self.groups.fetch_offsets(
                OffsetFetch(
                    request.group_id,
                    tuple((t.name, p) for t in request.topics for p in t.partitions)
                    if request.topics
                    else None,
                )
            )
        except ApiError as exc:
            response.error.CopyFrom(error_pb(exc))
            return response
        if request.topics:  # named: each one it may not DESCRIBE is refused
            refused = self.authz.topics("OffsetFetch", (t.name for t in request.topics))
        else:  # every partition: those of topics it may not DESCRIBE are left out
            visible = set(self.authz.visible_topics({t for t, _ in offsets}))
            offsets = {tp: v for tp, v in offsets.items() if tp[0] in visible}
            refused = {}
        by_topic: dict[str, Any] = {}
        for (topic, partition), value in sorted(offsets.items()):
            out = by_topic.get(topic)
            if out is None:
                out = by_topic[topic] = response.topics.add(name=topic)
            item = out.partitions.add(
                partition=partition, committed_offset=-1, committed_leader_epoch=-1
            )
            if topic in refused:
                item.error.CopyFrom(error_pb(refused[topic]))
            elif value is not None:
                item.committed_offset = value.offset
                item.committed_leader_epoch = value.leader_epoch
                item.metadata = value.metadata
        return response

    async def DescribeGroups(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.DescribeGroupsResponse()
        for group_id in request.groups:
            out = response.groups.add(group_id=group_id)
            refusal = self.authz.group("DescribeGroups", group_id)
            if refusal is not None:
                out.error.CopyFrom(error_pb(refusal))
                continue
            try:
                group = self.groups.describe(group_id)
            except ApiError as exc:
                out.error.CopyFrom(error_pb(exc))
                continue
            if group is None:
                out.state = "Dead"
                continue
            out.state = group.state.value
            out.protocol_type = group.protocol_type or ""
            out.protocol = group.protocol or ""
            out.generation_id = group.generation
            for m in group.members.values():
                out.members.add(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id or "",
                    client_id=m.client_id,
                    client_host=m.client_host,
                    metadata=m.metadata_for(group.protocol or ""),
                    assignment=m.assignment,
                )
        return response

    async def ListGroups(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.ListGroupsResponse()
        wanted = {s.lower() for s in request.states_filter}
        groups = self.groups.list_groups()
        visible = set(self.authz.visible_groups(g.group_id for g in groups))
        for group in groups:
            if group.group_id not in visible:
                continue
            if wanted and group.state.value.lower() not in wanted:
                continue
            response.groups.add(
                group_id=group.group_id,
                protocol_type=group.protocol_type or "consumer",
                state=group.state.value,
            )
        return response

    async def DeleteGroups(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = client_pb2.DeleteGroupsResponse()
        for group_id in request.groups:
            out = response.results.add(group_id=group_id)
            refusal = self.authz.group("DeleteGroups", group_id)
            if refusal is not None:
                out.error.CopyFrom(error_pb(refusal))
                continue
            try:
                await self.groups.delete_group(group_id)
            except ApiError as exc:
                out.error.CopyFrom(error_pb(exc))
        return response


def _join(request: Any, client_host: str) -> JoinGroup:
    return JoinGroup(
        request.group_id,
        request.member_id,
        request.group_instance_id or None,
        request.client_id,
        client_host,
        request.session_timeout_ms,
        request.rebalance_timeout_ms,
        request.protocol_type,
        tuple((p.name, p.metadata) for p in request.protocols),
    )


def _commit(request: Any, topics: list[Any]) -> OffsetCommit:
    """The commit of `topics` (those the caller may READ) of an OffsetCommitRequest."""
    return OffsetCommit(
        request.group_id,
        request.member_id,
        request.generation_id,
        tuple(
            CommittedOffset(
                t.name,
                p.partition,
                p.committed_offset,
                p.committed_leader_epoch,
                p.committed_metadata,
            )
            for t in topics
            for p in t.partitions
        ),
    )
