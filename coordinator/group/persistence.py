"""A group to and from its `__consumer_offsets` records (Kafka's GroupMetadataManager's
storeGroup and loadGroup), and what a failed append means to a client. Pure functions over
coordinator/group/state.py and records.py.
"""

from __future__ import annotations

from coordinator.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    offset_key,
)
from coordinator.group.state import Group, GroupState, Member
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode

Record = tuple[bytes, bytes | None]


def metadata_record(group: Group) -> Record:
    """The group's GroupMetadata record: its generation, assignor, leader and members with
    their subscription and assignment."""
    members = tuple(
        MemberValue(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.metadata_for(group.protocol or ""),
            m.assignment,
        )
        for m in group.members.values()
    )
    value = GroupValue(
        group.protocol_type or "",
        group.generation,
        group.protocol,
        group.leader,
        group.state_timestamp_ms,
        members,
    )
    return group_key(GroupKey(group.group_id)), group_value(value)


def offset_tombstones(group: Group) -> list[Record]:
    """Records that delete every committed offset of the group."""
    return [(offset_key(OffsetKey(group.group_id, t, p)), None) for (t, p) in group.offsets]


def group_tombstone(group_id: str) -> Record:
    return group_key(GroupKey(group_id)), None


def replay(
    values: dict[bytes, bytes | None], index: int, groups: dict[str, Group], now_ms: int
) -> list[Group]:
    """Rebuilds the groups of __consumer_offsets-`index` from the latest value of each key
    (tombstones included: a None value is a deleted offset or group) into `groups`;
    returns the groups it made or changed."""
    touched: dict[str, Group] = {}

    def group_for(group_id: str) -> Group:
        group = groups.get(group_id)
        if group is None:
            group = groups[group_id] = Group(group_id, index)
        touched[group_id] = group
        return group

    for key_bytes, value in values.items():
        if value is None:
            continue
        key = decode_key(key_bytes)
        if isinstance(key, OffsetKey):
            group_for(key.group).offsets[(key.topic, key.partition)] = decode_offset_value(value)
        else:
            _restore(group_for(key.group), decode_group_value(value), now_ms)
    return list(touched.values())


def _restore(group: Group, value: GroupValue, now_ms: int) -> None:
    group.generation = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol = value.protocol
    group.leader = value.leader
    for m in value.members:
        member = Member(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.session_timeout,
            m.rebalance_timeout,
            value.protocol_type,
            [(value.protocol or "", m.subscription)],
            m.assignment,
            last_heartbeat_ms=now_ms,
        )
        group.members[m.member_id] = member
        if m.group_instance_id:
            group.static_members[m.group_instance_id] = m.member_id
    group.restore(GroupState.STABLE if group.members else GroupState.EMPTY, now_ms)


def error_for_commit_append(error: ApiError) -> ApiError:
    """An OffsetCommit's failed write: a batch too large for `__consumer_offsets` is Kafka's
    INVALID_COMMIT_OFFSET_SIZE (GroupMetadataManager's mapping), the rest as any write."""
    if error.error_name in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ApiError(
            ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
            f"The offsets committed do not fit in one batch of __consumer_offsets: {error.message}",
        )
    return error_for_append(error)


def error_for_append(error: ApiError) -> ApiError:
    """Kafka's mapping of a failed write to __consumer_offsets to what a client sees."""
    if error.error_name in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
        return ApiError(ErrorCode.NOT_COORDINATOR, "This broker stopped coordinating the group.")
    if error.error_name in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ApiError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"The group's state could not be stored ({error.error_name}): try again.",
        )
    return error
