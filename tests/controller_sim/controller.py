"""The controllers and their brokers, over the simulated Raft: adapters around the product's
ControllerCore (metadata/controller_core.py), the class QuorumController pumps on a node.

Every live node incarnation holds its own ControllerCore and HeartbeatTracker, as every
controller node does. SimController is the pump on the simulated clock instead of asyncio:
every step it tells each core its node's Raft state and committed image (`update`; the
node's pump does it on each commit and leader change), which decides which core is active,
which pending operations committed and which failed because leadership moved. Operations go
to the active core (the highest epoch, should an old leader not know yet): each computes its
records with the pure functions of metadata/ (register_broker, heartbeat, fence_broker,
create_topics, delete_topics, alter_partition_completing_reassignments) against the core's
image, committed plus pending, is written to the core and proposed at once on that leader
(simulated Raft's propose: the adapter for RaftDriver.append), several in flight at a time.
Nothing here decides when an operation completes or is abandoned: the core does, and the
checker verifies that it was right (an abandoned operation's records commit all or none,
(p); a completed one is committed, (r); each committed operation was computed against the
committed image before it, (s)).

The brokers (SimBroker) register (broker epoch = the offset the core gives the record),
heartbeat every `heartbeat_interval_ms` (which unfences them once they replayed their
registration), and, drawn by the seed, die (stop heartbeating: the tracker then fences them
one session later) or come back as a new incarnation. Partition leaders that are alive send
AlterPartition ISR shrinks and expands, now and then with a stale epoch. Operations that
fail validation just count their errors.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from google.protobuf.message import Message

from metadata.alter_partition import IsrProposal, alter_partition_completing_reassignments
from metadata.broker_lifecycle import (
    BrokerRegistrationRequest,
    HeartbeatRequest,
    HeartbeatTracker,
    fence_broker,
    heartbeat,
    register_broker,
)
from metadata.controller_core import ControllerCore, PendingWrite
from metadata.errors import ApiError
from metadata.image import Endpoint, MetadataImage
from metadata.records import NO_LEADER, encode
from metadata.topic_control import NewTopic, create_topics, delete_topics
from raft.roles import Role
from tests.controller_sim.checker import Operation
from tests.controller_sim.machine import MetadataStateMachine
from tests.controller_sim.world import ControllerWorld
from tests.sim.cluster import SimNode

TOPIC_NAMES = ("orders", "payments", "clicks", "logs", "audit", "events")
OPERATIONS_PER_STEP = 4  # operations the active controller may start in one step
MAX_PENDING = 8  # and at most this many in flight (the RPCs of a few busy brokers)

# An operation: given the active image and the log end its first record will get, the
# records to propose (or ApiError), and a name for the trace.
OpFn = Callable[[MetadataImage, int], list[Message]]


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    brokers: int = 3
    session_timeout_ms: int = 3_000
    heartbeat_interval_ms: int = 400
    step_ms: int = 20
    op_every_ms: int = 150  # mean gap between random operations
    death_every_ms: int | None = 4_000  # mean gap between broker deaths (None: never)
    revive_after_ms: tuple[int, int] = (500, 6_000)

    @classmethod
    def from_seed(cls, seed: int) -> ControllerConfig:
        rng = random.Random(f"controller-{seed}")
        return cls(
            brokers=rng.randint(3, 5),
            session_timeout_ms=rng.choice((1_500, 3_000, 6_000)),
            heartbeat_interval_ms=rng.choice((200, 400)),
            op_every_ms=rng.choice((50, 150, 400)),
            death_every_ms=rng.choice((None, 1_500, 4_000)),
            revive_after_ms=(500, rng.choice((2_000, 8_000))),
        )

    def describe(self) -> str:
        return (
            f"{self.brokers} brokers, session {self.session_timeout_ms} ms, heartbeat every "
            f"{self.heartbeat_interval_ms} ms; an operation every ~{self.op_every_ms} ms; "
            f"a broker death every ~{self.death_every_ms or 'never'} ms"
        )


@dataclass(slots=True)
class SimBroker:
    broker_id: int
    alive: bool = True
    incarnation: int = 1
    next_beat_ms: int = 0

    @property
    def incarnation_id(self) -> bytes:
        return self.broker_id.to_bytes(8, "big") + self.incarnation.to_bytes(8, "big")


@dataclass(slots=True)
class ControllerNode:
    """What one node incarnation's controller holds: the product's core and its tracker."""

    incarnation: int
    core: ControllerCore
    tracker: HeartbeatTracker
    # The checker's view of each pending write (the core's own record of it is the key).
    operations: dict[PendingWrite[object], Operation] = field(default_factory=dict)
    told: tuple[bool, int, MetadataImage] | None = None  # what the core was last told


@dataclass
class Stats:
    ops: Counter[str] = field(default_factory=Counter)  # committed, by kind
    errors: Counter[str] = field(default_factory=Counter)  # ApiError names
    abandoned: int = 0  # leader changed before the records committed
    pipelined: int = 0  # operations proposed while an earlier one was still pending
    activations: int = 0  # times some node became the active controller


class SimController:
    def __init__(
        self,
        world: ControllerWorld,
        rng: random.Random,
        config: ControllerConfig,
    ) -> None:
        self.world = world
        self.rng = rng
        self.config = config
        self.brokers = {b: SimBroker(b) for b in range(1, config.brokers + 1)}
        self.controllers: dict[int, ControllerNode] = {}  # by node id
        # The active controller's tracker, while its operations are computed.
        self.tracker = HeartbeatTracker(config.session_timeout_ms)
        self.committed_offset = 0
        self.requests: deque[tuple[str, OpFn]] = deque()  # scenario tests queue operations
        self.random_ops = False
        self.next_random_ms = 0
        self.stats = Stats()
        # Told right after an operation's records were proposed (scenario tests crash there).
        self.after_propose: Callable[[int, Operation], None] = lambda node_id, op: None
        self._running = False

    # --- driving ----------------------------------------------------------------------------

    def start(self, random_ops: bool = True) -> None:
        self.random_ops = random_ops
        if not self._running:
            self._running = True
            self.world.queue.after(self.config.step_ms, self._step)
        if random_ops and self.config.death_every_ms:
            self.world.queue.after(self._gap(self.config.death_every_ms), self._maybe_kill)

    def stop_faults(self) -> None:
        """The liveness phase: no more random operations, deaths or revivals."""
        self.random_ops = False

    def submit(self, kind: str, fn: OpFn) -> None:
        self.requests.append((kind, fn))

    def _gap(self, mean_ms: int) -> int:
        return 1 + int(self.rng.expovariate(1.0 / mean_ms))

    @property
    def now_ms(self) -> int:
        return self.world.queue.now_ms

    def trace(self, *parts: object) -> None:
        self.world.trace.record("CONTROLLER", *parts)

    def active(self) -> SimNode | None:
        """The node whose controller's core is active (the highest epoch, should an old
        leader not have heard of the new one yet)."""
        found = self._active()
        return None if found is None else self.world.cluster.nodes[found[0]]

    def _active(self) -> tuple[int, ControllerNode] | None:
        best: tuple[int, ControllerNode] | None = None
        for node_id, ctl in self.controllers.items():
            epoch = ctl.core.epoch
            if epoch is not None and (best is None or epoch > (best[1].core.epoch or 0)):
                best = (node_id, ctl)
        return best

    def _step(self) -> None:
        self.world.queue.after(self.config.step_ms, self._step)
        self._update_all()
        for _ in range(OPERATIONS_PER_STEP):
            found = self._active()
            if found is None:
                return
            node_id, ctl = found
            node = self.world.cluster.nodes[node_id]
            if ctl.core.pending >= MAX_PENDING:
                return
            self.tracker = ctl.tracker
            self.committed_offset = ctl.core.committed.offset
            picked = self._next_operation(ctl.core.image)
            if picked is None:
                return
            self._run(node, ctl, *picked)
            if node.core is None or node.core.role is not Role.LEADER:
                # The propose crashed its node (a power cut inside the Ready it made): the
                # cores hear of it before the next operation.
                self._update_all()

    def _update_all(self) -> None:
        """Each node's core told its Raft state and committed image (what the node's pump
        does on every commit and leader change); a crashed incarnation's core is gone, and
        with it its pending operations."""
        for node_id, node in self.world.cluster.nodes.items():
            ctl = self.controllers.get(node_id)
            if ctl is not None and (node.core is None or node.incarnation != ctl.incarnation):
                self._abandoned(ctl, list(ctl.operations), "its node crashed")
                del self.controllers[node_id]
                ctl = None
            if node.core is None:
                continue
            sm = node.sm
            assert isinstance(sm, MetadataStateMachine)
            if ctl is None:
                ctl = ControllerNode(
                    node.incarnation,
                    ControllerCore(),
                    HeartbeatTracker(self.config.session_timeout_ms),
                )
                self.controllers[node_id] = ctl
            leader, epoch, image = node.core.role is Role.LEADER, node.core.epoch, sm.image
            if ctl.told is not None and ctl.told[:2] == (leader, epoch) and ctl.told[2] is image:
                continue  # nothing new since the last step (the node's pump waits for news)
            ctl.told = (leader, epoch, image)
            update = ctl.core.update(leader, epoch, image)
            for pending in update.completed:
                op = ctl.operations.pop(pending)
                self.world.checker.operation_completed(op)
                self.stats.ops[op.kind.split()[0]] += 1
            self._abandoned(ctl, update.failed, "the leader changed")
            if update.activated:
                self.stats.activations += 1
                # Newly active: heartbeats seen by an earlier controller are unknown here.
                ctl.tracker.reseed(sm.image, self.now_ms)
                self.trace(f"node {node_id} active in epoch {node.core.epoch}")

    def _abandoned(self, ctl: ControllerNode, failed: list[PendingWrite[object]], why: str) -> None:
        for pending in failed:
            op = ctl.operations.pop(pending)
            self.stats.abandoned += 1
            self.trace(f"{op.kind} at {op.first}..{op.last} abandoned: {why}")

    def _run(self, node: SimNode, ctl: ControllerNode, kind: str, fn: OpFn) -> None:
        core = ctl.core
        first = core.next_offset
        try:
            records = fn(core.image, first)
        except ApiError as error:
            self.stats.errors[error.error_name] += 1
            self.trace(f"{kind}: {error}")
            return
        if not records:
            return
        if core.pending:
            self.stats.pipelined += 1
        pending = core.write(records, kind)
        op = Operation(kind, pending.epoch, pending.first, pending.last, pending.basis)
        ctl.operations[pending] = op  # type: ignore[index]
        self.world.checker.expect_operation(op)
        # Active means leading: the propose cannot be refused (NotLeaderError would be a
        # bug here, and fail the run).
        last = self.world.cluster.propose(node.node_id, [encode(r) for r in records])
        core.appended(pending, last)
        self.after_propose(node.node_id, op)

    # --- choosing the next operation --------------------------------------------------------

    def _next_operation(self, image: MetadataImage) -> tuple[str, OpFn] | None:
        now = self.now_ms
        expired = self.tracker.expired(image, now)
        if expired:
            broker_id = expired[0]
            return f"fence {broker_id}", lambda img, _: fence_broker(img, broker_id)
        if self.requests:
            return self.requests.popleft()
        for broker in self.brokers.values():
            if broker.alive and broker.next_beat_ms <= now:
                broker.next_beat_ms = now + self.config.heartbeat_interval_ms
                return self._broker_request(broker, image)
        if self.random_ops and now >= self.next_random_ms:
            self.next_random_ms = now + self._gap(self.config.op_every_ms)
            return self._random_operation(image)
        return None

    def _broker_request(self, broker: SimBroker, image: MetadataImage) -> tuple[str, OpFn]:
        b = broker.broker_id
        registered = image.cluster.brokers.get(b)
        if registered is None or registered.incarnation_id != broker.incarnation_id:
            request = BrokerRegistrationRequest(
                b, broker.incarnation_id, [Endpoint("PLAINTEXT", f"broker{b}", 9092)]
            )

            def register(img: MetadataImage, offset: int) -> list[Message]:
                records, epoch = register_broker(img, self.tracker, request, offset, self.now_ms)
                assert epoch == offset
                return records

            return f"register {b}", register
        epoch = registered.epoch

        replayed = self.committed_offset  # a broker replays committed records only

        def beat(img: MetadataImage, _: int) -> list[Message]:
            request = HeartbeatRequest(b, epoch, current_metadata_offset=replayed)
            records, _response = heartbeat(img, self.tracker, request, self.now_ms)
            return records

        return f"heartbeat {b}", beat

    def _random_operation(self, image: MetadataImage) -> tuple[str, OpFn] | None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.35:
            name = rng.choice(TOPIC_NAMES) if rng.random() < 0.95 else "bad name!"
            partitions = rng.randint(1, 3)
            factor = rng.randint(1, 3)
            start = rng.randrange(1 << 16)
            topic_id = rng.randbytes(16)

            def create(img: MetadataImage, _: int) -> list[Message]:
                topic = NewTopic(name, partitions, factor)
                records, results = create_topics(
                    img, [topic], start=start, topic_id_factory=lambda: topic_id
                )
                for result in results:
                    if result.error is not None:
                        raise result.error
                return records

            return f"create {name} p{partitions} rf{factor}", create
        if roll < 0.5:
            names = sorted(image.topics.by_name)
            name = rng.choice(names) if names and rng.random() < 0.9 else "nosuch"

            def delete(img: MetadataImage, _: int) -> list[Message]:
                records, results = delete_topics(img, [name])
                for error in results.values():
                    if error is not None:
                        raise error
                return records

            return f"delete {name}", delete
        return self._alter_isr(image)

    def _alter_isr(self, image: MetadataImage) -> tuple[str, OpFn] | None:
        rng = self.rng
        led = [
            (topic, pid, p)
            for _, topic in sorted(image.topics.by_name.items())
            for pid, p in sorted(topic.partitions.items())
            if p.leader != NO_LEADER
            and p.leader in self.brokers
            and self.brokers[p.leader].alive
            and p.leader in image.cluster.brokers
        ]
        if not led:
            return None
        topic, pid, p = rng.choice(led)
        others = [b for b in p.isr if b != p.leader]
        outside = [b for b in p.replicas if b not in p.isr]
        if others and (not outside or rng.random() < 0.5):
            new_isr = tuple(b for b in p.isr if b != rng.choice(others))
            what = "shrink"
        elif outside:
            new_isr = (*p.isr, rng.choice(outside))
            what = "expand"
        else:
            return None
        stale = rng.random() < 0.1
        proposal = IsrProposal(
            topic.topic_id,
            pid,
            p.leader_epoch - (1 if stale else 0),
            p.partition_epoch,
            new_isr,
        )
        leader = p.leader
        epoch = image.cluster.brokers[leader].epoch

        def alter(img: MetadataImage, _: int) -> list[Message]:
            records, results = alter_partition_completing_reassignments(
                img, leader, epoch, [proposal]
            )
            for result in results:
                if result.error is not None:
                    raise result.error
            return records

        return f"alter-isr {what} {topic.name}-{pid} -> {list(new_isr)} by {leader}", alter

    # --- broker deaths ----------------------------------------------------------------------

    def _maybe_kill(self) -> None:
        if not self.random_ops or not self.config.death_every_ms:
            return
        alive = [b for b in self.brokers.values() if b.alive]
        if alive:
            broker = self.rng.choice(alive)
            broker.alive = False
            self.trace(f"broker {broker.broker_id} dies (stops heartbeating)")
            low, high = self.config.revive_after_ms
            self.world.queue.after(self.rng.randint(low, high), self._revive, broker.broker_id)
        self.world.queue.after(self._gap(self.config.death_every_ms), self._maybe_kill)

    def _revive(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if not self.random_ops or broker.alive:
            return  # the liveness phase keeps the dead dead: they must end up fenced
        broker.alive = True
        broker.incarnation += 1
        broker.next_beat_ms = 0
        self.trace(f"broker {broker_id} restarts as incarnation {broker.incarnation}")

    # --- the end state ----------------------------------------------------------------------

    def lagging(self) -> list[str]:
        """Why the cluster has not converged yet; empty once it has."""
        why: list[str] = []
        node = self.active()
        if node is None or node.core is None:
            return ["no active controller"]
        found = self._active()
        if self.requests or (found is not None and found[1].core.pending):
            why.append("an operation is in flight or queued")
        sm = node.sm
        assert isinstance(sm, MetadataStateMachine)
        image = sm.image
        for broker in self.brokers.values():
            reg = image.cluster.brokers.get(broker.broker_id)
            if broker.alive:
                if reg is None or reg.incarnation_id != broker.incarnation_id or reg.fenced:
                    why.append(f"live broker {broker.broker_id} not registered and unfenced")
            elif reg is not None and not reg.fenced:
                why.append(f"dead broker {broker.broker_id} not fenced")
        hw = node.core.high_watermark
        for other in self.world.cluster.nodes.values():
            if other.core is None or other.applied != hw:
                why.append(f"node {other.node_id} applied {other.applied} of {hw}")
        return why
