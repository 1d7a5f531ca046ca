"""The simulated controller: the real metadata/ operations, run by the product's
ControllerCore on whichever node of the controller quorum is active (quorum.py: the
simulated Raft of tests/sim under them, a core and a HeartbeatTracker on every node).

A broker's call arrives at one controller node (quorum.deliver, over the simulated network;
which node is the broker's ControllerRouting's choice, controller_link.py). A node whose
core is not active answers NOT_CONTROLLER naming the Raft leader it knows; the active one
computes the operation's records with the pure functions the QuorumController runs
(register_broker, heartbeat, alter_partition; fence_broker through its tracker, quorum.py)
against the core's image (committed plus pending writes), writes them to the core and
proposes them to Raft at once, and answers once the core says they committed, or
NOT_CONTROLLER once it says leadership moved first. So each partition's registration changes
exactly as in Strom (and KRaft): a broker whose session runs out is fenced and leaves every
ISR (the last member stays), a leader it held goes to the first ISR replica that may lead (never
outside the ISR: unclean election is off), every change bumps the partition epoch and every
leader change the leader epoch; an unfenced broker gives an offline partition its leader
back; AlterPartition is accepted only with the current leader epoch and partition epoch and
eligible (unfenced, not shutting down) members, partition by partition of a request that
may carry several (a stale broker epoch refuses it whole).

The topics are created by create_topics, placed by the controller's placement
(metadata/placement.py) from the plan's start for each, so replica sets and first leaders
differ between partitions.

Every committed image is kept (`history`, one entry each time the committed Raft log grows),
with the records that made it: brokers replay it in order, each at its own pace (broker.py),
which is how the metadata reaches them late and out of step with each other; `delta` is what
their MetadataLoader publishes for a step. Before the brokers start, `bootstrap` registers
them and creates the topics through the first active controller (`commit` runs the world
until its records are committed).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from google.protobuf.message import Message

from broker.metadata_gate import full_delta
from metadata.alter_partition import IsrProposal, alter_partition
from metadata.broker_lifecycle import (
    BrokerRegistrationRequest,
    HeartbeatRequest,
    heartbeat,
    register_broker,
)
from metadata.delta import MetadataDelta
from metadata.errors import ApiError
from metadata.image import Endpoint, MetadataImage, PartitionRegistration
from metadata.topic_control import NewTopic, create_topics
from strom_api.v1 import metadata_pb2 as pb
from tests.replication_sim.quorum import ControllerNode, Quorum, node_of

if TYPE_CHECKING:
    from tests.replication_sim.world import World

TOPIC_NAMES = ("orders", "payments")

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
        self.stats = ControllerStats()
        self.quorum = Quorum(world, world.plan.controllers)
        self.quorum.on_commit = self._committed
        self.quorum.on_fenced = self._fenced
        self.partitions: list[TopicPartition] = []  # every partition, once bootstrapped

    @property
    def image(self) -> MetadataImage:
        """The latest committed image."""
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
        each, as the plan draws them): the cluster as it stands when the brokers start (once
        the quorum elected its first active controller)."""
        _, ctl = self._await_active()
        first = ctl.core.next_offset  # a broker's epoch is the offset of its record
        records: list[Message] = []
        for b in broker_ids:
            records.append(
                pb.RegisterBrokerRecord(
                    broker_id=b,
                    incarnation_id=incarnation_id(b, 0),
                    broker_epoch=first + len(records),
                    endpoints=[e.to_pb() for e in endpoints(b)],
                    fenced=True,
                )
            )
        self.commit(records, "register brokers")
        epochs = {b: self.image.cluster.brokers[b].epoch for b in broker_ids}
        self.commit(
            [pb.UnfenceBrokerRecord(broker_id=b, broker_epoch=epochs[b]) for b in broker_ids],
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
        found = self.quorum.active()
        assert found is not None
        for b in broker_ids:
            found[1].tracker.touch(b, self.world.now_ms)

    def commit(self, records: Sequence[Message], why: str) -> None:
        """Before the brokers start: `records` written through the active controller, the
        world run until they are committed (and so in `history`)."""
        if not records:
            return
        world, quorum = self.world, self.quorum
        assert not quorum.started, "commit() runs the world: for the bootstrap only"
        raft_id, ctl = self._await_active()
        done: list[bool] = []
        quorum.write(raft_id, ctl, records, None, why, -1, None, lambda: done.append(True))
        while not done:
            # The network is quiet until the run starts (quorum.QuorumLinks.lossy): a write
            # that fails here is a bug, not bad luck.
            assert ctl.waiting and quorum.controllers.get(raft_id) is ctl, f"{why}: failed"
            assert world.step(), f"{why}: never committed"

    def _await_active(self) -> tuple[int, ControllerNode]:
        found = self.quorum.active()
        while found is None:
            assert self.world.step(), "no controller became active"
            found = self.quorum.active()
        return found

    def _committed(self, records: Sequence[Message], image: MetadataImage) -> None:
        """The committed metadata log grew (quorum.py): brokers may replay it."""
        before = self.image
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
            f"controller: committed {len(records)} records -> offset {image.offset}"
            + "".join(changes)
        )
        self.world.on_metadata_commit()

    def _fenced(self) -> None:
        self.stats.fences += 1

    # --- the quorum's own clock: session expiry (quorum.py) ---------------------------------

    def start(self) -> None:
        self.quorum.start()

    # --- RPCs (arrive at a controller node over the network, quorum.deliver; the answer
    # goes back the same way once the core completes the write) ------------------------------

    def handle_register(
        self,
        broker_id: int,
        incarnation: bytes,
        previous_broker_epoch: int,
        reply: Callable[..., None],
    ) -> None:
        quorum = self.quorum
        raft_id, ctl = quorum.serving_node()
        if ctl is None:
            quorum.refuse(raft_id, broker_id, reply)
            return
        request = BrokerRegistrationRequest(
            broker_id, incarnation, endpoints(broker_id), None, previous_broker_epoch
        )
        core = ctl.core
        try:
            records, epoch = register_broker(
                core.image, ctl.tracker, request, core.next_offset, self.world.now_ms
            )
        except ApiError as error:
            self.stats.refused[f"register {error.error_name}"] += 1
            quorum.touched_tracker(ctl, broker_id)
            quorum.answer(raft_id, broker_id, reply, error)
            return
        quorum.touched_tracker(ctl, broker_id)

        def registered() -> None:
            self.stats.registrations += 1

        why = f"register broker {broker_id} epoch {epoch}"
        quorum.write(raft_id, ctl, records, epoch, why, broker_id, reply, registered)

    def handle_heartbeat(self, request: HeartbeatRequest, reply: Callable[..., None]) -> None:
        quorum = self.quorum
        raft_id, ctl = quorum.serving_node()
        if ctl is None:
            quorum.refuse(raft_id, request.broker_id, reply)
            return
        now = self.world.now_ms
        # QuorumController.broker_heartbeat: contact noted on arrival, whatever is pending.
        known = ctl.core.committed.cluster.brokers.get(request.broker_id)
        if known is not None and known.epoch == request.broker_epoch:
            ctl.tracker.touch(request.broker_id, now)
        before = ctl.core.image.cluster.brokers.get(request.broker_id)
        try:
            records, response = heartbeat(ctl.core.image, ctl.tracker, request, now)
        except ApiError as error:
            self.stats.refused[f"heartbeat {error.error_name}"] += 1
            quorum.touched_tracker(ctl, request.broker_id)
            quorum.answer(raft_id, request.broker_id, reply, error)
            return
        quorum.touched_tracker(ctl, request.broker_id)
        what = "controlled shutdown of" if request.want_shutdown else "unfence"
        unfences = before is not None and before.fenced and not response.is_fenced

        def committed() -> None:
            if unfences:
                self.stats.unfences += 1

        why = f"heartbeat: {what} broker {request.broker_id}"
        quorum.write(raft_id, ctl, records, response, why, request.broker_id, reply, committed)

    def handle_alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        proposals: Sequence[IsrProposal],
        reply: Callable[..., None],
    ) -> None:
        """One AlterPartition request: a result per proposal, or the whole request's error."""
        quorum = self.quorum
        raft_id, ctl = quorum.serving_node()
        if ctl is None:
            quorum.refuse(raft_id, broker_id, reply)
            return
        try:
            records, results = alter_partition(ctl.core.image, broker_id, broker_epoch, proposals)
        except ApiError as error:  # the whole request: STALE_BROKER_EPOCH
            self.stats.refused[f"AlterPartition {error.error_name}"] += 1
            quorum.answer(raft_id, broker_id, reply, error)
            return
        for proposal, result in zip(proposals, results, strict=True):
            if result.error is not None:
                self.stats.refused[f"AlterPartition {result.error.error_name}"] += 1
                topic = ctl.core.image.topics.by_id.get(proposal.topic_id)
                name = "?" if topic is None else topic.name
                self.world.trace.record(
                    f"controller {node_of(raft_id)}: AlterPartition from {broker_id} for "
                    f"{name}-{proposal.partition_id} isr={list(proposal.new_isr)} "
                    f"le={proposal.leader_epoch} pe={proposal.partition_epoch}: "
                    f"{result.error.error_name}"
                )

        def committed() -> None:
            self.stats.isr_changes += sum(r.error is None for r in results)

        why = f"AlterPartition from broker {broker_id}"
        quorum.write(raft_id, ctl, records, results, why, broker_id, reply, committed)


def incarnation_id(broker_id: int, incarnation: int) -> bytes:
    return broker_id.to_bytes(8, "big") + incarnation.to_bytes(8, "big")
