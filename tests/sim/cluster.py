"""A simulated cluster: one RaftCore per node, driven as a real node drives it.

Each node owns a disk (a SimLog, a SimSnapshotStore and its durable ElectionState, the
`quorum-state` file) that outlives crashes, and, while it is up, a RaftCore over them and a
state machine (state_machine.py). Its Readies are carried out by the node's own
raft/ready_handler.ReadyHandler, the class raft/driver.py runs, so the order checked here
is the order shipped; `_SimPorts` only plugs in the simulated disk, network and state
machine. Persisting is: the election state (the simulated fsync is instant: once handed over
it is durable), then the log writes the Ready lists (the core held them in memory until
now; on the SimLog they are unsynced, journaled writes), then the log's fsync if `sync_log`.
A crash can be armed to strike inside the persist step of the next Ready that has something
to persist, as a power cut partway through it would: after the election state, before the
log's fsync (that Ready's log writes are lost or, torn, partly kept), or after the fsync,
before the messages held for it are sent; or on the next Ready that loads a snapshot,
before the state machine does (right after a snapshot was installed).

Between events the state machine takes snapshots when told to (`snapshot`), and the log may
be compacted to one of them (log-prefix cleanup), as a controller's snapshot generator does.

Time: with TickMode.INTERVAL every node ticks every `tick_interval_ms` and messages are stepped
as they arrive (the loop in /tmp/smoke_raft.py); with TickMode.WAKEUP a node ticks only at its
next_wakeup_ms, and its clock is brought up to date before each message (an event-loop driver).
The seed picks one, so both ways of driving the core are exercised.
"""

from __future__ import annotations

import enum
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from raft.config import RaftConfig
from raft.core import NEVER, RaftCore
from raft.messages import (
    SNAPSHOT_NOT_FOUND,
    ElectionState,
    Entry,
    FetchSnapshotResponse,
    LeaderAndEpoch,
    Message,
    Ready,
    SnapshotChunk,
    SnapshotId,
    VoteResponse,
)
from raft.ready_handler import ReadyHandler, run_to_end
from raft.ready_reads import ReadsDone, carry_out_reads
from raft.roles import Role
from raft.snapshots import write_snapshot_chunk
from raft.unstable_log import write_to
from tests.sim.disk import SimLog, SimSnapshotStore
from tests.sim.events import EventQueue
from tests.sim.network import Network
from tests.sim.state_machine import StateMachine
from tests.sim.trace import Lazy, Trace, format_entries

# A node that never stops producing Readies is a livelock in the core, not a slow run.
MAX_READIES_PER_DRAIN = 10_000


class TickMode(enum.Enum):
    INTERVAL = "interval"
    WAKEUP = "wakeup"


class CrashPoint(enum.Enum):
    """Where in the next Ready that has something to persist an armed power cut strikes."""

    BEFORE_LOG_SYNC = "after persisting the election state, before syncing the log"
    BEFORE_SEND = "after syncing the log, before sending what waited for it"
    # Strikes on the next Ready that loads a snapshot instead: right after a download was
    # installed (snapshot durable, log reset), before the state machine loaded it.
    BEFORE_SNAPSHOT_LOAD = "after installing a snapshot, before loading it"
    # Strikes on the next Ready that grants a vote, before anything of it is durable: the
    # quorum-state write that records the vote never happened.
    BEFORE_VOTE_DURABLE = "before the quorum-state write that records a granted vote"


# The points a random power cut picks from; BEFORE_SNAPSHOT_LOAD is armed on purpose only,
# on a node that is downloading a snapshot (faults.py), or it might wait for good;
# BEFORE_VOTE_DURABLE only by a scenario (test_scenarios.py).
READY_CRASH_POINTS = (CrashPoint.BEFORE_LOG_SYNC, CrashPoint.BEFORE_SEND)


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    voters: int = 3
    observers: int = 0
    tick_mode: TickMode = TickMode.WAKEUP
    tick_interval_ms: int = 10
    raft: RaftConfig = field(default_factory=RaftConfig)


