"""The consumer-group requests, front-end-neutral: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups
and OffsetDelete, with every rule the broker applies before and around the group coordinator
(coordinator/group/, whose decisions they are): the authorization of each (Kafka's
KafkaApis: READ on the group to join, sync, heartbeat, leave and commit; DESCRIBE to find
its coordinator, fetch its offsets and describe it; DELETE to delete it or its offsets;
READ on each topic whose offset is committed or deleted, DESCRIBE on each whose offset is
fetched), the coordinator's
endpoint on the caller's listener, `__consumer_offsets` created on the first
FindCoordinator, and the filters of the listings.

The gRPC servicer (server/group_service.py) and the Kafka listener
(server/kafka/group_apis.py) convert their messages to the coordinator's dataclasses
(coordinator/group/messages.py) and these answers back; no rule lives in either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from coordinator.group import records
from coordinator.group.core import OFFSETS_TOPIC
from coordinator.group.messages import (
    Heartbeat,
    JoinGroup,
    JoinResult,
    LeaveGroup,
    LeaveResult,
    MemberIdRequired,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
    SyncResult,
    TopicPartition,
)
from coordinator.group.runtime import GroupCoordinator
from coordinator.group.state import Group
from metadata.errors import ApiError, kept
from metadata.image import MetadataImage
from server.loop_slices import each
from server.request_authorization import RequestAuthorizer
from server.request_session import Session
from strom_api.acls import AclOperation, ResourceType
from strom_api.error_codes import ErrorCode

# FindCoordinator's key types (Kafka's CoordinatorType).
GROUP_KEY = 0
TRANSACTION_KEY = 1


@dataclass(frozen=True)
class GroupPaths:
    """What the group requests read and call: the node's one group coordinator, its
    authorizer, its metadata image, the creation of `__consumer_offsets`, and that topic's
    max.message.bytes (one OffsetCommit's records are one batch of it)."""

    coordinator: GroupCoordinator
    authz: RequestAuthorizer
    image: Callable[[], MetadataImage]
    create_offsets_topic: Callable[[], Awaitable[None]]
    offsets_max_message_bytes: Callable[[], int]


# --- answers ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CoordinatorAnswer:
    error: ApiError | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    member_id: str  # the member's id; with MEMBER_ID_REQUIRED the one given to it
    result: JoinResult | None = None
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class SyncAnswer:
    result: SyncResult | None = None
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class LeaveAnswer:
    members: tuple[LeaveResult, ...] = ()
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class PartitionResult:
    topic: str
    partition: int
    error: ApiError | None


@dataclass(frozen=True, slots=True)
class CommitAnswer:
    """Each partition of the request, in its order, with its error (the group's error when
    the whole commit failed)."""

    partitions: tuple[PartitionResult, ...]
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class OffsetDeleteAnswer:
    """Each partition of the request with its error; or the group's error alone."""

    partitions: tuple[PartitionResult, ...] = ()
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1  # -1: no offset committed
    leader_epoch: int = -1
    metadata: str = ""
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    partitions: tuple[FetchedOffset, ...] = ()  # sorted by topic and partition
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # the member's subscription for the group's chosen assignor
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    error: ApiError | None = None
    found: bool = False  # False: no such group (Kafka answers it as Dead, or v6+ not found)
    state: str = "Dead"
    protocol_type: str = ""
    protocol: str = ""
    generation_id: int = -1
    members: tuple[DescribedMember, ...] = ()
    # The operations the caller may do on the group (asked for by Kafka's
    # include_authorized_operations); None when not asked for.
    authorized_operations: frozenset[AclOperation] | None = None


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str  # "" for a group that never had members (offsets committed only)
    state: str
    group_type: str  # Kafka's group type (KIP-848): every Strom group is "classic"


# The operations a group resource has (Kafka's DescribeGroups authorized operations).
GROUP_OPERATIONS = (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE)
CLASSIC = "classic"


# --- FindCoordinator --------------------------------------------------------------------


async def find_coordinator(
    paths: GroupPaths, key_type: int, key: str, listener_name: str, session: Session | None
) -> CoordinatorAnswer:
    """The broker leading the group's partition of `__consumer_offsets`, by its endpoint
    on `listener_name` (the caller's). The topic is created on first use, answered
    COORDINATOR_NOT_AVAILABLE until it has leaders, as Kafka does.

    Strom has no transaction coordinator: a transactional key (or any other key type) is
    INVALID_REQUEST, as Kafka answers a key type it has no coordinator for, so that a
    transactional producer fails at once instead of retrying a coordinator that never
    comes (InitProducerId refuses transactional ids the same way)."""
    if key_type != GROUP_KEY:
        kind = "transaction" if key_type == TRANSACTION_KEY else f"type {key_type}"
        return CoordinatorAnswer(
            ApiError(
                ErrorCode.INVALID_REQUEST,
                f"Strom has no {kind} coordinator (only consumer groups' coordinators).",
            )
        )
    if not key:
        return CoordinatorAnswer(
            ApiError(ErrorCode.INVALID_GROUP_ID, "The group id must not be empty.")
        )
    refusal = paths.authz.group("FindCoordinator", key, session)
    if refusal is not None:
        return CoordinatorAnswer(refusal)
    image = paths.image()
    topic = image.topics.by_name.get(OFFSETS_TOPIC)
    if topic is None:
        await paths.create_offsets_topic()
        return CoordinatorAnswer(
            ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is being created.")
        )
    index = paths.coordinator.partition_for(key)
    registration = topic.partitions.get(index)
    leader = registration.leader if registration is not None else -1
    broker = image.cluster.brokers.get(leader)
    endpoint = None
    if broker is not None and not broker.fenced:
        endpoint = next((e for e in broker.endpoints if e.name == listener_name), None)
    if endpoint is None:
        return CoordinatorAnswer(
            ApiError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"{OFFSETS_TOPIC}-{index}, which holds group '{key}', has no leader now.",
            )
        )
    return CoordinatorAnswer(None, leader, endpoint.host, endpoint.port)


