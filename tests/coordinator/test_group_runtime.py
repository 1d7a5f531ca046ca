"""The group coordinator's runtime (coordinator/group/runtime.py) over a partitions adapter
that records what it is asked: settings of GroupConfig that the runtime, not the core,
applies reach the broker's writes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

from coordinator.group.config import GroupConfig
from coordinator.group.core import OFFSETS_TOPIC
from coordinator.group.messages import CommittedOffset, OffsetCommit
from coordinator.group.runtime import GroupCoordinator
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode


class _RecordingPartitions:
    """One __consumer_offsets partition, empty; each append answered with `error`."""

    def __init__(self, error: ApiError | None) -> None:
        self.error = error
        self.timeouts: list[int] = []

    def partition_count(self, topic: str) -> int:
        return 1

    async def append(
        self, topic: str, index: int, records: object, timestamp_ms: int, timeout_ms: int
    ) -> ApiError | None:
        self.timeouts.append(timeout_ms)
        return self.error

    def read(self, topic: str, index: int) -> Iterator[object]:
        return iter(())


@dataclass(frozen=True)
class _Leader:
    topic: str = OFFSETS_TOPIC
    index: int = 0
    is_leader: bool = True


async def _commit(partitions: _RecordingPartitions, config: GroupConfig) -> object:
    coordinator = GroupCoordinator(1, partitions, config)  # type: ignore[arg-type]
    coordinator.on_partition_role(_Leader())
    for _ in range(100):  # the (empty) partition loads on the loop
        await asyncio.sleep(0)
    commit = OffsetCommit("g", "", -1, (CommittedOffset("t", 0, 5, -1, ""),))
    try:
        return await coordinator.commit_offsets(commit)
    finally:
        await coordinator.stop()


def test_offsets_commit_timeout_ms_bounds_the_offsets_write():
    """offsets.commit.timeout.ms: how long an offset commit's acks=all write may wait for
    the partition's replicas (Kafka's offsets.commit.timeout.ms), and a write that timed
    out is COORDINATOR_NOT_AVAILABLE to the committer, retriable, as in Kafka."""
    partitions = _RecordingPartitions(None)
    asyncio.run(_commit(partitions, GroupConfig(offsets_commit_timeout_ms=1234)))
    assert partitions.timeouts == [1234]

    timed_out = _RecordingPartitions(ApiError(ErrorCode.REQUEST_TIMED_OUT, "no acks in time"))
    try:
        asyncio.run(_commit(timed_out, GroupConfig(offsets_commit_timeout_ms=50)))
    except ApiError as exc:
        assert exc.error_name == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert "REQUEST_TIMED_OUT" in exc.message
    else:
        raise AssertionError("an offset write that timed out was answered as committed")
    assert timed_out.timeouts == [50]