@dataclass(slots=True)
class SimNode:
    node_id: int
    is_voter: bool
    log: SimLog = field(default_factory=SimLog)
    snapshots: SimSnapshotStore = field(default_factory=SimSnapshotStore)
    durable: ElectionState = field(default_factory=ElectionState)  # the quorum-state file
    core: RaftCore | None = None  # None while crashed
    ready_handler: ReadyHandler | None = None  # this incarnation's, over `core`
    incarnation: int = 0
    sm: StateMachine = field(default_factory=StateMachine)  # this incarnation's, in memory
    tick_token: int = 0  # a tick event carrying an older token is void
    tick_at: int = NEVER
    crash_point: CrashPoint | None = None
    torn_on_crash: bool = False
    view: tuple[Role, int, int, int] | None = None  # role, epoch, leader, hw last traced

    @property
    def up(self) -> bool:
        return self.core is not None

    @property
    def applied(self) -> int:
        """The next offset this incarnation's state machine applies (what it has applied,
        counting the entries of the snapshot it loaded)."""
        return self.sm.applied

    def describe(self) -> str:
        log = f"log {self.log.start_offset}..{self.log.end_offset()}"
        latest = self.snapshots.latest()
        if latest is not None:
            log += f", snapshot {latest.end_offset}-{latest.epoch}"
        if self.core is None:
            return f"node {self.node_id}: down, {log}"
        c = self.core
        return (
            f"node {self.node_id}: {c.role.value} e{c.epoch} leader={c.leader_id} "
            f"voted={c.voted_for} hw={c.high_watermark} applied={self.applied} {log}"
        )


class ClusterListener(Protocol):
    """What the invariant checker hears from the driver, beyond looking at the nodes."""

    def on_start(self, node: SimNode) -> None: ...

    def on_crash(self, node: SimNode) -> None: ...

    def on_ready(self, node: SimNode, ready: Ready, committed: Sequence[Entry]) -> None:
        """`ready` is durable; `committed`: the entries it applies (read for it)."""
        ...