# --- membership -------------------------------------------------------------------------


async def join_group(paths: GroupPaths, join: JoinGroup, session: Session | None) -> JoinAnswer:
    refusal = paths.authz.group("JoinGroup", join.group_id, session)
    if refusal is not None:
        return JoinAnswer(join.member_id, error=refusal)
    try:
        result = await paths.coordinator.join_group(join)
    except MemberIdRequired as exc:
        return JoinAnswer(exc.member_id, error=exc)
    except ApiError as exc:
        return JoinAnswer(join.member_id, error=kept(exc))
    return JoinAnswer(result.member_id, result)


async def sync_group(paths: GroupPaths, sync: SyncGroup, session: Session | None) -> SyncAnswer:
    refusal = paths.authz.group("SyncGroup", sync.group_id, session)
    if refusal is not None:
        return SyncAnswer(error=refusal)
    try:
        return SyncAnswer(await paths.coordinator.sync_group(sync))
    except ApiError as exc:
        return SyncAnswer(error=kept(exc))


async def heartbeat(paths: GroupPaths, beat: Heartbeat, session: Session | None) -> ApiError | None:
    refusal = paths.authz.group("Heartbeat", beat.group_id, session)
    if refusal is not None:
        return refusal
    try:
        await paths.coordinator.heartbeat(beat)
    except ApiError as exc:
        return kept(exc)
    return None


async def leave_group(paths: GroupPaths, leave: LeaveGroup, session: Session | None) -> LeaveAnswer:
    refusal = paths.authz.group("LeaveGroup", leave.group_id, session)
    if refusal is not None:
        return LeaveAnswer(error=refusal)
    try:
        return LeaveAnswer(await paths.coordinator.leave_group(leave))
    except ApiError as exc:
        return LeaveAnswer(error=kept(exc))


# --- offsets ----------------------------------------------------------------------------


