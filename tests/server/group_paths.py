"""The group paths of a broker that leads no `__consumer_offsets` partition: a real group
coordinator over no partitions, so a group request is answered NOT_COORDINATOR. For tests
of the Kafka listener's dispatcher that send no group request."""

from __future__ import annotations

from collections.abc import Iterator

from coordinator.group.runtime import GroupCoordinator
from metadata.errors import ApiError
from metadata.image import MetadataImage
from server.request_authorization import RequestAuthorizer
from server.requests.groups import GroupPaths
from storage.config import LogConfig


class _NoPartitions:
    def partition_count(self, topic: str) -> int:
        return 0

    async def append(self, *args: object) -> ApiError | None:
        raise AssertionError("a broker without partitions appends nothing")

    def read(self, topic: str, index: int) -> Iterator[object]:
        return iter(())


async def _no_topic_creation() -> None:
    return None


def no_groups() -> GroupPaths:
    return GroupPaths(
        GroupCoordinator(0, _NoPartitions()),  # type: ignore[arg-type]
        RequestAuthorizer(),
        MetadataImage,
        _no_topic_creation,
        lambda: LogConfig().max_message_bytes,
    )
