"""What the per-partition answers of every API share: the refusal of a partition named
twice, and the leader hint a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries."""

from __future__ import annotations

from dataclasses import dataclass

from broker.replica_manager import ReplicaManager
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """The partition's leader as this broker's metadata has it (KIP-951's current_leader):
    a client moves to it without a Metadata round trip. -1, -1 when there is none."""

    leader_id: int
    leader_epoch: int


def leader_hint(
    replicas: ReplicaManager, error: ApiError | None, topic: str, partition: int
) -> LeaderHint | None:
    """The hint an error carries: only a partition that has a leader elsewhere, or a newer
    one, is answered with it."""
    if error is None or error.error_name not in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
    ):
        return None
    return LeaderHint(*replicas.current_leader(topic, partition))


def duplicate_error(topic: str, partition: int) -> ApiError:
    # Kafka answers a partition named twice in one request with INVALID_REQUEST (ListOffsets,
    # CreatePartitions, DeleteRecords...); for Produce and Fetch too here: two batches for one
    # partition would otherwise both be answered with one offset, two reads with copies.
    return ApiError(
        ErrorCode.INVALID_REQUEST,
        f"The request names partition {topic}-{partition} more than once.",
    )