def commit_size_refusal(
    paths: GroupPaths, group_id: str, topics: Iterable[tuple[str, int]]
) -> ApiError | None:
    """Kafka's INVALID_COMMIT_OFFSET_SIZE for a commit naming more partitions than one batch
    of `__consumer_offsets` can hold: the least its records take (each topic's name and
    partition count) beyond that topic's max.message.bytes. Kafka answers it once the batch
    is built and refused; here it comes before any partition is converted, authorized or
    looked at, so a request naming millions costs per topic, not per partition. The front
    ends ask it first and answer the whole commit with it (a caller the group's ACLs refuse
    learns only that its request was too large)."""
    limit = paths.offsets_max_message_bytes()
    least = records.BATCH_HEADER_BYTES
    for topic, count in topics:
        least += count * records.min_offset_record_bytes(group_id, topic)
        if least > limit:
            return ApiError(
                ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
                f"The offsets committed take at least {least} bytes in {OFFSETS_TOPIC}, "
                f"more than its max.message.bytes ({limit}): commit fewer partitions at once.",
            )
    return None


async def commit_offsets(
    paths: GroupPaths, commit: OffsetCommit, session: Session | None
) -> CommitAnswer:
    """READ on the group, then on each topic: the offsets of the topics allowed are
    committed, the others refused TOPIC_AUTHORIZATION_FAILED. The front ends have asked
    commit_size_refusal before."""
    results: dict[TopicPartition, ApiError | None] = {}
    error = paths.authz.group("OffsetCommit", commit.group_id, session)
    refused: dict[str, ApiError] = {}
    if error is None:
        refused = paths.authz.topics("OffsetCommit", {o.topic for o in commit.offsets}, session)
        allowed = tuple(o for o in commit.offsets if o.topic not in refused)
        try:
            if allowed or not commit.offsets:
                results = await paths.coordinator.commit_offsets(
                    OffsetCommit(commit.group_id, commit.member_id, commit.generation_id, allowed)
                )
        except ApiError as exc:
            error = kept(exc)
    answers = []
    async for o in each(commit.offsets):
        tp = (o.topic, o.partition)
        answers.append(
            PartitionResult(o.topic, o.partition, error or results.get(tp) or refused.get(o.topic))
        )
    return CommitAnswer(tuple(answers), error)


async def fetch_offsets(
    paths: GroupPaths, fetch: OffsetFetch, session: Session | None
) -> FetchAnswer:
    """DESCRIBE on the group; of partitions named, those of a topic the caller may not
    DESCRIBE are refused; of every partition (none named), those are left out."""
    authz = paths.authz
    refusal = authz.group("OffsetFetch", fetch.group_id, session)
    if refusal is not None:
        return FetchAnswer(error=refusal)
    try:
        offsets = await paths.coordinator.fetch_offsets(fetch)
    except ApiError as exc:
        return FetchAnswer(error=kept(exc))
    if fetch.partitions is not None:
        refused = authz.topics("OffsetFetch", (t for t, _ in fetch.partitions), session)
    else:
        visible = set(authz.visible_topics({t for t, _ in offsets}, session))
        offsets = {tp: v for tp, v in offsets.items() if tp[0] in visible}
        refused = {}
    out = []
    async for (topic, partition), value in each(sorted(offsets.items())):
        if topic in refused:
            out.append(FetchedOffset(topic, partition, error=refused[topic]))
        elif value is None:
            out.append(FetchedOffset(topic, partition))
        else:
            out.append(
                FetchedOffset(topic, partition, value.offset, value.leader_epoch, value.metadata)
            )
    return FetchAnswer(tuple(out))


# --- administration ---------------------------------------------------------------------


async def describe_groups(
    paths: GroupPaths,
    group_ids: Iterable[str],
    session: Session | None,
    include_authorized_operations: bool = False,
) -> list[GroupDescription]:
    """Each group, with DESCRIBE on it; one that does not exist is not `found`."""
    out = []
    authz = paths.authz
    async for group_id in each(group_ids):
        refusal = authz.group("DescribeGroups", group_id, session)
        if refusal is not None:
            out.append(GroupDescription(group_id, refusal))
            continue
        operations = None
        if include_authorized_operations:
            operations = frozenset(
                op
                for op in GROUP_OPERATIONS
                if authz.allowed(
                    "DescribeGroups",
                    op,
                    ResourceType.GROUP,
                    group_id,
                    log_denied=False,
                    session=session,
                )
            )
        try:
            group = paths.coordinator.describe(group_id)
        except ApiError as exc:
            out.append(GroupDescription(group_id, kept(exc)))
            continue
        if group is None:
            out.append(GroupDescription(group_id, authorized_operations=operations))
            continue
        out.append(_description(group, operations))
    return out


