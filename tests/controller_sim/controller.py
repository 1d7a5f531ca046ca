"""The simulated active controller and its brokers, over the simulated Raft.

SimController does what metadata/controller.py's QuorumController does, on the simulated
clock instead of asyncio: whenever some node leads and its image holds its own epoch's first
entry (LeaderChange), it is the active controller and runs one operation at a time against
that node's committed image: it computes the records with the pure functions of metadata/
(register_broker, heartbeat, fence_broker, create_topics, delete_topics, alter_partition),
proposes them together on that leader, and waits until the leader's high watermark passes
them, or the leader changes (the operation is then abandoned: its records commit or not,
all together, which the checker verifies). A newly active controller re-seeds its
HeartbeatTracker with "now", as QuorumController.is_active does.

The brokers (SimBroker) register (broker epoch = the leader's log end when proposed, as
QuorumController.register_broker computes it), heartbeat every `heartbeat_interval_ms`
(which unfences them once they replayed their registration), and, drawn by the seed, die
(stop heartbeating: the tracker then fences them one session later) or come back as a new
incarnation. Partition leaders that are alive send AlterPartition ISR shrinks and expands,
now and then with a stale epoch. Operations that fail validation just count their errors.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from google.protobuf.message import Message

from metadata.alter_partition import IsrProposal, alter_partition
from metadata.broker_lifecycle import (
    BrokerRegistrationRequest,
    HeartbeatRequest,
    HeartbeatTracker,
    fence_broker,
    heartbeat,
    register_broker,
)
from metadata.errors import ApiError
from metadata.image import Endpoint, MetadataImage
from metadata.records import NO_LEADER, encode
from metadata.topic_control import NewTopic, create_topics, delete_topics
from raft.core import NotLeaderError
from raft.roles import Role
from tests.controller_sim.checker import Operation
from tests.controller_sim.machine import MetadataStateMachine
from tests.controller_sim.world import ControllerWorld
from tests.sim.cluster import SimNode

TOPIC_NAMES = ("orders", "payments", "clicks", "logs", "audit", "events")

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


@dataclass(frozen=True, slots=True)
class Inflight:
    node_id: int
    incarnation: int
    operation: Operation


@dataclass
class Stats:
    ops: Counter[str] = field(default_factory=Counter)  # committed, by kind
    errors: Counter[str] = field(default_factory=Counter)  # ApiError names
    abandoned: int = 0  # leader changed before the records committed
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
        self.tracker = HeartbeatTracker(config.session_timeout_ms)
        self.active_as: tuple[int, int, int] | None = None  # node, incarnation, epoch
        self.inflight: Inflight | None = None
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
        """The node whose controller is active: it leads, and its image holds its epoch's
        first entry (so everything committed before it)."""
        best = None
        for node in self.world.cluster.leaders():
            core = node.core
            assert core is not None
            sm = node.sm
            if isinstance(sm, MetadataStateMachine) and sm.image.epoch == core.epoch:
                if best is None or (best.core is not None and core.epoch > best.core.epoch):
                    best = node
        return best

    def _step(self) -> None:
        self.world.queue.after(self.config.step_ms, self._step)
        if self.inflight is not None and not self._settle_inflight():
            return
        node = self.active()
        if node is None or node.core is None:
            return
        key = (node.node_id, node.incarnation, node.core.epoch)
        sm = node.sm
        assert isinstance(sm, MetadataStateMachine)
        if key != self.active_as:
            self.active_as = key
            self.stats.activations += 1
            self.tracker.reseed(sm.image, self.now_ms)
            self.trace(f"node {node.node_id} active in epoch {node.core.epoch}")
        picked = self._next_operation(sm.image)
        if picked is not None:
            self._run(node, *picked)

    def _settle_inflight(self) -> bool:
        """Whether the operation in flight is over (committed, or its leader gone)."""
        inflight = self.inflight
        assert inflight is not None
        node = self.world.cluster.nodes[inflight.node_id]
        core = node.core
        op = inflight.operation
        if (
            core is None
            or node.incarnation != inflight.incarnation
            or core.role is not Role.LEADER
            or core.epoch != op.epoch
        ):
            self.stats.abandoned += 1
            self.trace(f"{op.kind} at {op.first}..{op.last} abandoned: the leader changed")
            self.inflight = None
            return True
        if node.applied > op.last:
            self.stats.ops[op.kind.split()[0]] += 1
            self.inflight = None
            return True
        return False

    def _run(self, node: SimNode, kind: str, fn: OpFn) -> None:
        core = node.core
        assert core is not None
        first = node.log.end_offset()
        sm = node.sm
        assert isinstance(sm, MetadataStateMachine)
        try:
            records = fn(sm.image, first)
        except ApiError as error:
            self.stats.errors[error.error_name] += 1
            self.trace(f"{kind}: {error}")
            return
        if not records:
            return
        op = Operation(kind, core.epoch, first, first + len(records) - 1)
        self.world.checker.expect_operation(op)
        try:
            last = self.world.cluster.propose(node.node_id, [encode(r) for r in records])
        except NotLeaderError:  # not while it is active; kept for safety
            return
        assert last == op.last, f"{kind} landed at ..{last}, expected {op}"
        self.inflight = Inflight(node.node_id, node.incarnation, op)
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

        def beat(img: MetadataImage, _: int) -> list[Message]:
            request = HeartbeatRequest(b, epoch, current_metadata_offset=img.offset)
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
            records, results = alter_partition(img, leader, epoch, [proposal])
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
        if self.inflight is not None or self.requests:
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
