"""Blocking reads of one offset range of one partition, for callers that own no event loop
and keep nothing open between calls (Spark's planner and tasks, pyspark_strom).

    with SyncCluster(["127.0.0.1:9092"]) as cluster:
        offsets = cluster.list_offsets({TopicPartition("events", 0): EARLIEST})
        for chunk in read_range(cluster, TopicPartition("events", 0), 100, 200):
            ...   # bytes of whole RecordBatch v2, as the leader sent them

`SyncCluster` asks any broker for metadata and each partition's leader for ListOffsets over
plain (synchronous) gRPC channels, which close with it. `read_range` fetches from the leader,
keeping the next Fetch in flight while the caller decodes the previous answer, and looks the
leader up again on NOT_LEADER_OR_FOLLOWER or a broker gone. The chunks may start before the
range (a batch holding its first offset) and end after it: callers filter by offset.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from strom.cluster import CHANNEL_OPTIONS, TopicInfo, parse_bootstrap, topic_info
from strom.errors import AuthenticationError, StromError, error_name, from_pb
from strom.fetcher import EARLIEST, LATEST, TopicPartition
from strom_api.error_codes import ErrorCode
from strom_api.record_batch import LOG_OVERHEAD, parse_header
from strom_api.tls import ChannelSecurity, handshake_failure, refused_authentication, sync_channel
from strom_api.v1 import client_pb2, client_pb2_grpc

__all__ = [
    "EARLIEST",
    "LATEST",
    "FetchedChunk",
    "SyncCluster",
    "TopicPartition",
    "read_range",
]

# Errors after which the leader must be looked up again.
_REPLAN = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)


class SyncCluster:
    """Metadata and ListOffsets, blocking; one channel per broker address, closed by close()."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        tls: ChannelSecurity = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.tls = tls  # None: PLAINTEXT
        self.timeout_s = request_timeout_ms / 1000
        self.backoff_s = retry_backoff_ms / 1000
        self.brokers: dict[int, str] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.internal: set[str] = set()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, Any] = {}

    def __enter__(self) -> SyncCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._stubs.clear()

    def stub_for(self, address: str) -> Any:
        stub = self._stubs.get(address)
        if stub is None:
            channel = sync_channel(address, self.tls, CHANNEL_OPTIONS)
            self._channels[address] = channel
            stub = self._stubs[address] = client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]
        return stub

    def stub(self, broker_id: int) -> Any:
        address = self.brokers.get(broker_id)
        if address is None:
            raise StromError(
                ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not in the metadata", True
            )
        return self.stub_for(address)

    # --- metadata ----------------------------------------------------------------------

    def refresh(self, topics: Iterable[str] | None = None) -> None:
        """Asks the known brokers, then the bootstrap addresses, until one answers or the
        request timeout passes; `topics=None` describes every topic."""
        request = client_pb2.MetadataRequest(topics=sorted(topics or ()))
        deadline = time.monotonic() + self.timeout_s
        last = ""
        while True:
            for address in dict.fromkeys([*self.brokers.values(), *self.bootstrap]):
                remaining = deadline - time.monotonic()
                try:
                    response = self.stub_for(address).Metadata(
                        request, timeout=max(min(remaining, self.timeout_s), 0.05)
                    )
                except grpc.RpcError as exc:
                    details = exc.details() if isinstance(exc, grpc.Call) else None
                    why = handshake_failure(details, self.tls)
                    if refused_authentication(why, self.tls, address):
                        # A refused handshake will not pass on a retry (Kafka's
                        # SslAuthenticationException is not retriable either).
                        raise AuthenticationError(f"{why} (broker {address})") from None
                    last = f"{address}: {why or exc.code().name}"
                    continue
                self._apply(response)
                return
            if time.monotonic() + self.backoff_s >= deadline:
                raise StromError(
                    ErrorCode.NETWORK_EXCEPTION,
                    f"no broker answered a metadata request within {self.timeout_s:g} s "
                    f"(bootstrap {','.join(self.bootstrap)}; last error {last})",
                    retriable=True,
                )
            time.sleep(self.backoff_s)

    def _apply(self, response: Any) -> None:
        if response.brokers:
            self.brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        for topic in response.topics:
            self.topics[topic.name] = topic_info(topic, self.topics.get(topic.name))
            if topic.is_internal:
                self.internal.add(topic.name)

    def all_topics(self) -> list[str]:
        """The names of every usable non-internal topic."""
        self.refresh(None)
        return sorted(
            name
            for name, info in self.topics.items()
            if info.error == ErrorCode.NONE and name not in self.internal
        )

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition numbers; UNKNOWN_TOPIC_OR_PARTITION if it does not exist."""
        info = self.topics.get(topic)
        if info is None or not info.partitions:
            self.refresh([topic])
            info = self.topics.get(topic)
        usable = (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
        if info is None or not info.partitions or info.error not in usable:
            why = f" ({info.message})" if info is not None and info.message else ""
            raise StromError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{topic}' does not exist{why}"
            )
        return sorted(info.partitions)

    def leader(self, tp: TopicPartition) -> int:
        info = self.topics.get(tp.topic)
        found = None if info is None else info.partitions.get(tp.partition)
        return -1 if found is None else found.leader

    # --- ListOffsets -------------------------------------------------------------------

    def list_offsets(
        self, wanted: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition for a timestamp in ms or EARLIEST / LATEST, from
        each partition's leader; offset -1 when no record is that recent."""
        out: dict[TopicPartition, tuple[int, int]] = {}
        todo = dict(wanted)
        deadline = time.monotonic() + self.timeout_s
        if any(tp.topic not in self.topics for tp in todo):
            self.refresh({tp.topic for tp in todo} | set(self.topics))
        while todo:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in todo:
                by_leader.setdefault(self.leader(tp), []).append(tp)
            retry = -1 in by_leader
            for leader, tps in by_leader.items():
                if leader < 0:
                    continue
                try:
                    response = self.stub(leader).ListOffsets(
                        _list_offsets_request(tps, todo), timeout=self.timeout_s
                    )
                except (grpc.RpcError, StromError):
                    retry = True
                    continue
                for topic in response.topics:
                    for p in topic.partitions:
                        tp = TopicPartition(topic.name, p.partition)
                        if p.error.code == 0:
                            out[tp] = (p.offset, p.timestamp)
                            todo.pop(tp, None)
                        elif p.error.retriable or error_name(p.error.code) in _REPLAN:
                            retry = True
                        else:
                            raise from_pb(p.error)
            if todo and retry:
                if time.monotonic() > deadline:
                    raise StromError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"ListOffsets for {sorted(todo)} had no answer within {self.timeout_s:g} s",
                        True,
                    )
                time.sleep(self.backoff_s)
                self.refresh({tp.topic for tp in todo} | set(self.topics))
        return out


