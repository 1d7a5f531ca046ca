"""The consumer's I/O side (Kafka's Fetcher), on the client's event loop.

Per leader broker, one FetchStream keeps fetching the assigned partitions it leads from
their fetch offsets while the consumer's buffer has room (prefetching: the next records
are usually there before poll() asks). A partition's answer is kept whole (the batches as
the broker sent them) and decoded when poll() takes it, starting at the position. Seeking
bumps the partition's generation, so answers to fetches made before the seek are dropped.
Each broker's fetches follow an incremental fetch session (KIP-227, strom/fetch_session.py):
after a full fetch, a request names only the partitions whose fetch offset changed, and the
answer only the partitions with news.
Positions without a starting point are reset by ListOffsets per `auto_offset_reset`;
`wait_for_positions` lets the consumer fix a new partition's starting point before it shows
the partition as assigned (so with "latest" nothing written after that is skipped).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import grpc
import grpc.aio

from strom.cluster import Cluster
from strom.errors import ClientErrorName, StromError, error_name, from_pb
from strom.fetch_session import FINAL_EPOCH, FetchSessionHandler, SessionFetch
from strom_api.error_codes import ErrorCode
from strom_api.record_batch import LOG_OVERHEAD, parse_header
from strom_api.records import read_batch
from strom_api.sasl_client import stream_failed, stream_metadata
from strom_api.v1 import client_pb2

log = logging.getLogger("strom.consumer")

EARLIEST, LATEST = -2, -1
CLOSE_TIMEOUT_S = 2.0  # closing fetch sessions on close(), at most
T = TypeVar("T")


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


_new_consumer_record = functools.partial(tuple.__new__, ConsumerRecord)


@dataclass(frozen=True)
class FetchConfig:
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 50 * 1024 * 1024
    max_partition_fetch_bytes: int = 1024 * 1024
    auto_offset_reset: str = "latest"  # earliest, latest, none
    isolation_level: int = 0
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    buffer_bytes: int = 64 * 1024 * 1024  # prefetched, not yet polled


@dataclass
class _Completed:
    tp: TopicPartition
    data: bytes
    generation: int
    pos: int = 0  # bytes of `data` already decoded


class Fetcher:
    def __init__(self, cluster: Cluster, config: FetchConfig) -> None:
        self.cluster = cluster
        self.config = config
        self.assignment: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int] = {}
        self.fetch_offsets: dict[TopicPartition, int] = {}
        self.generation: dict[TopicPartition, int] = {}
        # Per partition, the number of the latest position request (a seek or an offset
        # reset, explicit or automatic): an offset lookup answers only if no later request
        # was made meanwhile, so seek_to_beginning() right after assign() is not undone by
        # the automatic reset assign() started (Kafka's SubscriptionState keeps one reset
        # request per partition, the latest).
        self._position_requests: dict[TopicPartition, int] = {}
        # Partitions whose offset lookup is in flight: not "without a position" meanwhile,
        # so the fetch manager does not start an automatic reset behind an explicit one.
        self._looking_up: dict[TopicPartition, int] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self._completed: deque[_Completed] = deque()
        self._buffered = 0
        self._data = asyncio.Event()
        self._room = asyncio.Event()
        self._tasks: dict[int, asyncio.Task[None]] = {}
        # Per broker, the incremental fetch session (KIP-227) its fetch stream follows; it
        # outlives the stream: a new stream to the same broker goes on in the session.
        self.sessions: dict[int, FetchSessionHandler[TopicPartition]] = {}
        self._manager: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._positioned = asyncio.Event()  # set whenever positions were worked out
        self._errors: list[StromError] = []
        self.on_reset: Callable[[TopicPartition], int | None] = lambda tp: None
        self.closed = False

    # --- assignment and positions ---------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        wanted = list(dict.fromkeys(partitions))
        for tp in set(self.assignment) - set(wanted):
            self.positions.pop(tp, None)
            self.fetch_offsets.pop(tp, None)
            self._drop_buffered(tp)
        self.assignment = wanted
        self.paused &= set(wanted)
        self.cluster.wanted.update(tp.topic for tp in wanted)
        self._kick()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self.assignment:
            raise StromError(
                ClientErrorName.ILLEGAL_STATE, f"{tp.topic}-{tp.partition} is not assigned"
            )
        self._request_position(tp)
        self.positions[tp] = offset
        self.fetch_offsets[tp] = offset
        self._drop_buffered(tp)
        self._positioned.set()
        self._kick()

    def _request_position(self, tp: TopicPartition) -> int:
        number = self._position_requests[tp] = self._position_requests.get(tp, 0) + 1
        return number

    def _drop_buffered(self, tp: TopicPartition) -> None:
        self.generation[tp] = self.generation.get(tp, 0) + 1
        kept = deque(c for c in self._completed if c.tp != tp)
        self._buffered = sum(len(c.data) - c.pos for c in kept)
        self._completed = kept
        self._room.set()

    def _kick(self) -> None:
        self._changed.set()
        if self._manager is None or self._manager.done():
            self._manager = asyncio.create_task(self._manage())

    async def reset_offsets(self, tps: Iterable[TopicPartition], timestamp: int) -> None:
        requests = {tp: self._request_position(tp) for tp in tps}
        moved = False
        for tp in requests:
            self._looking_up[tp] = self._looking_up.get(tp, 0) + 1
        try:
            found = await self.list_offsets(dict.fromkeys(requests, timestamp))
        finally:
            for tp in requests:
                self._looking_up[tp] -= 1
                if not self._looking_up[tp]:
                    del self._looking_up[tp]
        for tp, (offset, _) in found.items():
            if tp in self.assignment and self._position_requests.get(tp) == requests.get(tp):
                self.positions[tp] = self.fetch_offsets[tp] = offset
                self.generation[tp] = self.generation.get(tp, 0) + 1
                moved = True
        self._positioned.set()
        if moved:
            self._kick()  # a fetch task may have found nothing to fetch meanwhile and ended

    async def wait_for_positions(self, tps: Iterable[TopicPartition], timeout_s: float) -> None:
        """Waits, at most `timeout_s`, until each of `tps` has a position, is no longer
        assigned, or an error waits for poll() (auto_offset_reset='none'); the positions are
        worked out by the fetch manager, which assign() started."""
        wanted = set(tps)
        deadline = time.monotonic() + timeout_s
        while not self._errors and not self.closed:
            assigned = set(self.assignment)
            if all(tp in self.positions or tp not in assigned for tp in wanted):
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._positioned.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._positioned.wait()
            except TimeoutError:
                return

    async def list_offsets(
        self, wanted: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition for a timestamp or EARLIEST/LATEST, from each
        partition's leader, refreshing metadata when a leader moved."""
        found = await self.list_offsets_and_epochs(wanted)
        return {tp: (offset, timestamp) for tp, (offset, timestamp, _) in found.items()}

    async def list_offsets_and_epochs(
        self, wanted: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int, int]]:
        """list_offsets with the leader epoch of the batch holding each offset (-1 unknown),
        as Kafka's Admin.listOffsets answers it (ListOffsetsResultInfo)."""
        out: dict[TopicPartition, tuple[int, int, int]] = {}
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        todo = dict(wanted)
        while todo:
            if time.monotonic() > deadline:
                raise StromError(
                    ErrorCode.REQUEST_TIMED_OUT, f"ListOffsets for {sorted(todo)} timed out", True
                )
            await self._ensure_metadata(t.topic for t in todo)
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in todo:
                by_leader.setdefault(self.cluster.leader(*tp), []).append(tp)
            retry = False
            for leader, tps in by_leader.items():
                if leader < 0:
                    retry = True
                    continue
                topics: dict[str, list[Any]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(
                        client_pb2.ListOffsetsRequest.Partition(
                            partition=tp.partition, current_leader_epoch=-1, timestamp=todo[tp]
                        )
                    )
                request = client_pb2.ListOffsetsRequest(
                    isolation_level=self.config.isolation_level,  # type: ignore[arg-type]
                    topics=[
                        client_pb2.ListOffsetsRequest.Topic(name=t, partitions=ps)
                        for t, ps in topics.items()
                    ],
                )
                try:
                    response = await self.cluster.stub(leader).ListOffsets(
                        request, timeout=self.config.request_timeout_ms / 1000
                    )
                except (grpc.aio.AioRpcError, StromError):
                    retry = True
                    continue
                for topic in response.topics:
                    for p in topic.partitions:
                        tp = TopicPartition(topic.name, p.partition)
                        if p.error.code == 0:
                            out[tp] = (p.offset, p.timestamp, p.leader_epoch)
                            todo.pop(tp, None)
                        elif p.error.retriable:
                            retry = True
                        else:
                            raise from_pb(p.error)
            if todo and retry:
                self.cluster.mark_stale()
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        return out

    async def _ensure_metadata(self, topics: Iterable[str]) -> None:
        names = set(topics)
        if self.cluster.needs_refresh() or not names <= set(self.cluster.topics):
            try:
                await self.cluster.refresh(names)
            except StromError as exc:
                log.debug("metadata refresh failed: %s", exc)

    # --- fetching --------------------------------------------------------------------

    async def _manage(self) -> None:
        """Starts a fetch task for each leader of an assigned partition; restarted by
        assign/seek/resume and by a task that finds its leader changed."""
        while not self.closed:
            self._changed.clear()
            await self._ensure_metadata(tp.topic for tp in self.assignment)
            unset = [
                tp
                for tp in self.assignment
                if tp not in self.positions and tp not in self._looking_up
            ]
            if unset:
                await self._initial_positions(unset)
            leaders = {self.cluster.leader(*tp) for tp in self.assignment if tp not in self.paused}
            for leader in leaders:
                if leader >= 0 and (leader not in self._tasks or self._tasks[leader].done()):
                    self._tasks[leader] = asyncio.create_task(self._fetch_from(leader))
            if any(self.cluster.leader(*tp) < 0 for tp in self.assignment):
                self.cluster.mark_stale()
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                continue
            await self._changed.wait()

    async def _initial_positions(self, tps: list[TopicPartition]) -> None:
        pending = []
        for tp in tps:
            committed = self.on_reset(tp)
            if committed is not None and committed >= 0:
                self.positions[tp] = self.fetch_offsets[tp] = committed
            else:
                pending.append(tp)
        if not pending:
            self._positioned.set()
            return
        policy = self.config.auto_offset_reset
        if policy == "none":
            self._errors.append(
                StromError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"no position for {pending} and auto_offset_reset='none'",
                )
            )
            self._positioned.set()
            return
        try:
            await self.reset_offsets(pending, EARLIEST if policy == "earliest" else LATEST)
        except StromError as exc:
            log.info("could not reset offsets of %s: %s", pending, exc)
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            self._changed.set()

    async def _fetch_from(self, leader: int) -> None:
        backoff = self.config.retry_backoff_ms / 1000
        call = None
        channel = None
        try:
            stub = self.cluster.stub(leader)
            channel = self.cluster.channel(leader)
            call = stub.FetchStream(metadata=await stream_metadata(channel))
            while not self.closed:
                tps = [
                    tp
                    for tp in self.assignment
                    if tp not in self.paused
                    and tp in self.fetch_offsets
                    and self.cluster.leader(*tp) == leader
                ]
                if not tps:
                    return
                while self._buffered >= self.config.buffer_bytes and not self.closed:
                    self._room.clear()
                    await self._room.wait()
                generations = {tp: self.generation.get(tp, 0) for tp in tps}
                offsets = {tp: self.fetch_offsets[tp] for tp in tps}
                session = self.sessions.setdefault(leader, FetchSessionHandler())
                sent = session.build(offsets)
                try:
                    await call.write(self._request(sent))
                    async with asyncio.timeout(
                        self.config.fetch_max_wait_ms / 1000 + self.config.request_timeout_ms / 1000
                    ):
                        response = await call.read()
                    if response is grpc.aio.EOF:
                        raise ConnectionError("the broker closed the fetch stream")
                except BaseException:
                    session.handle_error()  # the broker may have taken the epoch unseen
                    raise
                error = error_name(response.error.code) if response.HasField("error") else None
                if not session.handle_response(sent, response.session_id, error):
                    log.debug("fetch session with broker %d: %s", leader, error)
                    continue  # the next fetch is a full one
                if self._apply(response, offsets, generations):
                    self._kick()
                    return
        except (grpc.aio.AioRpcError, ConnectionError, TimeoutError, StromError) as exc:
            if channel is not None:
                stream_failed(channel, exc)
            log.debug("fetching from broker %d: %s", leader, exc)
            self.cluster.mark_stale()
            await asyncio.sleep(backoff)
            self._kick()
        finally:
            if call is not None:
                call.cancel()

    def _request(self, sent: SessionFetch[TopicPartition]) -> Any:
        topics: dict[str, list[Any]] = {}
        for tp, offset in sent.named.items():
            topics.setdefault(tp.topic, []).append(
                client_pb2.FetchRequest.Partition(
                    partition=tp.partition,
                    current_leader_epoch=-1,
                    fetch_offset=offset,
                    partition_max_bytes=self.config.max_partition_fetch_bytes,
                )
            )
        forgotten: dict[str, list[int]] = {}
        for tp in sent.forgotten:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        return client_pb2.FetchRequest(
            max_wait_ms=self.config.fetch_max_wait_ms,
            min_bytes=self.config.fetch_min_bytes,
            max_bytes=self.config.fetch_max_bytes,
            isolation_level=self.config.isolation_level,  # type: ignore[arg-type]
            topics=[
                client_pb2.FetchRequest.Topic(name=t, partitions=ps) for t, ps in topics.items()
            ],
            session_id=sent.session_id,
            session_epoch=sent.epoch,
            forgotten_topics=[
                client_pb2.FetchRequest.ForgottenTopic(name=t, partitions=ps)
                for t, ps in forgotten.items()
            ],
        )

    def _apply(
        self,
        response: Any,
        offsets: dict[TopicPartition, int],
        generations: dict[TopicPartition, int],
    ) -> bool:
        """Buffers the answer; returns whether the leaders must be looked up again. An
        incremental answer leaves out the partitions with nothing new."""
        replan = False
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition)
                if (
                    self.generation.get(tp, 0) != generations.get(tp)
                    or tp not in self.fetch_offsets
                ):
                    continue  # sought or unassigned meanwhile
                name = error_name(p.error.code)
                if name == ErrorCode.NONE:
                    self.high_watermarks[tp] = p.high_watermark
                    records = p.records  # protobuf copies the bytes at each access
                    if records:
                        end = _next_offset_after(records)
                        if end > self.fetch_offsets[tp]:
                            self.fetch_offsets[tp] = end
                            self._completed.append(_Completed(tp, records, generations[tp]))
                            self._buffered += len(records)
                            self._data.set()
                elif name == ErrorCode.OFFSET_OUT_OF_RANGE:
                    log.info(
                        "%s-%d: offset %d out of range; resetting (%s)",
                        tp.topic,
                        tp.partition,
                        offsets[tp],
                        self.config.auto_offset_reset,
                    )
                    self.positions.pop(tp, None)
                    self.fetch_offsets.pop(tp, None)
                    replan = True
                elif p.error.retriable:
                    self.cluster.mark_stale()
                    replan = True
                else:
                    self._errors.append(from_pb(p.error))
        return replan

    # --- polling ---------------------------------------------------------------------

    async def poll(
        self, max_records: int, timeout_s: float
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        deadline = time.monotonic() + max(timeout_s, 0)
        while True:
            if self._errors:
                raise self._errors.pop(0)
            out = _without_gc(self._take, max_records)
            remaining = deadline - time.monotonic()
            if out or remaining <= 0:
                return out
            self._data.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._data.wait()
            except TimeoutError:
                pass

    def _take(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        taken = 0
        while self._completed and taken < max_records:
            completed = self._completed[0]
            tp = completed.tp
            if (
                completed.generation != self.generation.get(tp, 0)
                or tp not in self.positions
                or tp in self.paused
            ):
                self._pop()
                continue
            data = completed.data
            while completed.pos < len(data) and taken < max_records:
                header, records = read_batch(data, completed.pos)
                size = header.batch_length + LOG_OVERHEAD
                position = self.positions[tp]
                kept = 0
                cut = False
                if not header.is_control:
                    start = 0
                    if records and records[0].offset < position:  # the batch holding it
                        start = next(
                            (i for i, r in enumerate(records) if r.offset >= position),
                            len(records),
                        )
                    room = max_records - taken
                    chosen = records[start : start + room]
                    cut = len(records) - start > room
                    if chosen:
                        # One comprehension per batch; ConsumerRecords built from tuples in C.
                        topic, partition = tp.topic, tp.partition
                        stamp_type = 1 if header.log_append_time else 0  # stamped by decode
                        new = _new_consumer_record
                        # Records or aiokafka's C records (strom_api/records.read_batch):
                        # the same fields; each ConsumerRecord gets a headers list of its own.
                        out.setdefault(tp, []).extend(
                            [
                                new(
                                    (
                                        topic,
                                        partition,
                                        r.offset,
                                        r.timestamp,
                                        stamp_type,
                                        r.key,
                                        r.value,
                                        [*r.headers] if r.headers else [],
                                    )
                                )
                                for r in chosen
                            ]
                        )
                        kept = len(chosen)
                        self.positions[tp] = chosen[-1].offset + 1
                taken += kept
                if cut:
                    break  # max_records reached inside this batch: resume here next poll
                # Past the batch's end even when compaction left gaps in it.
                self.positions[tp] = max(self.positions[tp], header.next_offset)
                completed.pos += size
                self._buffered -= size
            if completed.pos >= len(data):
                self._completed.popleft()
                self._room.set()
        return out

    def _pop(self) -> None:
        completed = self._completed.popleft()
        self._buffered -= len(completed.data) - completed.pos
        self._room.set()

    async def close(self) -> None:
        self.closed = True
        self._room.set()
        tasks = [*self._tasks.values(), *([self._manager] if self._manager else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(
            *(self._close_session(b, s) for b, s in self.sessions.items() if s.session_id),
            return_exceptions=True,
        )

    async def _close_session(self, broker: int, session: FetchSessionHandler[Any]) -> None:
        """Frees the broker's slot now rather than after its eviction time, as Kafka's
        consumer does on close (AbstractFetch.maybeCloseFetchSessions): a fetch of no
        partitions with the final epoch, -1. Best effort, briefly: a broker that does not
        answer evicts the session in time."""
        request = client_pb2.FetchRequest(
            max_wait_ms=0, session_id=session.session_id, session_epoch=FINAL_EPOCH
        )
        try:
            await self.cluster.stub(broker).Fetch(
                request, timeout=min(self.config.request_timeout_ms / 1000, CLOSE_TIMEOUT_S)
            )
        except (grpc.aio.AioRpcError, StromError) as exc:
            log.debug("closing the fetch session with broker %d: %s", broker, exc)


def _without_gc(take: Callable[[int], T], max_records: int) -> T:
    """`take` with the cyclic garbage collector paused, as msgpack advises for bulk
    unpacking: a poll builds two containers per record (the record, its headers list), and
    every 700 of them would start a collection that finds no garbage but promotes the
    records being built to older generations, whose growth triggers full collections
    (py-spy: gc_collect_main 14% of a consumer's samples; gc.callbacks: 28% of the wall time
    of reading 100-byte records). Reference counting still frees everything; the
    collector's state is restored afterwards, so a process that disabled it keeps it off."""
    if not gc.isenabled():
        return take(max_records)
    gc.disable()
    try:
        return take(max_records)
    finally:
        gc.enable()


def _next_offset_after(data: bytes) -> int:
    pos = 0
    end = 0
    while pos < len(data):
        header = parse_header(data, pos)
        end = header.next_offset
        pos += header.batch_length + LOG_OVERHEAD
    return end
