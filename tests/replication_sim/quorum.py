"""The controller quorum of the replication simulation: the real simulated Raft of tests/sim
(tests/controller_sim's ControllerCluster: a RaftCore per controller node, its Readies carried
out by the shipped raft/ready_handler.py, a MetadataStateMachine replaying the committed
records into a MetadataImage) on the replication world's EventQueue, with every controller
node holding the product's ControllerCore and its own HeartbeatTracker, as every node does
(metadata/controller.py). This module is their pump, as QuorumController._sync is the
node's: after every event each live node's core is told its Raft state and committed image
(`update`); the core decides which node is active, which pending writes completed (their
answers go out) and which failed because leadership moved (their callers get
NOT_CONTROLLER with the Raft leader's id, and retry as the broker's routing says). A node
that becomes active re-seeds its tracker, as the product does (every registered broker gets a
full session from now). The active node fences the brokers its tracker says expired, every
TICK_MS, each fencing its own write (QuorumController.fence_expired_brokers).

Controller nodes sit on the replication network as CONTROLLER_BASE + their Raft id (the
brokers call them there); the Raft messages between them travel over the same network's
links (QuorumLinks: its cuts, its RPC losses) with delays up to a third of the plan's
controller latency. A crash (Quorum.crash) takes the node's Raft core, its ControllerCore and
tracker with it (the pending answers are never sent: the callers time out); its disk (log,
snapshots, quorum-state) stays, and a restart replays it.

The committed metadata history the brokers replay (SimController.history) is the Raft log as
committed: the MetadataChecker (tests/controller_sim/checker.py) is the Raft simulator's
checker of invariants (a)-(k) plus (m)-(s) over the metadata, and its reference images, one
per committed offset, are what the brokers load. So a broker never applies a record that is
not committed, and the checker's (b) and (j) say committed records are never lost.
Invariants this module checks on top of those:
 (t) a failover never cuts a broker's session short: a newly active controller cannot know
     what its predecessors heard, so it fences nobody for their session before it has been
     active for broker.session.timeout.ms, and never a broker whose registration or
     heartbeat it took (in its epoch) less than that ago;
 (u) a committed ISR change adds only brokers that were registered and unfenced, and not
     shutting down, in the committed image before its record (AlterPartition's
     eligibility, and an eligible leader replica's election after its unfencing), across
     failovers too.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from metadata.broker_lifecycle import HeartbeatTracker, fence_broker
from metadata.controller_core import ControllerCore, PendingWrite
from metadata.errors import ApiError
from metadata.image import MetadataImage
from metadata.records import decode, encode
from raft.config import RaftConfig
from raft.core import NotLeaderError
from raft.roles import Role
from strom_api.error_codes import ErrorCode
from tests.controller_sim.checker import MetadataChecker, Operation
from tests.controller_sim.machine import MetadataStateMachine
from tests.controller_sim.world import ControllerCluster
from tests.sim.cluster import ClusterConfig, SimNode
from tests.sim.invariants import InvariantViolation
from tests.sim.trace import Lazy, Trace

if TYPE_CHECKING:
    from tests.replication_sim.network import Network
    from tests.replication_sim.world import World

CONTROLLER_BASE = 3000  # network id of controller node n: CONTROLLER_BASE + n (n = 1, 2, ...)
TICK_MS = 50  # how often the active controller looks for expired sessions
# Raft traffic the run's trace leaves out (every message would crowd out the brokers' story).
_QUIET = frozenset({"deliver", "lost", "cut", "to a down node"})


def node_of(raft_id: int) -> int:
    return CONTROLLER_BASE + raft_id


def raft_id_of(node: int) -> int:
    return node - CONTROLLER_BASE


class QuorumLinks:
    """What tests/sim's Cluster asks of its network (delivery_times, arrives), answered by
    the replication network for the links between controller nodes: a cut link drops a Raft
    message (Raft retries on its own timers), the RPC loss rate applies (once the run's
    faults may start: `lossy`), and a message takes 1..max_delay_ms (drawn from a stream of
    its own)."""

    def __init__(self, network: Network, rng: random.Random, max_delay_ms: int) -> None:
        self.network = network
        self.rng = rng
        self.max_delay_ms = max(1, max_delay_ms)
        self.lossy = False  # the cluster's bootstrap is written over a quiet network

    def delivery_times(self, message: Any, now_ms: int) -> list[int]:
        network = self.network
        if not network.connected(node_of(message.src), node_of(message.dst)):
            return []
        drop = network.plan.rpc_drop
        if drop and self.lossy and not network.calm and self.rng.random() < drop:
            return []
        return [now_ms + self.rng.randint(1, self.max_delay_ms)]

    def arrives(self, src: int, dst: int) -> bool:
        return self.network.connected(node_of(src), node_of(dst))


class _QuorumTrace:
    """The run's trace, for the Raft cluster: its view changes, proposals, crashes and
    restarts, prefixed; not every message."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def record(self, *parts: Any) -> None:
        if parts and (parts[0] in _QUIET or isinstance(parts[-1], Lazy)):
            return  # a message, or a node's high watermark (the controller's commit line says)
        self.trace.record("quorum:", *parts)


