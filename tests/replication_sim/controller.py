"""The simulated active controller: the real metadata/ operations over a real MetadataImage.

One controller, always up (the Raft quorum under it is tests/sim's and tests/controller_sim's
business): an operation computes its records with the pure functions the QuorumController
runs (register_broker, heartbeat, fence_broker through the HeartbeatTracker, alter_partition),
they commit at once, and the answer goes back over the simulated network. So each partition's
registration changes exactly as in Strom (and KRaft): a broker whose session runs out is
fenced and leaves every ISR (the last member stays), a leader it held goes to the first ISR
replica that may lead (never outside the ISR: unclean election is off), every change bumps
the partition epoch and every leader change the leader epoch; an unfenced broker gives an
offline partition its leader back; AlterPartition is accepted only with the current leader
epoch and partition epoch and eligible (unfenced, not shutting down) members, partition by
partition of a request that may carry several (a stale broker epoch refuses it whole).

The topics are created at t=0 by create_topics, placed by the controller's placement
(metadata/placement.py) from the plan's start for each, so replica sets and first leaders
differ between partitions.

Every committed image is kept (`history`), with the records that made it: brokers replay it
in order, each at its own pace (broker.py), which is how the metadata reaches them late and
out of step with each other; `delta` is what their MetadataLoader publishes for a step.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from broker.metadata_gate import full_delta
from metadata.alter_partition import IsrProposal, IsrResult, alter_partition
from metadata.broker_lifecycle import (
    BrokerRegistrationRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatTracker,
    fence_broker,
    heartbeat,
    register_broker,
)
from metadata.delta import MetadataDelta
from metadata.errors import ApiError
from metadata.image import Endpoint, MetadataImage, PartitionRegistration
from metadata.topic_control import NewTopic, create_topics
from strom_api.v1 import metadata_pb2 as pb
from tests.replication_sim.network import CONTROLLER

if TYPE_CHECKING:
    from tests.replication_sim.world import World

TOPIC_NAMES = ("orders", "payments")
TICK_MS = 50

TopicPartition = tuple[str, int]


def topic_id_of(index: int) -> bytes:
    """The id of the plan's topic `index` (fixed, so that traces compare between runs)."""
    return bytes(range(index, index + 16))


def endpoints(broker_id: int) -> list[Endpoint]:
    return [Endpoint("PLAINTEXT", f"broker-{broker_id}", 9092)]


def describe_registration(r: PartitionRegistration | None) -> str:
    if r is None:
        return "-"
    return f"leader={r.leader} le={r.leader_epoch} pe={r.partition_epoch} isr={list(r.isr)}"


def tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


@dataclass
class ControllerStats:
    commits: int = 0
    leader_changes: int = 0
    fences: int = 0
    unfences: int = 0
    registrations: int = 0
    isr_changes: int = 0
    refused: Counter[str] = field(default_factory=Counter)