class Cluster:
    def __init__(
        self,
        config: ClusterConfig,
        rng: random.Random,
        queue: EventQueue,
        network: Network,
        listener: ClusterListener,
        trace: Trace,
    ) -> None:
        self.config = config
        self.rng = rng
        self.queue = queue
        self.network = network
        self.listener = listener
        self.trace = trace
        self.voter_ids = frozenset(range(1, config.voters + 1))
        ids = range(1, config.voters + config.observers + 1)
        self.nodes = {i: SimNode(i, i in self.voter_ids) for i in ids}
        self.touched: set[int] = set()  # nodes the current event reached
        # How often the snapshot paths were taken (reported, and checked by a test, so a
        # change that stops exercising them does not go unnoticed).
        self.coverage: Counter[str] = Counter()
        self.sent: list[Message] | None = None  # a scenario test sets a list to see every message
        # Told when a crash happens on its own (armed in a Ready), so a restart gets scheduled.
        self.after_crash: Callable[[int], None] = lambda node_id: None
        # Told when a node starts downloading a snapshot, so faults can aim at that window.
        self.download_started: Callable[[int], None] = lambda node_id: None
        for node in self.nodes.values():
            self._start(node)

    # --- what the faults and the clients do -------------------------------------------------

    def crash(self, node_id: int, torn: bool = False) -> None:
        node = self.nodes[node_id]
        assert node.core is not None, f"node {node_id} is already down"
        if node.core.snapshot_fetch is not None:
            self.coverage["crash mid-download"] += 1
        node.core = None
        node.ready_handler = None
        node.tick_token += 1
        node.tick_at = NEVER
        node.crash_point = None
        unsynced = node.log.unsynced_writes
        torn_writes = self.rng.randint(0, unsynced) if torn and unsynced else 0
        before = node.log.end_offset()
        node.log.crash(torn_writes)
        node.snapshots.crash()  # a partial download is lost; complete snapshots are durable
        self.touched.add(node_id)
        self.listener.on_crash(node)
        self.trace.record(
            f"CRASH node {node_id}: log end {before} -> {node.log.end_offset()}",
            f"({unsynced} unsynced writes, {torn_writes} of them reached the disk)",
        )

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        assert node.core is None, f"node {node_id} is up"
        self._start(node)

    def propose(self, node_id: int, records: Sequence[bytes]) -> int:
        """Raises raft.core.NotLeaderError when the node does not lead."""
        node = self.nodes[node_id]
        assert node.core is not None
        self.touched.add(node_id)
        last = node.core.propose(records)
        self.trace.record(f"propose to node {node_id}: {[r.decode() for r in records]} -> {last}")
        self._after(node)
        return last

    def resign(self, node_id: int) -> None:
        node = self.nodes[node_id]
        assert node.core is not None
        self.touched.add(node_id)
        self.trace.record(f"RESIGN node {node_id} ({node.core.role.value} e{node.core.epoch})")
        node.core.resign()
        self._after(node)

    def snapshot(self, node_id: int, end_offset: int, compact: bool) -> SnapshotId:
        """The node's state machine writes a snapshot of its state at `end_offset`; with
        `compact`, the log then starts at it (its prefix and older snapshots go)."""
        node = self.nodes[node_id]
        core = node.core
        assert core is not None
        self.touched.add(node_id)
        snapshot_id = core.snapshot_id_for(end_offset)
        node.snapshots.create(snapshot_id, node.sm.snapshot(end_offset))
        start = node.log.start_offset
        if compact:
            core.compact_log(snapshot_id)
            self.coverage["compactions"] += 1
        self.coverage["snapshots taken"] += 1
        self.trace.record(
            f"SNAPSHOT node {node_id} at {snapshot_id.end_offset}-{snapshot_id.epoch}"
            + (f", log start {start} -> {node.log.start_offset}" if compact else "")
        )
        self._after(node)
        return snapshot_id

    def deliver_copy(self, message: Message, delay_ms: int = 0) -> None:
        """Delivers `message` (once more) `delay_ms` from now, as a network that duplicates
        or holds back messages could: scenario tests replay a request or a late answer."""
        self.queue.after(delay_ms, self._deliver, message)

    def arm_crash(self, node_id: int, point: CrashPoint, torn: bool) -> None:
        node = self.nodes[node_id]
        node.crash_point = point
        node.torn_on_crash = torn

    def leaders(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.core is not None and n.core.role is Role.LEADER]

    def up_nodes(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.core is not None]

    # --- driving one node -------------------------------------------------------------------

    def _start(self, node: SimNode) -> None:
        now = self.queue.now_ms
        node.incarnation += 1
        node.sm = StateMachine()  # rebuilt from the latest snapshot, then the log
        node.tick_token += 1
        node.tick_at = NEVER
        node.view = None
        node.core = RaftCore(
            node.node_id,
            self.voter_ids,
            node.log,
            node.durable,
            self.config.raft,
            random.Random(self.rng.getrandbits(64)),
            now,
            snapshots=node.snapshots,
        )
        node.ready_handler = ReadyHandler(node.core, _SimPorts(self, node))
        self.touched.add(node.node_id)
        self.listener.on_start(node)
        if node.incarnation > 1:
            latest = node.snapshots.latest()
            self.trace.record(
                f"RESTART node {node.node_id} from {node.durable}, log "
                f"{node.log.start_offset}..{node.log.end_offset()}"
                + ("" if latest is None else f", snapshot {latest.end_offset}-{latest.epoch}")
            )
        if self.config.tick_mode is TickMode.INTERVAL:
            # A random phase, so the nodes do not all tick in the same millisecond.
            interval = self.config.tick_interval_ms
            self.queue.at(now + 1 + self.rng.randrange(interval), self._tick, node, node.tick_token)
        self._after(node)

    def _send(self, message: Message) -> None:
        if self.sent is not None:
            self.sent.append(message)
        times = self.network.delivery_times(message, self.queue.now_ms)
        if not times:
            self.trace.record("lost", message)
        for at_ms in times:
            self.queue.at(at_ms, self._deliver, message)

    def _deliver(self, message: Message) -> None:
        node = self.nodes[message.dst]
        if not self.network.arrives(message.src, message.dst):
            self.trace.record("cut", message)
            return
        if node.core is None:
            self.trace.record("to a down node", message)
            return
        self.touched.add(node.node_id)
        self.trace.record("deliver", message)
        if self.config.tick_mode is TickMode.WAKEUP:
            node.core.tick(self.queue.now_ms)
        core = node.core
        downloading, fetched = core.snapshot_fetch is not None, core.snapshots_fetched
        core.step(message)
        if core.snapshot_fetch is not None and not downloading:
            self.coverage["downloads started"] += 1
            self.download_started(node.node_id)
        if type(message) is FetchSnapshotResponse and message.error == SNAPSHOT_NOT_FOUND:
            self.coverage["snapshot gone mid-download"] += 1
        self._after(node)
        if core.snapshots_fetched > fetched:  # installed once its Ready stored the last chunk
            self.coverage["snapshots installed"] += 1

    def _tick(self, node: SimNode, token: int) -> None:
        if token != node.tick_token or node.core is None:
            return  # superseded by an earlier wakeup, or the node crashed since
        self.touched.add(node.node_id)
        node.tick_at = NEVER
        node.core.tick(self.queue.now_ms)
        if self.config.tick_mode is TickMode.INTERVAL:
            self.queue.after(self.config.tick_interval_ms, self._tick, node, token)
        self._after(node)

    def _after(self, node: SimNode) -> None:
        """After anything reached the core: carry out its Readies, trace what changed, and
        (WAKEUP) make sure it is ticked when it next needs to be."""
        self._drain(node)
        core = node.core
        if core is None:
            return  # crashed partway through a Ready
        view = (core.role, core.epoch, core.leader_id, core.high_watermark)
        if view != node.view:
            self._trace_view(node, view)
            node.view = view
        if self.config.tick_mode is TickMode.WAKEUP:
            wakeup = core.next_wakeup_ms()
            if wakeup < node.tick_at:
                # A tick scheduled later stays queued but is voided by the new token. At least
                # 1 ms ahead, so a deadline the core does not clear cannot spin the clock.
                node.tick_token += 1
                node.tick_at = max(wakeup, self.queue.now_ms + 1)
                self.queue.at(node.tick_at, self._tick, node, node.tick_token)

    def _drain(self, node: SimNode) -> None:
        handler = node.ready_handler
        if node.core is None or handler is None or not node.core.has_ready():
            return
        try:
            run_to_end(handler.handle_all(MAX_READIES_PER_DRAIN))
        except _PowerCut:
            self._crash_in_ready(node)

    def _crash_in_ready(self, node: SimNode) -> None:
        point = node.crash_point
        assert point is not None
        self.trace.record(f"power cut on node {node.node_id} in a Ready, {point.value}")
        self.crash(node.node_id, torn=node.torn_on_crash)
        self.after_crash(node.node_id)

    def _trace_view(self, node: SimNode, view: tuple[Role, int, int, int]) -> None:
        role, epoch, leader, hw = view
        old = node.view
        if old is None or old[:3] != view[:3]:
            was = "start" if old is None else f"{old[0].value} e{old[1]} leader={old[2]}"
            self.trace.record(
                f"node {node.node_id}: {was} -> {role.value} e{epoch} leader={leader}"
            )
        if old is not None and old[3] != hw:
            # An installed snapshot moves the high watermark past entries the log never held.
            low = max(old[3], node.log.start_offset)
            newly = tuple(node.log.read(low, hw - low)) if hw > low else ()
            self.trace.record(
                f"node {node.node_id}: hw {old[3]} -> {hw}", Lazy(format_entries, newly)
            )