@dataclass(eq=False)
class Waiting:
    """A pending write's caller: where its answer goes once the core completes it."""

    broker_id: int
    reply: Callable[..., None] | None
    operation: Operation | None
    on_commit: Callable[[], None] | None


@dataclass(eq=False)
class ControllerNode:
    """What one node incarnation's controller holds: the product's core and its tracker."""

    raft_id: int
    incarnation: int
    core: ControllerCore
    tracker: HeartbeatTracker
    waiting: dict[PendingWrite[object], Waiting] = field(default_factory=dict)
    told: tuple[bool, int, MetadataImage] | None = None
    activated_ms: int = -1


@dataclass
class QuorumStats:
    activations: int = 0
    crashes: int = 0
    abandoned: int = 0  # pending writes failed by a leadership change
    not_controller: int = 0  # calls a node refused as not active


class Quorum:
    def __init__(self, world: World, voters: int) -> None:
        self.world = world
        plan = world.plan
        self.links = QuorumLinks(
            world.network, world.rngs["quorum links"], plan.controller_latency_ms // 3
        )
        self.checker = MetadataChecker()
        self.cluster = ControllerCluster(
            ClusterConfig(voters=voters, raft=RaftConfig()),
            world.rngs["quorum"],
            world.queue,
            self.links,  # type: ignore[arg-type]
            self.checker,
            _QuorumTrace(world.trace),  # type: ignore[arg-type]
        )
        self.controllers: dict[int, ControllerNode] = {}  # by Raft id
        self.stats = QuorumStats()
        self.committed_end = 0  # how much of the committed log the history holds
        # (t): broker -> [(when a controller took its contact, in which epoch)]
        self.contacts: dict[int, list[tuple[int, int]]] = {}
        self.serving: int | None = None  # the Raft id of the node handling a call now
        # Told when the committed log grows: the records since, and the image after them.
        self.on_commit: Callable[[Sequence[Message], MetadataImage], None] = lambda r, i: None
        self.on_fenced: Callable[[], None] = lambda: None  # a session fencing committed
        self.started = False  # the run began: faults, session checks

    # --- the nodes ------------------------------------------------------------------------------

    @property
    def raft_ids(self) -> list[int]:
        return sorted(self.cluster.nodes)

    @property
    def node_ids(self) -> list[int]:
        """The controller nodes' ids on the network (the brokers' controller.quorum.voters)."""
        return [node_of(i) for i in self.raft_ids]

    def up(self, raft_id: int) -> bool:
        return self.cluster.nodes[raft_id].core is not None

    def active(self) -> tuple[int, ControllerNode] | None:
        """The node whose core is active (the highest epoch, should an old leader not know
        yet)."""
        best: tuple[int, ControllerNode] | None = None
        for raft_id, ctl in self.controllers.items():
            epoch = ctl.core.epoch
            if epoch is not None and (best is None or epoch > (best[1].core.epoch or 0)):
                best = (raft_id, ctl)
        return best

    def leader_hint(self, raft_id: int) -> int:
        """The active_controller_id a node's error answers carry: the Raft leader it knows
        (server/controller_service.py), as a network id, or -1."""
        core = self.cluster.nodes[raft_id].core
        if core is None or core.leader_id < 0:
            return -1
        return node_of(core.leader_id)

    def metadata_source(self) -> int | None:
        """Where brokers fetch the metadata log from (as Raft observers): the Raft leader's
        node, or None while there is none."""
        leaders = self.cluster.leaders()
        if not leaders:
            return None
        leader = max(leaders, key=lambda n: n.core.epoch if n.core else -1)
        return node_of(leader.node_id)

    # --- faults ---------------------------------------------------------------------------------

    def crash(self, raft_id: int) -> None:
        self.stats.crashes += 1
        self.cluster.crash(raft_id, torn=True)
        self.after_event()

    def restart(self, raft_id: int) -> None:
        self.cluster.restart(raft_id)
        self.after_event()

    # --- the pump -------------------------------------------------------------------------------

    def start(self) -> None:
        self.links.lossy = True
        if not self.started:
            self.started = True
            self.world.queue.after(TICK_MS, self._tick)

    def after_event(self) -> None:
        """After every event: the Raft checker over the nodes it reached, each core told what
        changed (QuorumController._sync), the committed history extended."""
        cluster = self.cluster
        if not cluster.touched:
            return  # no Raft state changed: nothing new to tell the cores
        self.checker.after_event(cluster)
        cluster.touched.clear()
        for raft_id, node in cluster.nodes.items():
            self._sync(raft_id, node)
        self._extend_history()

    def _sync(self, raft_id: int, node: SimNode) -> None:
        ctl = self.controllers.get(raft_id)
        if ctl is not None and (node.core is None or node.incarnation != ctl.incarnation):
            self.stats.abandoned += len(ctl.waiting)
            del self.controllers[raft_id]  # its pending answers die with the process
            ctl = None
        core = node.core
        if core is None:
            return
        if ctl is None:
            ctl = ControllerNode(
                raft_id,
                node.incarnation,
                ControllerCore(),
                HeartbeatTracker(self.world.plan.session_timeout_ms),
            )
            self.controllers[raft_id] = ctl
        sm = node.sm
        assert isinstance(sm, MetadataStateMachine)
        leader, epoch, image = core.role is Role.LEADER, core.epoch, sm.image
        told = ctl.told
        if told is not None and told[0] == leader and told[1] == epoch and told[2] is image:
            return  # nothing new (the node's pump waits for the loader's news)
        ctl.told = (leader, epoch, image)
        update = ctl.core.update(leader, epoch, image)
        if update.activated:
            # Newly active: heartbeats seen by an earlier controller are unknown here.
            ctl.tracker.reseed(image, self.world.now_ms)
            ctl.activated_ms = self.world.now_ms
            self.stats.activations += 1
            self.world.trace.record(
                f"controller {node_of(raft_id)} active in epoch {epoch} at offset {image.offset}"
            )
        for pending in update.completed:
            self._completed(raft_id, ctl, pending)
        for pending in update.failed:
            self._fail(raft_id, ctl, pending)

    def _completed(self, raft_id: int, ctl: ControllerNode, pending: PendingWrite[object]) -> None:
        waiting = ctl.waiting.pop(pending, None)
        if waiting is None:
            return
        if waiting.operation is not None:
            self.checker.operation_completed(waiting.operation)  # (r)
        if waiting.on_commit is not None:
            waiting.on_commit()
        if waiting.reply is not None:
            self.answer(raft_id, waiting.broker_id, waiting.reply, pending.response)

    def _extend_history(self) -> None:
        committed = self.checker.committed
        end = len(committed)
        if end <= self.committed_end:
            return
        entries = committed[self.committed_end : end]
        images = self.checker.images
        for entry in entries:  # (u), record by record
            self._check_isr_additions(images[entry.offset], images[entry.offset + 1])
        self.committed_end = end
        records = [decode(e.data) for e in entries if not e.control]
        self.on_commit(records, images[end])

    def _tick(self) -> None:
        """QuorumController._periodic's session check, on the active node."""
        self.world.queue.after(TICK_MS, self._tick)
        found = self.active()
        if found is None:
            return
        raft_id, ctl = found
        now = self.world.now_ms
        for broker_id in ctl.tracker.expired(ctl.core.image, now):
            self._check_session(ctl, broker_id, now)
            records = fence_broker(ctl.core.image, broker_id)
            kind = f"fence broker {broker_id} (session)"
            self.write(raft_id, ctl, records, None, kind, -1, None, self.on_fenced)
            if raft_id not in self.controllers:
                return  # the propose crashed the node

    # --- serving calls ------------------------------------------------------------------------

    def deliver(self, raft_id: int, handler: Callable[..., None], *args: Any) -> None:
        """A broker's call arrives at controller node `raft_id`: a node that is down refuses
        the connection (the caller sees no answer); one that is up handles it."""
        reply = args[-1]
        if not self.up(raft_id):
            self.world.network.send(node_of(raft_id), _broker_of(reply), reply, None)
            return
        self.serving = raft_id
        try:
            handler(*args)
        finally:
            self.serving = None

    def serving_node(self) -> tuple[int, ControllerNode | None]:
        """The node handling the current call and its controller if it is active (None: the
        call gets NOT_CONTROLLER). Outside a delivered call (a scenario calling a handler
        directly): the active node."""
        raft_id = self.serving
        if raft_id is None:
            found = self.active()
            if found is None:
                return self.raft_ids[0], None
            return found
        self._sync(raft_id, self.cluster.nodes[raft_id])
        ctl = self.controllers.get(raft_id)
        if ctl is None or not ctl.core.active:
            self.stats.not_controller += 1
            return raft_id, None
        return raft_id, ctl

    def refuse(self, raft_id: int, broker_id: int, reply: Callable[..., None]) -> None:
        """NOT_CONTROLLER, naming the Raft leader this node knows."""
        self.answer(raft_id, broker_id, reply, _not_controller())

    def answer(self, raft_id: int, broker_id: int, reply: Callable[..., None], answer: Any) -> None:
        self.world.network.send(
            node_of(raft_id), broker_id, reply, answer, self.leader_hint(raft_id), lossy=True
        )

    def touched_tracker(self, ctl: ControllerNode, broker_id: int) -> None:
        """After a call the product may have noted as contact: record it for (t) if the
        tracker did."""
        now = self.world.now_ms
        if ctl.tracker.last_contact.get(broker_id) == now and ctl.core.epoch is not None:
            contacts = self.contacts.setdefault(broker_id, [])
            contacts.append((now, ctl.core.epoch))
            if len(contacts) > 16:
                del contacts[:8]

    def write(
        self,
        raft_id: int,
        ctl: ControllerNode,
        records: Sequence[Message],
        response: Any,
        kind: str,
        broker_id: int,
        reply: Callable[..., None] | None,
        on_commit: Callable[[], None] | None = None,
    ) -> None:
        """QuorumController._submit: the write to the core, its records proposed to Raft at
        once as one batch; the answer goes out when the core completes the write."""
        core = ctl.core
        pending = core.write(records, response)
        operation = None
        if records:
            operation = Operation(kind, pending.epoch, pending.first, pending.last, pending.basis)
            self.checker.expect_operation(operation)
        waiting = Waiting(broker_id, reply, operation, on_commit)
        if core.is_complete(pending):
            ctl.waiting[pending] = waiting  # type: ignore[index]
            self._completed(raft_id, ctl, pending)  # type: ignore[arg-type]
            return
        ctl.waiting[pending] = waiting  # type: ignore[index]
        if not records:
            return
        try:
            last = self.cluster.propose(raft_id, [encode(r) for r in records])
        except NotLeaderError:
            # Raft stepped down since the core was last told: the node's pump renounces.
            self._sync(raft_id, self.cluster.nodes[raft_id])
            if ctl.core.epoch == pending.epoch:
                for failed in ctl.core.renounce():
                    self._fail(raft_id, ctl, failed)
            return
        node = self.cluster.nodes[raft_id]
        if node.core is None or node.incarnation != ctl.incarnation:
            return  # the propose crashed the node (a power cut inside the Ready)
        core.appended(pending, last)

    def _fail(self, raft_id: int, ctl: ControllerNode, pending: PendingWrite[object]) -> None:
        """QuorumController._fail: leadership moved before the write committed."""
        waiting = ctl.waiting.pop(pending, None)
        self.stats.abandoned += 1
        if waiting is not None and waiting.reply is not None:
            self.answer(raft_id, waiting.broker_id, waiting.reply, _not_controller())

    # --- invariants (t) and (u) -----------------------------------------------------------------

    def _check_session(self, ctl: ControllerNode, broker_id: int, now: int) -> None:
        timeout = self.world.plan.session_timeout_ms
        epoch = ctl.core.epoch
        where = (
            f"controller {node_of(ctl.raft_id)} (active in epoch {epoch} since "
            f"{ctl.activated_ms} ms) fences broker {broker_id} for its session at {now} ms"
        )
        if now - ctl.activated_ms < timeout:
            raise InvariantViolation("t", f"{where}, less than a session ({timeout} ms) in")
        for at, contact_epoch in self.contacts.get(broker_id, ()):
            if contact_epoch == epoch and now - at < timeout:
                raise InvariantViolation(
                    "t", f"{where}, though it took the broker's contact at {at} ms"
                )

    def _check_isr_additions(self, before: MetadataImage, after: MetadataImage) -> None:
        if before.topics is after.topics:
            return
        brokers = before.cluster.brokers
        for topic_id, topic in after.topics.by_id.items():
            old = before.topics.by_id.get(topic_id)
            if old is None or old is topic:
                continue
            for pid, p in topic.partitions.items():
                q = old.partitions.get(pid)
                if q is None:
                    continue
                for member in set(p.isr) - set(q.isr):
                    b = brokers.get(member)
                    if b is None or b.fenced or b.in_controlled_shutdown:
                        state = "unregistered" if b is None else "fenced or shutting down"
                        raise InvariantViolation(
                            "u",
                            f"{topic.name}-{pid}: the ISR change committed at offset "
                            f"{after.offset} adds broker {member}, {state} in the committed "
                            f"image before it (ISR {list(q.isr)} -> {list(p.isr)})",
                        )


def _not_controller() -> ApiError:
    """Its answer carries the Raft leader's id beside it (Quorum.answer), as the
    servicer's ControllerError does."""
    return ApiError(ErrorCode.NOT_CONTROLLER, "This node is not the active controller.")


def _broker_of(reply: Any) -> int:
    """The broker a call's answer path (controller_link._Reply) leads to."""
    return int(reply.broker.id)