class SimController:
    def __init__(self, world: World) -> None:
        self.world = world
        self.history: list[MetadataImage] = [MetadataImage()]
        self.records: list[Sequence[Message]] = [()]  # what took history[i - 1] to history[i]
        self.tracker = HeartbeatTracker(world.plan.session_timeout_ms)
        self.stats = ControllerStats()
        self.partitions: list[TopicPartition] = []  # every partition, once bootstrapped

    @property
    def image(self) -> MetadataImage:
        return self.history[-1]

    def registration(
        self, tp: TopicPartition, image: MetadataImage | None = None
    ) -> PartitionRegistration | None:
        return (image or self.image).topics.partition(*tp)

    def describe(self) -> str:
        """Every partition's registration, for a failure's report."""
        return "; ".join(
            f"{tp_name(tp)} {describe_registration(self.registration(tp))}"
            for tp in self.partitions
        )

    def delta(self, since: int, target: int) -> MetadataDelta:
        """The delta a broker's loader publishes when it goes from history[since] (-1: a
        process that has loaded nothing yet) to history[target], skipping what is between."""
        if since < 0:
            return full_delta(self.history[target])
        records = itertools.chain.from_iterable(self.records[since + 1 : target + 1])
        return MetadataDelta(self.history[since]).replay_all(records)

    # --- committing ----------------------------------------------------------------------------

    def bootstrap(self, broker_ids: Sequence[int], topics: Sequence[tuple[int, int]]) -> None:
        """Brokers registered and unfenced, then the topics ((partitions, placement start)
        each, as the plan draws them): the cluster as it stands at t=0."""
        records: list[Message] = []
        for b in broker_ids:
            records.append(
                pb.RegisterBrokerRecord(
                    broker_id=b,
                    incarnation_id=incarnation_id(b, 0),
                    broker_epoch=len(records),
                    endpoints=[e.to_pb() for e in endpoints(b)],
                    fenced=True,
                )
            )
        self.commit(records, "register brokers")
        self.commit(
            [pb.UnfenceBrokerRecord(broker_id=b, broker_epoch=i) for i, b in enumerate(broker_ids)],
            "unfence brokers",
        )
        plan = self.world.plan
        for index, (count, start) in enumerate(topics):
            topic_id = topic_id_of(index)
            topic = NewTopic(
                TOPIC_NAMES[index],
                num_partitions=count,
                replication_factor=plan.replication_factor,
                configs={"min.insync.replicas": str(plan.min_insync_replicas)},
            )
            created, results = create_topics(
                self.image, [topic], start=start, topic_id_factory=topic_id.__bytes__
            )
            assert results[0].error is None, results[0].error
            self.commit(created, f"create topic {topic.name}")
            self.partitions += [(topic.name, p) for p in range(count)]
        for b in broker_ids:
            self.tracker.touch(b, self.world.now_ms)

    def commit(self, records: Sequence[Message], why: str) -> None:
        if not records:
            return
        before = self.image
        image = MetadataDelta(before).replay_all(records).apply(before.offset + len(records), 1)
        self.history.append(image)
        self.records.append(records)
        self.stats.commits += 1
        changes = []
        for tp in self.partitions:
            old, new = self.registration(tp, before), self.registration(tp, image)
            if old == new:
                continue
            changes.append(f"; {tp_name(tp)} {describe_registration(new)}")
            if old is not None and new is not None and new.leader_epoch != old.leader_epoch:
                self.stats.leader_changes += 1
        self.world.trace.record(
            f"controller: commit {why} -> offset {image.offset}" + "".join(changes)
        )
        self.world.on_metadata_commit()

    # --- the controller's own clock: session expiry ------------------------------------------

    def start(self) -> None:
        self.world.queue.after(TICK_MS, self._tick)

    def _tick(self) -> None:
        for broker_id in self.tracker.expired(self.image, self.world.now_ms):
            self.stats.fences += 1
            self.commit(fence_broker(self.image, broker_id), f"fence broker {broker_id} (session)")
        self.world.queue.after(TICK_MS, self._tick)

    # --- RPCs (arrive over the network; the answer goes back the same way) --------------------

    def _answer(self, broker_id: int, reply: Callable[[Any], None], answer: Any) -> None:
        """The answer leaves once the records are committed (a Raft round trip and fsync)."""
        world = self.world
        latency = world.rngs["controller"].randint(0, world.plan.controller_latency_ms)
        world.queue.after(latency, self._send_answer, broker_id, reply, answer)

    def _send_answer(self, broker_id: int, reply: Callable[[Any], None], answer: Any) -> None:
        self.world.network.send(CONTROLLER, broker_id, reply, answer, lossy=True)

    def handle_register(
        self,
        broker_id: int,
        incarnation: bytes,
        previous_broker_epoch: int,
        reply: Callable[[int | ApiError], None],
    ) -> None:
        request = BrokerRegistrationRequest(
            broker_id, incarnation, endpoints(broker_id), None, previous_broker_epoch
        )
        try:
            records, epoch = register_broker(
                self.image, self.tracker, request, self.image.offset, self.world.now_ms
            )
        except ApiError as error:
            self.stats.refused[f"register {error.error_name}"] += 1
            self._answer(broker_id, reply, error)
            return
        self.stats.registrations += 1
        self.commit(records, f"register broker {broker_id} epoch {epoch}")
        self._answer(broker_id, reply, epoch)

    def handle_heartbeat(
        self, request: HeartbeatRequest, reply: Callable[[HeartbeatResponse | ApiError], None]
    ) -> None:
        before = self.image.cluster.brokers.get(request.broker_id)
        try:
            records, response = heartbeat(self.image, self.tracker, request, self.world.now_ms)
        except ApiError as error:
            self.stats.refused[f"heartbeat {error.error_name}"] += 1
            self._answer(request.broker_id, reply, error)
            return
        if records:
            what = "controlled shutdown of" if request.want_shutdown else "unfence"
            if before is not None and before.fenced and not response.is_fenced:
                self.stats.unfences += 1
            self.commit(records, f"heartbeat: {what} broker {request.broker_id}")
        self._answer(request.broker_id, reply, response)

    def handle_alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        proposals: Sequence[IsrProposal],
        reply: Callable[[list[IsrResult] | ApiError], None],
    ) -> None:
        """One AlterPartition request: a result per proposal, or the whole request's error."""
        try:
            records, results = alter_partition(self.image, broker_id, broker_epoch, proposals)
        except ApiError as error:  # the whole request: STALE_BROKER_EPOCH
            self.stats.refused[f"AlterPartition {error.error_name}"] += 1
            self._answer(broker_id, reply, error)
            return
        for proposal, result in zip(proposals, results, strict=True):
            if result.error is not None:
                self.stats.refused[f"AlterPartition {result.error.error_name}"] += 1
                topic = self.image.topics.by_id.get(proposal.topic_id)
                name = "?" if topic is None else topic.name
                self.world.trace.record(
                    f"controller: AlterPartition from {broker_id} for {name}-"
                    f"{proposal.partition_id} isr={list(proposal.new_isr)} "
                    f"le={proposal.leader_epoch} pe={proposal.partition_epoch}: "
                    f"{result.error.error_name}"
                )
            else:
                self.stats.isr_changes += 1
        self.commit(records, f"AlterPartition from broker {broker_id}")
        self._answer(broker_id, reply, results)


def incarnation_id(broker_id: int, incarnation: int) -> bytes:
    return broker_id.to_bytes(8, "big") + incarnation.to_bytes(8, "big")