class _PowerCut(Exception):
    """An armed crash strikes inside a Ready: the handler stops where it was."""


class _SimPorts:
    """raft/ready_handler.ReadyPorts over one node's simulated disk, the network and its
    state machine, with the armed power cuts (CrashPoint) in the places they name."""

    def __init__(self, cluster: Cluster, node: SimNode) -> None:
        self.cluster = cluster
        self.node = node
        self.send = cluster._send  # the network; bound once, called for every message
        self._committed: tuple[Entry, ...] = ()  # what the Ready being handled applies

    async def read(self, ready: Ready) -> ReadsDone:
        done = carry_out_reads(ready, self.node.log, self.node.snapshots)
        self._committed = done.committed
        return done

    async def persist(self, ready: Ready) -> None:
        node = self.node
        if node.crash_point is CrashPoint.BEFORE_VOTE_DURABLE and any(
            type(m) is VoteResponse and m.granted and not m.pre_vote for m in ready.messages
        ):
            self.cluster.coverage["vote lost in a power cut"] += 1
            raise _PowerCut
        if ready.election_state is not None:
            node.durable = ready.election_state  # fsynced: durable from here on
        write_to(node.log, ready.log_writes)  # unsynced until node.log.sync()
        point = node.crash_point
        if point in READY_CRASH_POINTS and (ready.election_state is not None or ready.sync_log):
            if point is CrashPoint.BEFORE_SEND and ready.sync_log:
                node.log.sync()
            raise _PowerCut
        if ready.sync_log:
            node.log.sync()
        committed, self._committed = self._committed, ()
        self.cluster.listener.on_ready(node, ready, committed)

    async def write_snapshot_chunk(self, chunk: SnapshotChunk) -> bool:
        return write_snapshot_chunk(self.node.snapshots, chunk)

    async def load_snapshot(self, snapshot_id: SnapshotId) -> None:
        node, cluster = self.node, self.cluster
        if node.crash_point is CrashPoint.BEFORE_SNAPSHOT_LOAD:
            cluster.coverage["crash right after install"] += 1
            raise _PowerCut
        node.sm.load(node.snapshots.snapshots[snapshot_id])
        cluster.coverage["snapshots loaded"] += 1
        cluster.trace.record(
            f"node {node.node_id}: state machine loads snapshot "
            f"{snapshot_id.end_offset}-{snapshot_id.epoch}"
        )

    def apply(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            self.node.sm.apply(entry)

    def leader_changed(self, leader: LeaderAndEpoch) -> None:
        pass  # the simulator's clients ask the cores who leads

    def advanced(self, high_watermark: int) -> None:
        pass  # the simulator's clients watch what is applied, not futures
