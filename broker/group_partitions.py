"""The broker's side of coordinator.partitions.CoordinatorPartitions: a coordinator's
internal topic (`__consumer_offsets`) written through the replica manager's produce path
with acks=all, read back from the local log, and counted in the metadata image. The only
place a coordinator's records meet the broker."""

from __future__ import annotations

from collections.abc import Iterator

from broker.partition import batch_headers
from broker.replica_manager import ReplicaManager
from coordinator.partitions import Records
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode
from strom_api.records import Record, decode_batch, encode_batch

# How much of the log one read takes before the coordinator lets other work in.
_READ_CHUNK_BYTES = 1 << 20


class BrokerCoordinatorPartitions:
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas

    def partition_count(self, topic: str) -> int:
        registration = self.replicas.image.topics.by_name.get(topic)
        return len(registration.partitions) if registration is not None else 0

    async def append(
        self, topic: str, index: int, records: Records, timestamp_ms: int, timeout_ms: int
    ) -> ApiError | None:
        batch = encode_batch([Record(i, timestamp_ms, k, v) for i, (k, v) in enumerate(records)])
        results = await self.replicas.produce(-1, timeout_ms, [(topic, index, batch)])
        return results[(topic, index)].error

    def read(self, topic: str, index: int) -> Iterator[Records]:
        partition = self.replicas.partitions.get((topic, index))
        if partition is None:
            raise ApiError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{index} is not on this broker."
            )
        log = partition.log
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, _READ_CHUNK_BYTES)
            if not data:
                return
            chunk: list[tuple[bytes, bytes | None]] = []
            pos = 0
            for header in batch_headers(data):
                if not header.is_control:
                    _, batch = decode_batch(data, pos)
                    chunk.extend((r.key, r.value) for r in batch if r.key is not None)
                pos += header.size
                offset = header.next_offset
            yield chunk
