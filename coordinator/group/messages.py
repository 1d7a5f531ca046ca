"""The group coordinator's inputs and outputs as plain frozen dataclasses: the requests the
servicer (server/group_service.py) converts from protobuf, the answers it converts back, and
the effects the core (coordinator/group/core.py) asks its pump to carry out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from coordinator.group.records import OffsetValue
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode

TopicPartition = tuple[str, int]

# --- requests ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinGroup:
    group_id: str
    member_id: str  # "" for a member's first join (KIP-394)
    group_instance_id: str | None  # static membership (KIP-345)
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (assignor name, subscription), preferred first
    # KIP-394: a dynamic member's first join is answered MEMBER_ID_REQUIRED with its id.
    # False for Kafka's JoinGroup v0-3, which predate it: the member joins at once.
    require_known_member_id: bool = True


@dataclass(frozen=True, slots=True)
class SyncGroup:
    group_id: str
    member_id: str
    generation_id: int
    assignments: Mapping[str, bytes] = field(default_factory=dict)  # the leader's only
    # What the member was told at its join (Kafka's SyncGroup v5+); None: not sent.
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    group_id: str
    member_id: str
    generation_id: int


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    group_id: str
    member_id: str  # "" with generation -1: a commit from outside the group (admin tools)
    generation_id: int
    offsets: tuple[CommittedOffset, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetch:
    group_id: str
    partitions: tuple[TopicPartition, ...] | None  # None: every partition with an offset


@dataclass(frozen=True, slots=True)
class DeleteGroup:
    group_id: str


@dataclass(frozen=True, slots=True)
class OffsetDelete:
    group_id: str
    partitions: tuple[TopicPartition, ...]


# --- answers ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    generation_id: int
    protocol_type: str
    protocol_name: str
    leader: str
    member_id: str
    members: tuple[JoinedMember, ...]  # the leader's answer only; empty for the others


@dataclass(frozen=True, slots=True)
class SyncResult:
    protocol_type: str
    protocol_name: str
    assignment: bytes


@dataclass(frozen=True, slots=True)
class LeaveResult:
    member_id: str
    group_instance_id: str
    error: ApiError | None


# Each partition of an OffsetCommit: None when stored, else why not.
CommitResult = dict[TopicPartition, ApiError | None]
# Each partition of an OffsetDelete: None when it has no offset now, else why it keeps it.
DeleteOffsetsResult = dict[TopicPartition, ApiError | None]
# Each partition asked for (or every one with an offset): its offset, or None.
FetchResult = dict[TopicPartition, OffsetValue | None]


class MemberIdRequired(ApiError):
    """KIP-394: the first JoinGroup of a dynamic member gets an id and must come back with it."""

    def __init__(self, member_id: str) -> None:
        super().__init__(ErrorCode.MEMBER_ID_REQUIRED, "Join again with the member id given.")
        self.member_id = member_id


# --- effects ----------------------------------------------------------------------------

Answer = JoinResult | SyncResult | tuple[LeaveResult, ...] | CommitResult | FetchResult | None


@dataclass(frozen=True, slots=True)
class Respond:
    """Complete request `request` with `answer`, or with `error` when it is set."""

    request: int
    answer: Answer = None
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class Append:
    """Append `records` to __consumer_offsets-`partition` (acks=all), then report the
    outcome to the core with `append_done(write, error, now_ms)`."""

    write: int
    partition: int
    records: tuple[tuple[bytes, bytes | None], ...]


@dataclass(slots=True)
class Effects:
    """What one step of the core asks for: answers to send, appends to start, and the time
    (ms) by which `tick` must next run (None: no deadline pending from this step)."""

    responses: list[Respond] = field(default_factory=list)
    appends: list[Append] = field(default_factory=list)
    wakeup_ms: int | None = None

    def wake_by(self, at_ms: int | None) -> None:
        if at_ms is not None and (self.wakeup_ms is None or at_ms < self.wakeup_ms):
            self.wakeup_ms = at_ms
