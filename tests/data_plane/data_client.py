"""A minimal synchronous client of ClientService for the data-plane tests: find leaders,
produce batches, fetch them back. (The user-facing client library is strom/; these tests
exercise the broker through its wire contract alone.)"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import grpc

from strom_api.records import Record, decode_batches, encode_batch
from strom_api.tls import ChannelSecurity, sync_channel
from strom_api.v1 import client_pb2, client_pb2_grpc, common_pb2

OPTIONS = [("grpc.max_receive_message_length", 128 * 1024 * 1024)]


def error_name(error: Any) -> str:
    return str(common_pb2.ErrorCode.Name(error.code))


class DataClient:
    def __init__(self, addresses: dict[int, str], security: ChannelSecurity = None) -> None:
        self.addresses = addresses  # broker id -> host:port
        self.security = security  # how to dial a TLS or SASL listener (strom_api.tls)
        self._stubs: dict[int, Any] = {}

    def stub(self, broker: int) -> Any:
        if broker not in self._stubs:
            channel = sync_channel(self.addresses[broker], self.security, OPTIONS)
            self._stubs[broker] = client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]
        return self._stubs[broker]

    def metadata(self, topics: Sequence[str] = (), broker: int | None = None) -> Any:
        for b in [broker] if broker is not None else list(self.addresses):
            try:
                return self.stub(b).Metadata(client_pb2.MetadataRequest(topics=topics), timeout=5)
            except grpc.RpcError:
                continue
        raise AssertionError("no broker answered Metadata")

    def leader(self, topic: str, partition: int, timeout_s: float = 20, not_: int = -1) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                meta = self.metadata([topic])
            except AssertionError:
                time.sleep(0.1)
                continue
            found = _leader_in(meta, partition)
            if found >= 0 and found != not_ and found in self.addresses:
                # The leader itself must know it leads (metadata reaches brokers one by one).
                try:
                    if _leader_in(self.metadata([topic], broker=found), partition) == found:
                        return found
                except AssertionError:
                    pass
            time.sleep(0.1)
        raise AssertionError(f"no leader for {topic}-{partition} within {timeout_s} s")

    def produce_raw(
        self,
        broker: int,
        topic: str,
        partition: int,
        records: bytes,
        acks: int = -1,
        timeout_ms: int = 10_000,
    ) -> Any:
        request = produce_request(topic, partition, records, acks, timeout_ms)
        response = self.stub(broker).Produce(request, timeout=timeout_ms / 1000 + 10)
        return response.topics[0].partitions[0] if acks != 0 else None

    def fetch_raw(
        self,
        broker: int,
        topic: str,
        partition: int,
        offset: int,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 1 << 20,
        replica_id: int = 0,
    ) -> Any:
        """One partition's fetch; replica_id -2 reads a follower's replica too."""
        request = client_pb2.FetchRequest(
            replica_id=replica_id,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            topics=[
                client_pb2.FetchRequest.Topic(
                    name=topic,
                    partitions=[
                        client_pb2.FetchRequest.Partition(
                            partition=partition,
                            fetch_offset=offset,
                            partition_max_bytes=max_bytes,
                            current_leader_epoch=-1,
                        )
                    ],
                )
            ],
        )
        response = self.stub(broker).Fetch(request, timeout=max_wait_ms / 1000 + 10)
        return response.topics[0].partitions[0]

    def read_all(self, topic: str, partition: int, timeout_s: float = 20) -> list[Record]:
        """Every record below the high watermark, from the current leader."""
        deadline = time.monotonic() + timeout_s
        records: list[Record] = []
        offset = 0
        while time.monotonic() < deadline:
            leader = self.leader(topic, partition)
            try:
                answer = self.fetch_raw(leader, topic, partition, offset)
            except grpc.RpcError:
                time.sleep(0.2)
                continue
            if answer.HasField("error") and answer.error.code != 0:
                time.sleep(0.2)
                continue
            for _, batch in decode_batches(answer.records):
                records += [r for r in batch if r.offset >= offset]
            if records:
                offset = records[-1].offset + 1
            if offset >= answer.high_watermark:
                return records
        raise AssertionError(f"could not read {topic}-{partition} within {timeout_s} s")


def _leader_in(meta: Any, partition: int) -> int:
    for t in meta.topics:
        for p in t.partitions:
            if p.partition == partition:
                return int(p.leader_id)
    return -1


def batch(
    values: Sequence[bytes],
    producer: tuple[int, int, int] | None = None,
    timestamp: int | None = None,
) -> bytes:
    """One batch of `values` (offsets 0..n-1), idempotent when `producer` = (id, epoch, seq)."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    records = [Record(i, ts, None, v) for i, v in enumerate(values)]
    if producer is None:
        return encode_batch(records)
    pid, epoch, seq = producer
    return encode_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def produce_request(
    topic: str, partition: int, records: bytes, acks: int = -1, timeout_ms: int = 10_000
) -> Any:
    """A ProduceRequest of one partition's records."""
    return client_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topics=[
            client_pb2.ProduceRequest.Topic(
                name=topic,
                partitions=[
                    client_pb2.ProduceRequest.Partition(partition=partition, records=records)
                ],
            )
        ],
    )