def _list_offsets_request(tps: list[TopicPartition], timestamps: dict[TopicPartition, int]) -> Any:
    topics: dict[str, list[Any]] = {}
    for tp in tps:
        topics.setdefault(tp.topic, []).append(
            client_pb2.ListOffsetsRequest.Partition(
                partition=tp.partition, current_leader_epoch=-1, timestamp=timestamps[tp]
            )
        )
    return client_pb2.ListOffsetsRequest(
        topics=[
            client_pb2.ListOffsetsRequest.Topic(name=t, partitions=ps) for t, ps in topics.items()
        ]
    )


# --- reading a range ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchedChunk:
    """Whole batches from one Fetch answer: `data` starts at a batch and holds only whole
    batches; `next_offset` is the offset after its last batch."""

    data: bytes
    next_offset: int
    high_watermark: int
    log_start_offset: int


def _fetch_request(tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int) -> Any:
    return client_pb2.FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        topics=[
            client_pb2.FetchRequest.Topic(
                name=tp.topic,
                partitions=[
                    client_pb2.FetchRequest.Partition(
                        partition=tp.partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        partition_max_bytes=max_bytes,
                    )
                ],
            )
        ],
    )


def _whole_batches(data: bytes) -> tuple[int, int]:
    """(bytes of whole batches at the start of `data`, the offset after the last of them)."""
    pos = 0
    next_offset = -1
    while pos + 61 <= len(data):
        header = parse_header(data, pos)
        end = pos + header.batch_length + LOG_OVERHEAD
        if end > len(data):
            break
        next_offset = header.next_offset
        pos = end
    return pos, next_offset