def _description(group: Group, operations: frozenset[AclOperation] | None) -> GroupDescription:
    protocol = group.protocol or ""
    return GroupDescription(
        group.group_id,
        found=True,
        state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol=protocol,
        generation_id=group.generation,
        members=tuple(
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata_for(protocol),
                m.assignment,
            )
            for m in group.members.values()
        ),
        authorized_operations=operations,
    )


def list_groups(
    paths: GroupPaths,
    states: Iterable[str],
    types: Iterable[str],
    session: Session | None,
) -> list[ListedGroup]:
    """The groups this broker coordinates that the caller may DESCRIBE (every one with
    DESCRIBE on the cluster), in the states and of the types asked for (case-insensitive;
    none asked: every one), as Kafka's ListGroups (KIP-518, KIP-848)."""
    wanted_states = {s.lower() for s in states}
    wanted_types = {t.lower() for t in types}
    if wanted_types and CLASSIC not in wanted_types:
        return []
    groups = paths.coordinator.list_groups()
    visible = set(paths.authz.visible_groups((g.group_id for g in groups), session))
    return [
        ListedGroup(g.group_id, g.protocol_type or "", g.state.value, CLASSIC)
        for g in groups
        if g.group_id in visible and (not wanted_states or g.state.value.lower() in wanted_states)
    ]


async def delete_groups(
    paths: GroupPaths, group_ids: Iterable[str], session: Session | None
) -> list[tuple[str, ApiError | None]]:
    """Each group with DELETE on it: deleted with its offsets when it has no members
    (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND when there is none)."""
    out: list[tuple[str, ApiError | None]] = []
    # each(): a group the coordinator refuses at once answers without a turn of the loop
    async for group_id in each(group_ids):
        error = paths.authz.group("DeleteGroups", group_id, session)
        if error is None:
            try:
                await paths.coordinator.delete_group(group_id)
            except ApiError as exc:
                error = kept(exc)
        out.append((group_id, error))
    return out


async def delete_offsets(
    paths: GroupPaths, delete: OffsetDelete, session: Session | None
) -> OffsetDeleteAnswer:
    """Kafka's OffsetDelete: DELETE on the group (else the whole request is refused), READ
    on each topic (TOPIC_AUTHORIZATION_FAILED), partitions that exist
    (UNKNOWN_TOPIC_OR_PARTITION); the coordinator deletes the rest unless a member
    subscribes to their topic. A group-level error answers the whole request."""
    authz = paths.authz
    refusal = authz.group("OffsetDelete", delete.group_id, session)
    if refusal is not None:
        return OffsetDeleteAnswer(error=refusal)
    refused: dict[TopicPartition, ApiError] = {}
    topic_refusals = authz.topics("OffsetDelete", (t for t, _ in delete.partitions), session)
    image = paths.image()
    async for topic, partition in each(delete.partitions):
        if topic in topic_refusals:
            refused[(topic, partition)] = topic_refusals[topic]
            continue
        known = image.topics.by_name.get(topic)
        if known is None or partition not in known.partitions:
            refused[(topic, partition)] = ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"This server does not host this topic-partition: {topic}-{partition}.",
            )
    allowed = tuple(tp for tp in delete.partitions if tp not in refused)
    try:
        results = await paths.coordinator.delete_offsets(OffsetDelete(delete.group_id, allowed))
    except ApiError as exc:
        return OffsetDeleteAnswer(error=kept(exc))
    answers = [
        PartitionResult(t, p, refused.get((t, p)) or results.get((t, p)))
        async for t, p in each(delete.partitions)
    ]
    return OffsetDeleteAnswer(tuple(answers))
