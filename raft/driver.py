"""Runs a RaftCore on an asyncio event loop with real disks and the gRPC transport.

One task owns the core and is its only caller: it steps inbound messages and ticks timers,
batches proposals for `controller.quorum.append.linger.ms` so that one fsync and one round
of fetches carry many records, and carries out each Ready through raft/ready_handler.py
(the order lives there, shared with the Raft simulator) with this node's ports: the entries
the Ready names read (fetch answers, what to apply: raft/ready_reads.py), and quorum-state
and the entries and truncations the Ready lists (the core keeps them in memory until then,
raft/unstable_log.py) written and fsynced, in a worker thread, off the loop; the gRPC
transport; the state machine's listener; the appends waiting for their commit. While it
awaits a disk write no other code touches the core or the log: inbound messages and appends
only queue up.

Everything that varies is passed in, as Kafka's KafkaRaftClient takes it: the clock
(`clock`, monotonic milliseconds), randomness (`rng`), the transport (`make_transport`) and
the snapshot store (`open_snapshots`); the defaults are the node's.

Snapshots (KIP-630) live beside the log as `<end_offset>-<epoch>.checkpoint` files
(raft/snapshot_files.py). The state machine writes one with create_snapshot(); once the
log is larger than `metadata.max.retention.bytes` it then starts at the latest snapshot.
A follower's download is written as its Readies list the chunks, on the loop itself (the
store is not thread-safe; one fsync, at the last chunk, rarely); the chunks a leader sends
are read with the Ready's other reads, in the disk thread.

Refused messages (raft/admission.py in the core, raft/wire_checks.py at the transport) are
counted in stats() and logged at most once per sender per minute (raft/refusal_log.py). If
the driver's task ever ends with an exception, the callbacks given to
add_failure_callback() get it: the node ends the process (server/node.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from raft.config import RaftConfig
from raft.core import NotLeaderError, RaftCore
from raft.limits import MAX_EPOCH
from raft.messages import (
    Entry,
    LeaderAndEpoch,
    Message,
    RaftStats,
    Ready,
    SnapshotChunk,
    SnapshotId,
)
from raft.quorum_state import QuorumStateStore
from raft.ready_handler import ReadyHandler
from raft.ready_reads import ReadsDone, carry_out_reads, reads_disk
from raft.refusal_log import RefusalLog
from raft.roles import Role
from raft.snapshot_files import FileSnapshotStore
from raft.snapshots import SnapshotStore, write_snapshot_chunk
from raft.storage_log import METADATA_TOPIC_PARTITION, open_raft_log
from raft.transport import AdmitStream, GrpcTransport, RaftServer
from raft.unstable_log import write_to
from storage.errors import StorageError
from storage.log_manager import LogManager

log = logging.getLogger("strom.raft")


@dataclass(frozen=True, slots=True)
class DriverStats:
    """The core's numbers plus what only the driver sees: commit latency of appends (from
    append() to commit) and the transport's message counts."""

    core: RaftStats
    appends_committed: int
    commit_latency_avg_ms: float
    commit_latency_max_ms: int
    messages_sent: int
    messages_received: int
    messages_dropped: int
    messages_refused: int = 0  # malformed at the edge, or refused by the core


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """One replica as the leader sees it (Kafka's DescribeQuorum); times are wall-clock
    milliseconds since the epoch, -1 when unknown."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]


class RaftListener(Protocol):
    """The state machine's side (Kafka's RaftClient.Listener)."""

    def handle_commit(self, entries: Sequence[Entry]) -> None: ...

    def handle_load_snapshot(self, snapshot_id: SnapshotId, records: Sequence[bytes]) -> None:
        """Replace the whole state with the snapshot's (the records create_snapshot was
        given); handle_commit then goes on from snapshot_id.end_offset."""
        ...

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None: ...


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class DriverTransport(Protocol):
    """How the driver reaches its peers (raft/transport.GrpcTransport on a node). Inbound
    messages go to the `deliver` callback it was made with."""

    sent: int
    received: int
    dropped: int
    refused: int

    def start(self) -> None: ...

    def send(self, message: Message) -> None: ...

    async def close(self) -> None: ...


# make_transport(deliver, on_refused): the transport, delivering inbound messages to
# `deliver` and reporting messages refused at the edge to `on_refused(sender, why)`.
MakeTransport = Callable[[Callable[[Message], None], Callable[[int, str], None]], DriverTransport]


class DriverSnapshotStore(SnapshotStore, Protocol):
    """The snapshot store as the driver uses it beyond the core (raft/snapshot_files.py)."""

    def ids(self) -> list[SnapshotId]: ...

    def write_file(self, snapshot_id: SnapshotId, records: list[bytes]) -> None: ...

    def add(self, snapshot_id: SnapshotId) -> None: ...

    def read_records(self, snapshot_id: SnapshotId) -> list[bytes]: ...

    def close(self) -> None: ...


class RaftDriver:
    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, str],
        listen_address: str | None,
        metadata_dir: str,
        listener: RaftListener,
        config: RaftConfig | None = None,
        add_services: Callable[[Any], None] | None = None,
        server_credentials: Any = None,
        open_channel: Callable[[str], Any] | None = None,
        tls: bool = False,
        admit_stream: AdmitStream | None = None,
        server_options: Sequence[tuple[str, Any]] = (),
        *,
        clock: Callable[[], int] = _now_ms,
        rng: random.Random | None = None,
        make_transport: MakeTransport | None = None,
        open_snapshots: Callable[[str], DriverSnapshotStore] = FileSnapshotStore,
    ) -> None:
        """`voters` maps each voter id to its "host:port"; a node not among them is an
        observer. The metadata log lives in `<metadata_dir>/__cluster_metadata-0`.
        `listen_address` None: no server (an observer is only ever the one asking).
        `add_services` gets the node's gRPC server before it starts, to add the node's
        other services on the same listener (the controller's API).
        `server_credentials` (grpc.ServerCredentials) make the listener TLS;
        `open_channel(address)` makes the channels to the voters (raft/transport.py),
        TLS ones when `tls`. `admit_stream` checks who opens a Raft stream to this node
        (raft/transport.AdmitStream). `server_options`: gRPC options of the listener (the
        node's message size limits). `clock`, `rng`, `make_transport` and
        `open_snapshots(directory)` replace the node's clock, randomness, gRPC transport
        (the listener is served only with the gRPC one) and snapshot files."""
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._make_transport = make_transport
        self._open_snapshots = open_snapshots
        self.admit_stream = admit_stream
        self.server_credentials = server_credentials
        self.server_options = tuple(server_options)
        self.open_channel = open_channel
        self.tls = tls
        self.node_id = node_id
        self.voters = dict(voters)
        self.listen_address = listen_address
        self.metadata_dir = metadata_dir
        self.listener = listener
        self.config = config or RaftConfig()
        self.add_services = add_services
        self.core: RaftCore | None = None
        self._inbox: deque[Message] = deque()
        self._wake = asyncio.Event()
        # Held while a Ready is carried out and while the log is compacted: stop() carries
        # out the Readies of its resignation while the loop's task may be inside one, and a
        # Ready not yet advanced would otherwise have its log writes handed out twice (and
        # the log written from two threads at once).
        self._disk = asyncio.Lock()
        self._pending: list[tuple[bytes, asyncio.Future[int]]] = []  # lingering appends
        self._linger_deadline: int | None = None
        # (offset, commit future, when append() was called) of proposed, uncommitted records
        self._awaiting: list[tuple[int, asyncio.Future[int], int]] = []
        self._appended_ms: dict[asyncio.Future[int], int] = {}
        self.appends_committed = self._latency_total_ms = self._latency_max_ms = 0
        self._task: asyncio.Task[None] | None = None
        self._server: RaftServer | None = None
        self._stopping = False
        self.bound_port = 0
        self.refusals = RefusalLog(log)

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        # The metadata log lives under a LogManager like any partition, so its recovery point
        # and clean-shutdown marker are kept: a clean restart scans nothing.
        self.log_manager = LogManager([self.metadata_dir])
        await asyncio.to_thread(self.log_manager.startup)
        log = self.log_manager.get_or_create_log(*METADATA_TOPIC_PARTITION)
        directory = log.directory
        self.snapshots = self._open_snapshots(directory)
        self.raft_log = open_raft_log(log, self.snapshots.ids())
        self.store = QuorumStateStore(directory, frozenset(self.voters))
        state = await asyncio.to_thread(self.store.read)
        if self.raft_log.last_epoch() > MAX_EPOCH:
            raise StorageError(
                f"the metadata log in {directory} holds entries of epoch "
                f"{self.raft_log.last_epoch()}, beyond the largest epoch {MAX_EPOCH} (written "
                "by a version that accepted forged epochs): the node cannot rejoin the quorum"
            )
        self.core = RaftCore(
            self.node_id,
            frozenset(self.voters),
            self.raft_log,
            state,
            self.config,
            self._rng,
            self._clock(),
            self.snapshots,
        )
        self._ready = ReadyHandler(self.core, _NodePorts(self))
        if self._make_transport is not None:
            self.transport = self._make_transport(self._deliver, self.refusals.refused)
        else:
            self.transport = GrpcTransport(
                self.node_id,
                self.voters,
                self._deliver,
                self.refusals.refused,
                self.open_channel,
                self.tls,
                self.admit_stream,
            )
        if self.listen_address is not None and isinstance(self.transport, GrpcTransport):
            self._server = RaftServer(
                self.transport, self.listen_address, self.server_credentials, self.server_options
            )
            self.bound_port = self._server.port
            if self.add_services is not None:
                self.add_services(self._server.server)
            await self._server.start()
        self.transport.start()
        self._task = asyncio.create_task(self._run())

    def add_failure_callback(self, callback: Callable[[BaseException], None]) -> None:
        """`callback(error)` runs if the driver's task ends with an exception (a bug, or a
        disk that fails a write): the node can then no longer take part in the quorum."""
        task = self._task
        if task is None:
            raise RuntimeError("the Raft driver is not started")

        def done(task: asyncio.Task[None]) -> None:
            error = None if task.cancelled() else task.exception()
            if error is not None:
                callback(error)

        task.add_done_callback(done)

    async def stop(self, graceful: bool = True) -> None:
        """Stops the node; a graceful stop first hands leadership to the most caught-up
        voter (EndQuorumEpoch) and gives the messages a moment to leave."""
        if self.core is not None and graceful and self.core.role is Role.LEADER:
            self.core.resign()
            await self._process_ready()
            await asyncio.sleep(0.05)
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task
        await self.transport.close()
        if self._server is not None:
            await self._server.stop(0.2)
        self._fail_all(NotLeaderError(LeaderAndEpoch(-1, self.epoch)))
        self.snapshots.close()
        await asyncio.to_thread(self.log_manager.shutdown)  # flush, checkpoint, mark clean

    # --- the state machine's API ---------------------------------------------------------

    async def append(self, records: Sequence[bytes]) -> int:
        """Appends records through the leader's log; returns the offset of the last once it
        is committed. Raises NotLeaderError on a node that is not (or stops being) leader."""
        core = self._require_core()
        if core.role is not Role.LEADER:
            raise NotLeaderError(LeaderAndEpoch(core.leader_id, core.epoch))
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in records]
        now = self._clock()
        for future in futures:
            self._appended_ms[future] = now
        self._pending.extend(zip(records, futures, strict=True))
        if self._linger_deadline is None:
            self._linger_deadline = self._clock() + self.config.append_linger_ms
            self._wake.set()
        offsets: list[int] = await asyncio.gather(*futures)
        return offsets[-1]

    async def create_snapshot(self, end_offset: int, records: Sequence[bytes]) -> SnapshotId:
        """Stores a snapshot of the state machine after it applied every entry below
        `end_offset`: `records` rebuild that state (handle_load_snapshot gets them back).
        Then, if the log is over `metadata.max.retention.bytes`, it starts there."""
        snapshot_id = self._require_core().snapshot_id_for(end_offset)
        await asyncio.to_thread(self.snapshots.write_file, snapshot_id, list(records))
        self.snapshots.add(snapshot_id)
        async with self._disk:
            self._maybe_clean_log()
        return snapshot_id

    def _maybe_clean_log(self) -> None:
        core = self._require_core()
        latest = self.snapshots.latest()
        if latest is None or latest.end_offset > core.applied:
            return
        if self.raft_log.log.size > self.config.max_retention_bytes:
            core.compact_log(latest)

    @property
    def role(self) -> Role:
        return self._require_core().role

    @property
    def epoch(self) -> int:
        return self.core.epoch if self.core is not None else -1

    @property
    def leader_id(self) -> int:
        return self._require_core().leader_id

    @property
    def high_watermark(self) -> int:
        return self._require_core().high_watermark

    # --- the loop ------------------------------------------------------------------------

    def _require_core(self) -> RaftCore:
        if self.core is None:
            raise RuntimeError("the Raft driver is not started")
        return self.core

    def _deliver(self, message: Message) -> None:
        self._inbox.append(message)
        self._wake.set()

    async def _run(self) -> None:
        core = self._require_core()
        while not self._stopping:
            wakeup = core.next_wakeup_ms()
            if self._linger_deadline is not None:
                wakeup = min(wakeup, self._linger_deadline)
            timeout = max(0, wakeup - self._clock()) / 1000
            if not self._inbox:
                try:
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
                except TimeoutError:
                    pass
            self._wake.clear()
            now = self._clock()
            core.tick(now)
            while self._inbox:
                message = self._inbox.popleft()
                refused = core.step(message)
                if refused is not None:
                    self.refusals.refused(message.src, f"{type(message).__name__}: {refused}")
            if self._linger_deadline is not None and now >= self._linger_deadline:
                self._propose_pending()
            await self._process_ready()

    def _propose_pending(self) -> None:
        core = self._require_core()
        pending, self._pending, self._linger_deadline = self._pending, [], None
        try:
            last = core.propose([record for record, _ in pending])
        except NotLeaderError as exc:
            for _, future in pending:
                if not future.done():
                    future.set_exception(exc)
            return
        first = last - len(pending) + 1
        self._awaiting.extend(
            (first + i, f, self._appended_ms.pop(f, self._clock()))
            for i, (_, f) in enumerate(pending)
        )

    async def _process_ready(self) -> None:
        async with self._disk:
            await self._ready.handle_all()

    def _complete_committed(self, high_watermark: int) -> None:
        still = []
        now = self._clock()
        for offset, future, appended_ms in self._awaiting:
            if offset < high_watermark:
                if not future.done():
                    future.set_result(offset)
                    latency = now - appended_ms
                    self.appends_committed += 1
                    self._latency_total_ms += latency
                    self._latency_max_ms = max(self._latency_max_ms, latency)
            else:
                still.append((offset, future, appended_ms))
        self._awaiting = still

    def _fail_all(self, error: Exception) -> None:
        futures = [f for _, f, _ in self._awaiting] + [f for _, f in self._pending]
        for future in futures:
            if not future.done():
                future.set_exception(error)
        self._awaiting, self._pending, self._linger_deadline = [], [], None
        self._appended_ms.clear()

    def describe_quorum(self) -> QuorumDescription | None:
        """The quorum as this node leads it; None when it does not lead."""
        core = self._require_core()
        leader = core.leader
        if core.role is not Role.LEADER or leader is None:
            return None
        now_mono, now_wall = self._clock(), time.time_ns() // 1_000_000

        def wall(mono_ms: int) -> int:
            return -1 if mono_ms < 0 else now_wall - (now_mono - mono_ms)

        me = ReplicaDescription(self.node_id, core.log.end_offset(), now_wall, now_wall)
        others = [
            ReplicaDescription(r, s.end_offset, wall(s.last_fetch_ms), wall(s.last_caught_up_ms))
            for r, s in sorted(leader.replicas.items())
        ]
        return QuorumDescription(
            self.node_id,
            core.epoch,
            core.high_watermark,
            tuple([me] + [r for r in others if r.replica_id in core.voters]),
            tuple(r for r in others if r.replica_id not in core.voters),
        )

    def stats(self) -> DriverStats:
        committed = self.appends_committed
        return DriverStats(
            core=self._require_core().stats(),
            appends_committed=committed,
            commit_latency_avg_ms=self._latency_total_ms / committed if committed else 0.0,
            commit_latency_max_ms=self._latency_max_ms,
            messages_sent=self.transport.sent,
            messages_received=self.transport.received,
            messages_dropped=self.transport.dropped,
            messages_refused=self.transport.refused + self._require_core().messages_refused,
        )


class _NodePorts:
    """The node's side of raft/ready_handler.ReadyPorts: real disk, gRPC, the listener."""

    def __init__(self, driver: RaftDriver) -> None:
        self.driver = driver

    async def read(self, ready: Ready) -> ReadsDone:
        # In the disk thread, as the writes are; no thread hop when the Ready's own writes
        # hold every entry it names (a leader answering fetches for what it just appended).
        driver = self.driver
        if reads_disk(ready):
            return await asyncio.to_thread(
                carry_out_reads, ready, driver.raft_log, driver.snapshots
            )
        return carry_out_reads(ready, driver.raft_log, driver.snapshots)

    async def persist(self, ready: Ready) -> None:
        if ready.election_state is not None or ready.sync_log:
            await asyncio.to_thread(self._write, ready)

    def _write(self, ready: Ready) -> None:
        """In a worker thread: quorum-state, then the log's writes and its fsync."""
        driver = self.driver
        if ready.election_state is not None:
            driver.store.write(ready.election_state)
        write_to(driver.raft_log, ready.log_writes)
        if ready.sync_log:
            driver.raft_log.sync()

    def send(self, message: Message) -> None:
        self.driver.transport.send(message)

    async def write_snapshot_chunk(self, chunk: SnapshotChunk) -> bool:
        # On the loop, as the store is not thread-safe (stats() and the leader's reads use
        # it there); a follower downloads rarely, and fsyncs once, at the freeze.
        return write_snapshot_chunk(self.driver.snapshots, chunk)

    async def load_snapshot(self, snapshot_id: SnapshotId) -> None:
        records = await asyncio.to_thread(self.driver.snapshots.read_records, snapshot_id)
        self.driver.listener.handle_load_snapshot(snapshot_id, records)

    def apply(self, entries: Sequence[Entry]) -> None:
        self.driver.listener.handle_commit(entries)

    def leader_changed(self, leader: LeaderAndEpoch) -> None:
        self.driver.listener.handle_leader_change(leader)
        if leader.leader_id != self.driver.node_id:
            self.driver._fail_all(NotLeaderError(leader))

    def advanced(self, high_watermark: int) -> None:
        self.driver._complete_committed(high_watermark)