def read_range(
    cluster: SyncCluster,
    tp: TopicPartition,
    start: int,
    end: int,
    *,
    max_bytes: int = 4 * 1024 * 1024,
    max_wait_ms: int = 100,
) -> Iterator[FetchedChunk]:
    """Fetches [start, end) of one partition from its leader, one Fetch ahead of the caller.

    Raises OFFSET_OUT_OF_RANGE (not retriable) when the leader no longer has `start` or a
    later position (retention or DeleteRecords removed it): the caller decides whether that
    is data loss, and may call again from the log start. Raises REQUEST_TIMED_OUT when the
    range's records do not arrive within the request timeout (the leader's log ends before
    `end`)."""
    if start >= end:
        return
    if tp.topic not in cluster.topics:
        cluster.refresh({tp.topic} | set(cluster.topics))
    position = start
    pending: Any = None  # the Fetch in flight: (future, offset)
    stalled_since: float | None = None
    try:
        while position < end:
            if pending is None or pending[1] != position:
                if pending is not None:
                    pending[0].cancel()
                try:
                    pending = _send(cluster, tp, position, max_bytes, max_wait_ms)
                except StromError as exc:  # no leader known yet
                    pending = None
                    stalled_since = _replan(cluster, tp, stalled_since, exc.name)
                    continue
            future, _ = pending
            pending = None
            try:
                response = future.result()
            except grpc.RpcError as exc:
                stalled_since = _replan(cluster, tp, stalled_since, str(exc.code()))
                continue
            p = response.topics[0].partitions[0]
            name = error_name(p.error.code)
            if name == ErrorCode.OFFSET_OUT_OF_RANGE:
                raise StromError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"{tp.topic}-{tp.partition}: offset {position} is no longer on the leader "
                    f"(log start {p.log_start_offset}, high watermark {p.high_watermark})",
                )
            if name != ErrorCode.NONE:
                if p.error.retriable or name in _REPLAN:
                    stalled_since = _replan(cluster, tp, stalled_since, name)
                    continue
                raise from_pb(p.error)
            records = p.records  # protobuf makes a new bytes object at each access
            size, next_offset = _whole_batches(records)
            if size == 0 or next_offset <= position:
                stalled_since = _wait(cluster, tp, position, end, p, stalled_since)
                continue
            stalled_since = None
            if next_offset < end:  # the next Fetch travels while the caller decodes this one
                try:
                    pending = _send(cluster, tp, next_offset, max_bytes, max_wait_ms)
                except StromError:
                    pending = None  # sent (after a metadata refresh) when the loop comes back
            data = records if size == len(records) else records[:size]
            yield FetchedChunk(data, next_offset, p.high_watermark, p.log_start_offset)
            position = next_offset
    finally:
        if pending is not None:
            pending[0].cancel()


def _send(
    cluster: SyncCluster, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int
) -> tuple[Any, int]:
    leader = cluster.leader(tp)
    if leader < 0:
        cluster.refresh({tp.topic} | set(cluster.topics))
        leader = cluster.leader(tp)
    stub = cluster.stub(leader)
    future = stub.Fetch.future(
        _fetch_request(tp, offset, max_bytes, max_wait_ms),
        timeout=cluster.timeout_s + max_wait_ms / 1000,
    )
    return future, offset


def _replan(
    cluster: SyncCluster, tp: TopicPartition, stalled_since: float | None, why: str
) -> float:
    now = time.monotonic()
    since = now if stalled_since is None else stalled_since
    if now - since > cluster.timeout_s:
        raise StromError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"{tp.topic}-{tp.partition}: no leader answered a fetch within "
            f"{cluster.timeout_s:g} s (last error {why})",
            True,
        )
    time.sleep(cluster.backoff_s)
    cluster.refresh({tp.topic} | set(cluster.topics))
    return since


def _wait(
    cluster: SyncCluster,
    tp: TopicPartition,
    position: int,
    end: int,
    p: Any,
    stalled_since: float | None,
) -> float:
    """An answer without records before `end`: the leader's high watermark is below the
    range (a new leader that has not caught up, or a log truncated below it)."""
    now = time.monotonic()
    since = now if stalled_since is None else stalled_since
    if now - since > cluster.timeout_s:
        raise StromError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"{tp.topic}-{tp.partition}: offsets {position}..{end - 1} did not arrive within "
            f"{cluster.timeout_s:g} s (high watermark {p.high_watermark})",
            True,
        )
    if p.high_watermark > position:
        # Records there but none returned: a batch bigger than max_bytes cannot happen (one
        # batch is always sent), so the leader must have moved; look again.
        cluster.refresh({tp.topic} | set(cluster.topics))
    time.sleep(cluster.backoff_s)
    return since
