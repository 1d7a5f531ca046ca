"""A simulated broker's metadata: the loader (MetadataLoader) replays the controller's
committed images in order, at its own pace (a random lag, stalls, nothing while cut off from
the controller), possibly skipping some (a delta covers several records), and after a
restart possibly from an image older than the last one the previous incarnation acted on
(plan.restart_replay). What reaches the replicas, when, and when the broker serves is the
product's MetadataGate (broker/metadata_gate.py), pumped as server/node.py pumps it
(_apply_local_changes: told of the catch-up when the lifecycle core has it, looked at every
CAUGHT_UP_POLL_S; its batches carried out at once, the simulated disk being instant).
Carrying out a batch: every registration its delta gives a replica of ours goes to that
replica's Partition (ReplicaManager.attach, replicas.py), and the fetcher re-plans a
partition whose role or leader changed. Clients' metadata and the ISR eligibility check read
the applied image, heartbeats the loaded one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.metadata_gate import CAUGHT_UP_POLL_S, ApplyBatch, MetadataGate
from metadata.image import MetadataImage, PartitionRegistration
from tests.replication_sim.controller import TopicPartition, describe_registration, tp_name

if TYPE_CHECKING:
    from tests.replication_sim.broker import SimBroker

CAUGHT_UP_POLL_MS = round(CAUGHT_UP_POLL_S * 1000)


class MetadataPump:
    def __init__(self, broker: SimBroker, floor: int) -> None:
        self.broker = broker
        self.loaded = MetadataImage()  # the MetadataLoader's image (heartbeats carry its offset)
        self.image = MetadataImage()  # the ReplicaManager's: the last one applied
        self.applied: dict[TopicPartition, PartitionRegistration] = {}
        # The position in the controller's history of the image loaded (-1: none yet), and
        # how far the local metadata log goes (it survives a restart: the first image
        # applied is no older than the last one applied before, as the Raft observer commits
        # its whole local log at once).
        self.pos = -1
        self.floor = floor
        self.scheduled = False
        self.stalled_until = 0
        # The product's metadata gate: what reaches the replicas, and when the broker serves.
        self.gate = MetadataGate()

    def schedule(self) -> None:
        broker = self.broker
        if not broker.alive or self.scheduled:
            return
        history = broker.world.controller.history
        if max(self.pos + 1, self.floor) >= len(history):
            return
        self.scheduled = True
        rng = broker.world.rngs["metadata"]
        broker.later(rng.randint(0, broker.world.plan.metadata_delay_ms), self._deliver)

    def stall(self, until_ms: int) -> None:
        self.stalled_until = max(self.stalled_until, until_ms)

    def _deliver(self) -> None:
        broker, world = self.broker, self.broker.world
        self.scheduled = False
        source = world.controller.quorum.metadata_source()  # the Raft leader's node
        if (
            source is None
            or not world.network.connected(broker.id, source)
            or broker.now < self.stalled_until
        ):
            self.scheduled = True
            broker.later(100, self._deliver)
            return
        history = world.controller.history
        rng = world.rngs["metadata"]
        low, last = max(self.pos + 1, self.floor), len(history) - 1
        if low > last:
            return
        if self.pos < 0 and not world.plan.restart_replay:
            target = last  # the first image after a start: the newest there is
        else:
            target = last if rng.random() < 0.5 else rng.randint(low, last)
        self.load(target)
        self.schedule()

    def load(self, target: int) -> None:
        """MetadataLoader._publish -> Node._queue_local_changes: the loader goes from the
        image it has to history[target] and hands the gate the delta and the image."""
        controller = self.broker.world.controller
        delta = controller.delta(self.pos, target)
        self.pos = target
        self.loaded = image = controller.history[target]
        self.gate.delta_loaded(delta, image)
        self.run_gate()

    def await_caught_up(self) -> None:
        """Node._apply_local_changes: looks every CAUGHT_UP_POLL_S whether the controller
        said the broker caught up, then tells the gate."""
        if not self.broker.caught_up:
            self.broker.later(CAUGHT_UP_POLL_MS, self.await_caught_up)
            return
        self.gate.broker_caught_up()
        self.run_gate()

    def run_gate(self) -> None:
        """Node._apply_local_changes: carries out what the gate decides, at once."""
        broker = self.broker
        while True:
            serving = self.gate.serving
            step = self.gate.poll()
            if step.start_serving:  # Node._start_serving
                broker.lifecycle.set_ready_to_unfence()
            batch = step.batch
            if batch is None:
                return
            if not serving:
                broker.trace(
                    f"caught up: applies {len(batch.detach)} queued deltas as metadata offset "
                    f"{batch.image.offset}"
                )
                broker.stats.coalesced_deltas += len(batch.detach)
            self._apply_batch(batch)
            self.gate.batch_applied()

    def _apply_batch(self, batch: ApplyBatch) -> None:
        """ReplicaManager.detach of every delta of the batch (no partition is ever deleted,
        nor moved away: nothing to stop), then ReplicaManager.attach of its delta: each
        registration it gives a replica of ours (a full delta gives every one, whatever
        changed; Partition.apply_registration of an unchanged registration changes nothing,
        so it is skipped here), and the fetcher's re-plan of a partition that moved."""
        broker = self.broker
        assert not any(delta.topics.deleted for delta in batch.detach)
        image = self.image = batch.image
        for change in batch.delta.topics.changed.values():
            for index, registration in sorted(change.partitions.items()):
                tp = (change.name, index)
                if broker.id not in registration.replicas or registration == self.applied.get(tp):
                    continue
                self.applied[tp] = registration
                partition, moved = broker.replicas.apply(tp, change.topic_id, registration)
                broker.trace(
                    f"metadata offset {image.offset}: {tp_name(tp)} "
                    f"{describe_registration(registration)}"
                    + (" -> LEADER" if partition.is_leader and moved else "")
                    + (
                        f" -> follows {partition.leader_id}"
                        if moved and not partition.is_leader
                        else ""
                    )
                )
                if moved:
                    broker.follower.follow(partition)
