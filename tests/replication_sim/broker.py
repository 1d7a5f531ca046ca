"""One simulated broker process holding one replica of the partition: the real Partition over
a real Log, and around it what broker/ runs on an event loop, redone on the simulated clock
step by step as the real code does it:

- metadata: the loader (MetadataLoader) replays the controller's committed images in order,
  at its own pace (a random lag, stalls, nothing while cut off from the controller), possibly
  skipping some (a delta covers several records), and after a restart possibly from an image
  older than the last one the previous incarnation acted on (plan.restart_replay). What
  reaches the replica, when, and when the broker serves is not redone: the product's
  MetadataGate (broker/metadata_gate.py: nothing before the broker caught up, then the
  deltas loaded meanwhile as one, then each as it is loaded), pumped here as server/node.py
  pumps it (_apply_local_changes: told of the catch-up when the lifecycle core has it, looked
  at every CAUGHT_UP_POLL_S; its batches carried out at once, the simulated disk being
  instant). Carrying out a batch, for the one partition: when the batch's delta touched it,
  Partition.apply_registration of the registration the delta gives it, and a re-plan of the
  fetcher when the role or the leader changed (ReplicaManager.attach / _apply); clients'
  metadata and the ISR eligibility check read the applied image, heartbeats the loaded one;
- lifecycle: the product's BrokerLifecycle (broker/lifecycle_state.py: when to register and
  heartbeat, want_fence until the broker applies metadata, what an answer does, whether a
  STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED to any call drops the registration, when a
  controlled shutdown is over), pumped here as LifecycleClient._pump pumps it; registering
  again after a restart is a new incarnation, refused while the old session lives;
- replica fetcher: not redone, the product's own FollowerFetch (broker/follower_fetch.py:
  which stream follows the partition, what each fetch asks, what its answer does, the rests
  and the broken stream's backoff), pumped here as broker/replica_fetcher.py pumps it over
  gRPC: the core's next fetch goes out on the stream to the leader process (refused after
  CONNECT_FAIL_MS when that process is dead; a reply never reaches another incarnation of
  the follower), the read gives up after the core's read timeout, a wake-up is set for when
  the core says a fetch may be due; what the answers did is counted and traced;
- leader side: follower fetches and acks=all produces wait in the product's Purgatory
  (broker/purgatory.py: when a long poll is answered, what a waiting produce answers and
  when), pumped here as ReplicaManager pumps it: a partition's change reaches it on the next
  turn of the loop, a wake-up is set at its next deadline; each read of a follower fetch is
  followed by the ISR check; the isr-expiration task every replica.lag.time.max.ms / 2; ISR
  changes and their answers run through the product's own IsrProposals
  (broker/isr_proposals.py: what is queued, what is sent, what an answer does), pumped here
  as AlterPartitionSender pumps it (one request in flight, drained on the next turn of the
  loop), with the lifecycle client's retries (call_controller's voters + 1 tries);
- calls to the controller quorum: which controller node each try goes to, following
  NOT_CONTROLLER's hint and moving on after no answer, is the product's ControllerRouting
  (broker/controller_routing.py), pumped by controller_calls.py as LifecycleClient pumps it;
  the metadata log is replayed from the Raft leader's node (none while there is no leader);
- DeleteRecords (server/client_service.py): the leader moves its log start, then writes the
  offset checkpoints before answering;
- the process: a crash closes the files without a word (the page cache keeps every write) and
  loses everything in memory; a clean stop snapshots the producers, flushes and checkpoints;
  a restart opens the Log with the last checkpointed high watermark, log start and recovery
  point, and builds a new Partition when the metadata first names it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.controller_routing import NO_CONTROLLER_S
from broker.follower_fetch import (
    Applied,
    FetchRequest,
    FetchResponse,
    FetchStream,
    FollowerFetch,
    PartitionAnswer,
    PartitionOutcome,
    StreamKey,
)
from broker.isr_proposals import ISR_RETRY_BACKOFF_S, IsrProposals, Outcome
from broker.lifecycle_state import BrokerLifecycle, BrokerState, RegisterBroker
from broker.metadata_gate import CAUGHT_UP_POLL_S, ApplyBatch, MetadataGate
from broker.partition import LeaderAppend, Partition
from broker.partition_leader import IsrChange
from broker.purgatory import (
    DelayedFetch,
    DelayedOperation,
    DelayedProduce,
    FetchReadSummary,
    Purgatory,
)
from broker.replica_config import ReplicaConfig
from broker.replication_settings import ReplicationSettings
from broker.topic_settings import TopicSettings
from metadata.alter_partition import IsrProposal, IsrResult
from metadata.broker_lifecycle import HeartbeatRequest, HeartbeatResponse
from metadata.errors import ApiError
from metadata.image import MetadataImage, PartitionRegistration
from storage.config import LogConfig
from storage.log import Log
from strom_api.record_batch import parse_header
from tests.replication_sim.clients import PRODUCER_STATE_ERRORS
from tests.replication_sim.controller import (
    PARTITION,
    TOPIC,
    TOPIC_ID,
    describe_registration,
    incarnation_id,
)
from tests.replication_sim.controller_calls import ControllerCalls

if TYPE_CHECKING:
    from tests.replication_sim.world import World

CONTROLLED_SHUTDOWN_TIMEOUT_MS = 30_000  # server/node.py CONTROLLED_SHUTDOWN_TIMEOUT_S
CONNECT_FAIL_MS = 20  # a connection refused by a dead process comes back about this fast
CAUGHT_UP_POLL_MS = round(CAUGHT_UP_POLL_S * 1000)
ISR_RETRY_BACKOFF_MS = round(ISR_RETRY_BACKOFF_S * 1000)


@dataclass
class Checkpoint:
    """The offset checkpoints of the log directory (LogManager.checkpoint) and the clean
    shutdown marker: what a restart opens the Log with."""

    high_watermark: int = 0
    log_start_offset: int = 0
    recovery_point: int = 0
    clean: bool = False
    clean_epoch: int = -1  # the broker epoch in the clean-shutdown marker (KIP-966)


@dataclass(frozen=True, slots=True)
class FetchCall:
    """A fetch of the follower's core on its stream, between two processes (a reply never
    reaches another incarnation of the follower: its stream died with the process)."""

    follower: int
    follower_incarnation: int
    leader: int
    leader_incarnation: int
    stream: StreamKey
    request: FetchRequest


@dataclass(frozen=True, slots=True)
class FetchReply:
    """What the follower's read on the stream returns: the leader's answer to the fetch
    `correlation_id`, or `broken` (the call failed: reset, refused)."""

    leader: int
    follower_incarnation: int
    stream: StreamKey
    correlation_id: int
    broken: str | None = None
    response: FetchResponse = FetchResponse()


@dataclass
class AlterCall:
    """One AlterPartition request of the AlterPartitionSender, through call_controller."""

    partition: Partition
    change: IsrChange
    proposal: IsrProposal
    broker_epoch: int


@dataclass
class BrokerStats:
    crashes: int = 0
    clean_stops: int = 0
    truncations: int = 0
    truncated_records: int = 0
    restarts_at: int = 0
    fetches: int = 0
    broken_streams: int = 0
    isr_proposals: int = 0
    isr_refusals: int = 0  # ISR updates not accepted (ReplicaManager's failed_isr_updates)
    isr_resends: int = 0  # ISR changes sent again after no answer
    isr_unsent: int = 0  # queued ISR changes the sender dropped: no longer pending
    stale_answers: int = 0
    idle_isr_adds: int = 0  # ISR expansions with a follower that is not fetching
    mid_batch_refusals: int = 0  # a follower refused a batch that starts below its log end
    reregistrations: int = 0  # registrations of a process already registered once
    coalesced_deltas: int = 0  # metadata deltas loaded before the broker was caught up


class SimBroker:
    def __init__(self, world: World, broker_id: int, directory: str) -> None:
        self.world = world
        self.id = broker_id
        self.directory = directory
        plan = world.plan
        self.log_config = LogConfig(segment_bytes=plan.segment_bytes, retention_ms=-1)
        self.settings = TopicSettings(
            log=self.log_config, min_insync_replicas=plan.min_insync_replicas
        )
        self.replica_config = ReplicaConfig(
            fetch_wait_max_ms=plan.fetch_wait_max_ms,
            fetch_backoff_ms=plan.fetch_backoff_ms,
            fetch_max_bytes=plan.fetch_max_bytes,
        )
        self.alive = False
        self.incarnation = -1
        self.checkpoint = Checkpoint()
        self.log: Log | None = None
        self.partition: Partition | None = None
        self.stats = BrokerStats()
        self.down_until: int | None = None  # when a stopped broker comes back
        self._reset_memory()
        self.md_pos = -1  # the position in the controller's history of the image applied
        self.md_floor = 0  # how far the local metadata log goes (it survives a restart)

    def _reset_memory(self) -> None:
        """Everything a process holds in memory only."""
        self.loaded = MetadataImage()  # the MetadataLoader's image (heartbeats carry its offset)
        self.image = MetadataImage()  # the ReplicaManager's: the last one applied
        self.applied: PartitionRegistration | None = None
        self.md_scheduled = False
        self.md_stalled_until = 0
        # The product's metadata gate: what reaches the replica, and when the broker serves.
        self.gate = MetadataGate()
        # The product's lifecycle decisions, and the pump's run (a controlled shutdown
        # starts a new one, as LifecycleClient cancels its task: the old one's timers and
        # answers are dropped)
        self.lifecycle = BrokerLifecycle(self.id, self.world.plan.heartbeat_interval_ms / 1000)
        self.pump_run = 0
        self.previous_broker_epoch = -1
        # The product's follower fetch core (broker/follower_fetch.py), with the transport's
        # state of each stream: the leader incarnation it reaches, the next wake-up set.
        replication = ReplicationSettings(self.id, self.replica_config, self._clock_s)
        self.fetch = FollowerFetch(self.id, self.replica_config, replication)
        self.connected_to: dict[StreamKey, int] = {}
        self.wakes: dict[StreamKey, int] = {}
        # The product's purgatory, the requests of its parked operations (a produce: the
        # clients.ProduceRequest and its append), and the wake-up set
        self.purgatory = Purgatory()
        self.fetches: dict[DelayedFetch, FetchCall] = {}
        self.produces: dict[DelayedProduce, tuple[Any, LeaderAppend]] = {}
        self.purgatory_wake: int | None = None
        # The calls to the controller quorum (the product's ControllerRouting picks the node)
        self.controller_calls = ControllerCalls(self)
        # The product's ISR proposals (in memory: a crash loses them, as the process's do),
        # and whether AlterPartitionSender's drain task runs
        self.isr = IsrProposals()
        self.isr_sending = False
        self.signal_scheduled = False
        self.partition = None

    # --- scheduling on behalf of this process ------------------------------------------------

    def later(self, delay_ms: int, action: Callable[..., None], *args: Any) -> None:
        """Runs `action` after `delay_ms` if this incarnation is still alive then."""
        self.world.queue.after(max(delay_ms, 0), self._if_alive, self.incarnation, action, args)

    def _if_alive(
        self, incarnation: int, action: Callable[..., None], args: tuple[Any, ...]
    ) -> None:
        if self.alive and self.incarnation == incarnation:
            action(*args)

    def reachable(self, incarnation: int) -> bool:
        return self.alive and self.incarnation == incarnation

    @property
    def now(self) -> int:
        return self.world.now_ms

    @property
    def broker_epoch(self) -> int:
        return self.lifecycle.broker_epoch

    @property
    def caught_up(self) -> bool:
        return self.lifecycle.caught_up

    @property
    def shutting_down(self) -> bool:
        return self.lifecycle.state in (
            BrokerState.PENDING_CONTROLLED_SHUTDOWN,
            BrokerState.SHUTTING_DOWN,
        )

    @property
    def wall(self) -> int:
        return self.world.wall_ms

    def trace(self, text: str) -> None:
        self.world.trace.record(f"b{self.id}: {text}")

    # --- the process ---------------------------------------------------------------------------

    def start(self, broker_epoch: int = -1) -> None:
        assert not self.alive
        self.incarnation += 1
        self.alive = True
        self.down_until = None
        self.md_floor = max(self.md_floor, self.md_pos)
        self._reset_memory()
        ckpt = self.checkpoint
        self.log = Log.open(
            self.directory,
            self.log_config,
            recovery_point=ckpt.recovery_point,
            log_start_offset=ckpt.log_start_offset,
            high_watermark=ckpt.high_watermark,
            clean_shutdown=ckpt.clean,
            clock=self.world.clock,
        )
        # What LogManager.previous_broker_epoch gives the broker to register with.
        self.previous_broker_epoch = ckpt.clean_epoch if ckpt.clean else -1
        ckpt.clean = False
        if broker_epoch >= 0:
            # The cluster as it stands at t=0 (World.start): registered, caught up and
            # serving already (the product's cores, the lifecycle fed its registration and a
            # first answer, the gate the catch-up), heartbeating at the fenced pace until the
            # controller's first answer.
            core, now_s = self.lifecycle, self.now / 1000
            step = core.poll(now_s)
            assert step.send is not None
            core.registered(step.send.request_id, broker_epoch, now_s)
            step = core.poll(now_s)
            assert step.send is not None
            core.heartbeat_answered(step.send.request_id, True, True, False, now_s)
            self.gate.broker_caught_up()
            self._run_gate()
        # The local metadata log survives: the first image applied is no older than the
        # last one applied before (the Raft observer commits its whole local log at once).
        self.md_pos = -1
        log = self.log
        self.trace(
            f"start incarnation {self.incarnation}: log [{log.log_start_offset}, "
            f"{log.log_end_offset}) hw {log.high_watermark}"
            + (
                f" (recovery cut {log.load_info.truncated_bytes} B)"
                if log.load_info.truncated_bytes
                else ""
            )
        )
        self.world.checker.on_log_opened(self)
        plan = self.world.plan
        self.later(0, self._lifecycle, self.pump_run)
        self.later(max(plan.replica_lag_time_max_ms // 2, 50), self._isr_expiration)
        self.later(plan.hw_checkpoint_ms, self._checkpoint_loop)
        if not self.gate.caught_up:
            self.later(CAUGHT_UP_POLL_MS, self._await_caught_up)
        self.schedule_metadata()

    def crash(self) -> None:
        assert self.alive and self.log is not None
        self.stats.crashes += 1
        self.trace(f"CRASH (log end {self.log.log_end_offset}, hw {self.log.high_watermark})")
        self._die()
        for segment in self.log.segments:  # no flush, no index write: the page cache keeps it
            os.close(segment.fd)
        self.log = None

    def clean_stop(self) -> None:
        assert self.alive and self.log is not None
        self.stats.clean_stops += 1
        if self.partition is not None:
            self.partition.snapshot_producers()
        self.log.flush()
        self._write_checkpoint()
        self.checkpoint.clean = True
        # As Node._shutdown_logs: its registration's epoch, else the one it started with.
        self.checkpoint.clean_epoch = (
            self.broker_epoch if self.broker_epoch >= 0 else self.previous_broker_epoch
        )
        self.trace(f"clean stop (log end {self.log.log_end_offset})")
        self._die()
        self.log.close()
        self.log = None

    def _die(self) -> None:
        self.alive = False
        network = self.world.network
        for op in self.purgatory.drop_all():
            if isinstance(op, DelayedFetch):  # their streams break: the followers see a reset
                call = self.fetches[op]
                follower = self.world.brokers[call.follower]
                network.send(self.id, follower.id, follower.handle_fetch_answer, _reset(call))
            else:
                self.produces[op][0].fail("connection reset")
        self._reset_memory()
        self.world.checker.on_log_closed(self)

    def begin_controlled_shutdown(self) -> None:
        """server/node.py stop(): controlled shutdown first, then a clean stop."""
        self.trace("controlled shutdown begins")
        self.lifecycle.begin_controlled_shutdown(
            self.now / 1000, CONTROLLED_SHUTDOWN_TIMEOUT_MS / 1000, NO_CONTROLLER_S
        )
        if self.lifecycle.state is BrokerState.SHUTTING_DOWN:  # not registered: nothing to wait
            self.clean_stop()
            return
        self.pump_run += 1
        self._lifecycle(self.pump_run)

    # --- calls to the controller (LifecycleClient._call, controller_calls.py) -------------

    def _call(
        self,
        handler: Callable[..., None],
        args: tuple[Any, ...],
        done: Callable[[Any], None],
        broker_epoch: int | None = None,
        retry: bool = False,
    ) -> None:
        """`broker_epoch`: the one the request carries (None: it has none, RegisterBroker);
        `retry`: call_controller's tries, else one."""
        self.controller_calls.call(handler, args, done, broker_epoch, retry)

    def _lifecycle(self, run: int) -> None:
        """One step of LifecycleClient._pump: what the product's BrokerLifecycle says to
        send, or when to look again; its answer fed back, and the next step at once."""
        if run != self.pump_run:
            return  # a run a controlled shutdown replaced
        core, now_s = self.lifecycle, self.now / 1000
        step = core.poll(now_s)
        if step.done:
            self.trace(
                "controlled shutdown done: leads nothing"
                if core.released
                else "controlled shutdown gave up"
            )
            self.world.on_stopped(self, self.clean_stop)
            return
        if step.send is None:
            assert step.wake_at is not None
            # Whole milliseconds, never before the core's time (it would only wait again).
            wake = max(math.ceil(step.wake_at * 1000) - self.now, 1)
            self.later(wake, self._lifecycle, run)
            return
        request = step.send
        if isinstance(request, RegisterBroker):

            def registered(answer: Any) -> None:
                if run != self.pump_run:
                    return
                if isinstance(answer, int):
                    if core.registrations:
                        self.stats.reregistrations += 1  # the same process, again
                    core.registered(request.request_id, answer, self.now / 1000)
                    self.trace(f"registered, broker epoch {answer}")
                else:
                    core.failed(request.request_id, self.now / 1000)
                self._lifecycle(run)

            me = incarnation_id(self.id, self.incarnation)
            self._call(
                self.world.controller.handle_register,
                (self.id, me, self.previous_broker_epoch),
                registered,
            )
            return

        def beat(answer: Any) -> None:
            if run != self.pump_run:
                return
            if isinstance(answer, HeartbeatResponse):
                if answer.is_caught_up and not core.caught_up:
                    self.trace(f"caught up (metadata offset {self.loaded.offset})")
                core.heartbeat_answered(
                    request.request_id,
                    answer.is_caught_up,
                    answer.is_fenced,
                    answer.should_shut_down,
                    self.now / 1000,
                )
            else:
                core.failed(request.request_id, self.now / 1000)
            self._lifecycle(run)

        heartbeat = HeartbeatRequest(
            self.id,
            request.broker_epoch,
            self.loaded.offset,
            want_fence=request.want_fence,
            want_shutdown=request.want_shut_down,
        )
        self._call(
            self.world.controller.handle_heartbeat, (heartbeat,), beat, heartbeat.broker_epoch
        )

    def _checkpoint_loop(self) -> None:
        self._write_checkpoint()
        self.later(self.world.plan.hw_checkpoint_ms, self._checkpoint_loop)

    def _write_checkpoint(self) -> None:
        log = self.log
        assert log is not None
        self.checkpoint = Checkpoint(log.high_watermark, log.log_start_offset, log.recovery_point)

    # --- metadata ------------------------------------------------------------------------------

    def schedule_metadata(self) -> None:
        if not self.alive or self.md_scheduled:
            return
        history = self.world.controller.history
        if max(self.md_pos + 1, self.md_floor) >= len(history):
            return
        self.md_scheduled = True
        rng = self.world.rngs["metadata"]
        self.later(rng.randint(0, self.world.plan.metadata_delay_ms), self._deliver_metadata)

    def stall_metadata(self, until_ms: int) -> None:
        self.md_stalled_until = max(self.md_stalled_until, until_ms)

    def _deliver_metadata(self) -> None:
        self.md_scheduled = False
        source = self.world.controller.quorum.metadata_source()  # the Raft leader's node
        if (
            source is None
            or not self.world.network.connected(self.id, source)
            or self.now < self.md_stalled_until
        ):
            self.md_scheduled = True
            self.later(100, self._deliver_metadata)
            return
        history = self.world.controller.history
        rng = self.world.rngs["metadata"]
        low, last = max(self.md_pos + 1, self.md_floor), len(history) - 1
        if low > last:
            return
        if self.md_pos < 0 and not self.world.plan.restart_replay:
            target = last  # the first image after a start: the newest there is
        else:
            target = last if rng.random() < 0.5 else rng.randint(low, last)
        self.load_metadata(target)
        self.schedule_metadata()

    def load_metadata(self, target: int) -> None:
        """MetadataLoader._publish -> Node._queue_local_changes: the loader goes from the
        image it has to history[target] and hands the gate the delta and the image."""
        controller = self.world.controller
        delta = controller.delta(self.md_pos, target)
        self.md_pos = target
        self.loaded = image = controller.history[target]
        self.gate.delta_loaded(delta, image)
        self._run_gate()

    def _await_caught_up(self) -> None:
        """Node._apply_local_changes: looks every CAUGHT_UP_POLL_S whether the controller
        said the broker caught up, then tells the gate."""
        if not self.caught_up:
            self.later(CAUGHT_UP_POLL_MS, self._await_caught_up)
            return
        self.gate.broker_caught_up()
        self._run_gate()

    def _run_gate(self) -> None:
        """Node._apply_local_changes: carries out what the gate decides, at once."""
        while True:
            serving = self.gate.serving
            step = self.gate.poll()
            if step.start_serving:  # Node._start_serving
                self.lifecycle.set_ready_to_unfence()
            batch = step.batch
            if batch is None:
                return
            if not serving:
                self.trace(
                    f"caught up: applies {len(batch.detach)} queued deltas as metadata offset "
                    f"{batch.image.offset}"
                )
                self.stats.coalesced_deltas += len(batch.detach)
            self._apply_batch(batch)
            self.gate.batch_applied()

    def _apply_batch(self, batch: ApplyBatch) -> None:
        """ReplicaManager.detach of every delta of the batch (the partition is never deleted,
        nor moved away: nothing to stop), then ReplicaManager.attach of its delta for our
        partition: the registration the delta gives it, if the delta touched it (a full
        delta touches it whatever changed; Partition.apply_registration of an unchanged
        registration changes nothing, so it is skipped here)."""
        assert not any(delta.topics.deleted for delta in batch.detach)
        image = self.image = batch.image
        change = batch.delta.topics.changed.get(TOPIC_ID)
        registration = None if change is None else change.partitions.get(PARTITION)
        if registration is None or registration == self.applied:
            return
        assert self.id in registration.replicas  # never moved away
        self.applied = registration
        if self.partition is None:
            assert self.log is not None
            partition = Partition(
                TOPIC,
                PARTITION,
                TOPIC_ID,
                self.log,
                self.id,
                self.settings,
                self.world.plan.replica_lag_time_max_ms,
            )
            partition.on_change = self._on_change
            self.partition = partition
        partition = self.partition
        moved = partition.apply_registration(registration, self.wall, self.settings)
        self.trace(
            f"metadata offset {image.offset}: {describe_registration(registration)}"
            + (" -> LEADER" if partition.is_leader and moved else "")
            + (f" -> follows {partition.leader_id}" if moved and not partition.is_leader else "")
        )
        if moved:
            self._follow()

    def eligible(self, broker_id: int) -> bool:
        """ReplicaManager.eligible: registered, unfenced, not shutting down, in our image."""
        broker = self.image.cluster.brokers.get(broker_id)
        return broker is not None and not broker.fenced and not broker.in_controlled_shutdown

    # --- the partition's change signal -------------------------------------------------------

    def _on_change(self) -> None:
        """Partition.on_change: the checker reads the new log state now; waiting produces and
        parked fetches look again on the next turn of the (simulated) event loop."""
        self.world.checker.on_partition_change(self)
        if not self.signal_scheduled:
            self.signal_scheduled = True
            self.later(0, self._signalled)

    def _signalled(self) -> None:
        self.signal_scheduled = False
        self._purgatory_decided(self.purgatory.changed((TOPIC, PARTITION), self.now))

    # --- leader: the purgatory (ReplicaManager's pump of broker/purgatory.py) ---------------

    def _purgatory_decided(self, ops: list[DelayedOperation]) -> None:
        """What the purgatory decided: produces to answer, fetches to read again."""
        for op in ops:
            if isinstance(op, DelayedFetch):
                self._serve_fetch(op)
            else:
                self._answer_produce(op, *self.produces.pop(op))
        self._arm_purgatory()

    def _arm_purgatory(self) -> None:
        """ReplicaManager._arm: one wake-up, at the purgatory's next deadline."""
        at = self.purgatory.next_wake_ms()
        if at is not None and at != self.purgatory_wake:
            self.purgatory_wake = at
            self.later(at - self.now, self._purgatory_expire, at)

    def _purgatory_expire(self, at: int) -> None:
        if self.purgatory_wake != at:
            return  # a wake-up set again since
        self.purgatory_wake = None
        self._purgatory_decided(self.purgatory.expire(self.now))

    # --- follower: the replica fetcher (the product's FollowerFetch over the network) ---------

    def _clock_s(self) -> float:
        return self.world.now_ms / 1000

    @property
    def followed(self) -> int | None:
        """The leader whose stream fetches our partition."""
        for (leader, _), stream in self.fetch.streams.items():
            if stream.partitions:
                return leader
        return None

    def _follow(self) -> None:
        """FetcherManager.follow (every leader is reachable at its one address)."""
        partition = self.partition
        assert partition is not None
        stream = self.fetch.follow(partition, lambda leader: f"b{leader}").stream
        if stream is not None:
            self._pump(stream)

    def _pump(self, stream: FetchStream) -> None:
        """One turn of ReplicaFetcher._run: the core's next fetch, if one is due, goes out on
        the stream (connecting first: a dead leader refuses the connection); else a wake-up
        when the core says one may be due."""
        request = stream.next_fetch(self.now, self.broker_epoch)
        if request is None:
            at = stream.wake_at(self.now)
            if at is not None:
                self._wake(stream, at)
            return
        leader = self.world.brokers[stream.leader_id]
        incarnation = self.connected_to.get(stream.key)
        if incarnation is None:
            if not leader.alive:
                why = "connection refused"
                refused = FetchReply(
                    leader.id, self.incarnation, stream.key, request.correlation_id, why
                )
                self.later(CONNECT_FAIL_MS, self.handle_fetch_answer, refused)
                return
            incarnation = self.connected_to[stream.key] = leader.incarnation
        self.stats.fetches += 1
        call = FetchCall(self.id, self.incarnation, leader.id, incarnation, stream.key, request)
        self.world.network.send(self.id, leader.id, leader.handle_fetch, call)
        self.later(stream.read_timeout_ms, self._fetch_timeout, stream.key, request.correlation_id)

    def _wake(self, stream: FetchStream, at_ms: int) -> None:
        pending = self.wakes.get(stream.key)
        if pending is not None and pending <= at_ms:
            return  # an earlier wake-up is set already
        self.wakes[stream.key] = at_ms
        self.later(at_ms - self.now, self._woken, stream.key, at_ms)

    def _woken(self, key: StreamKey, at_ms: int) -> None:
        if self.wakes.get(key) != at_ms:
            return
        del self.wakes[key]
        stream = self.fetch.streams.get(key)
        if stream is not None:
            self._pump(stream)

    def _fetch_timeout(self, key: StreamKey, correlation_id: int) -> None:
        stream = self.fetch.streams.get(key)
        if stream is not None and stream.awaiting(correlation_id):
            self._break(stream, "read timed out")

    def break_stream(self, leader_id: int) -> None:
        """A fault: the streams to `leader_id` fail now (a reset connection)."""
        for (leader, _), stream in self.fetch.streams.items():
            if leader == leader_id:
                self._break(stream, "connection reset (fault)")

    def _break(self, stream: FetchStream, why: str) -> None:
        self.stats.broken_streams += 1
        self.trace(f"fetch stream to {stream.leader_id} broke: {why}; backoff")
        self.connected_to.pop(stream.key, None)
        self._wake(stream, stream.broken(self.now, why))

    def handle_fetch_answer(self, reply: FetchReply) -> None:
        """ReplicaFetcher: the read returned (or failed) on the stream."""
        if not self.reachable(reply.follower_incarnation):
            return
        stream = self.fetch.streams.get(reply.stream)
        if stream is None or not stream.awaiting(reply.correlation_id):
            self.stats.stale_answers += 1  # of a fetch given up with its stream
            return
        if reply.broken is not None:
            self._break(stream, reply.broken)
            return
        answered = stream.answered(reply.correlation_id, reply.response, self.now)
        for outcome in answered.outcomes:
            self._applied(stream, outcome)
        if answered.broken is not None:
            self._break(stream, answered.broken)
            return
        self._pump(stream)

    def _applied(self, stream: FetchStream, o: PartitionOutcome) -> None:
        """The stats and the trace of what the core did with one partition's answer."""
        answer = o.answer
        if o.applied is Applied.STALE:
            self.stats.stale_answers += 1  # the partition moved on while the fetch was out
        elif o.applied is Applied.FAILED:
            assert o.cause is not None
            raise o.cause  # no disk fails here: a bug of the code under test
        elif o.applied is Applied.RESTARTED:
            self.stats.restarts_at += 1
            self.trace(f"behind the leader's log start {answer.log_start_offset}: restarted")
        elif o.applied is Applied.TRUNCATED:
            self._truncated(o.fetch_offset, o.log_end_offset)
        elif o.applied is Applied.DIVERGED:
            assert answer.diverging is not None
            self._truncated(o.fetch_offset, o.log_end_offset)
            self.trace(
                f"diverged from {stream.leader_id} at epoch {answer.diverging[0]} (end "
                f"{answer.diverging[1]}): log end {o.fetch_offset} -> {o.log_end_offset}"
            )
        elif o.applied is Applied.RESTING and isinstance(o.cause, ApiError):
            self.trace(f"fetch answer from {stream.leader_id} not applied: {o.cause}; rest")
            if (
                o.cause.error_name == "INVALID_RECORD"
                and answer.records
                and parse_header(answer.records).base_offset < o.fetch_offset
            ):
                # The leader's first batch starts below our log end: its log start (a
                # DeleteRecords offset) is inside that batch, and we were not told to
                # truncate. An empty log restarts at the batch (Partition.append_as_follower,
                # as Kafka's follower); a non-empty one is refused again at every fetch.
                self.stats.mid_batch_refusals += 1

    def _truncated(self, before: int, after: int) -> None:
        if after < before:
            self.stats.truncations += 1
            self.stats.truncated_records += before - after

    # --- leader: follower fetches (ReplicaManager.replica_fetch) -----------------------------

    def handle_fetch(self, call: FetchCall) -> None:
        if not self.reachable(call.leader_incarnation):
            # the stream's server process is gone: the follower's read fails
            follower = self.world.brokers[call.follower]
            reset = _reset(call)
            self.world.network.send(self.id, follower.id, follower.handle_fetch_answer, reset)
            return
        request = call.request
        fetch = self.purgatory.follower_fetch(request.max_wait_ms, request.min_bytes, self.now)
        self.fetches[fetch] = call
        self._serve_fetch(fetch)
        self._arm_purgatory()

    def _serve_fetch(self, fetch: DelayedFetch) -> None:
        """One read of ReplicaManager.replica_fetch; answered if the purgatory says so."""
        call = self.fetches[fetch]
        partition = self.partition
        request = call.request
        (asked,) = request.partitions  # one partition in this model
        answer: PartitionAnswer
        if partition is None:
            answer = PartitionAnswer(TOPIC_ID, PARTITION, error="UNKNOWN_TOPIC_OR_PARTITION")
        else:
            log = partition.log
            try:
                read = partition.read_for_follower(
                    request.replica_id,
                    asked.fetch_offset,
                    asked.last_fetched_epoch,
                    asked.current_leader_epoch,
                    min(asked.partition_max_bytes, request.max_bytes),
                    self.wall,
                )
            except ApiError as exc:
                answer = PartitionAnswer(
                    TOPIC_ID,
                    PARTITION,
                    error=exc.error_name,
                    high_watermark=log.high_watermark,
                    log_start_offset=log.log_start_offset,
                    log_end_offset=log.log_end_offset,
                )
            else:
                self._maybe_change_isr()
                answer = PartitionAnswer(
                    TOPIC_ID,
                    PARTITION,
                    records=read.records,
                    high_watermark=read.high_watermark,
                    log_start_offset=read.log_start_offset,
                    log_end_offset=read.log_end_offset,
                    diverging=read.diverging,
                )
        # No replication quota in this model: nothing is held back.
        stopped = answer.error is not None or answer.diverging is not None
        keys = () if partition is None else ((TOPIC, PARTITION),)
        if not self.purgatory.fetch_read(
            fetch, FetchReadSummary(len(answer.records), stopped, keys), self.now
        ):
            return  # parked
        del self.fetches[fetch]
        follower = self.world.brokers[call.follower]
        reply = FetchReply(
            self.id,
            call.follower_incarnation,
            call.stream,
            request.correlation_id,
            response=FetchResponse((answer,)),
        )
        self.world.network.send(self.id, follower.id, follower.handle_fetch_answer, reply)

    # --- leader: the ISR ---------------------------------------------------------------------

    def _isr_expiration(self) -> None:
        if self.partition is not None and self.partition.is_leader:
            self._maybe_change_isr()
        self.later(max(self.world.plan.replica_lag_time_max_ms // 2, 50), self._isr_expiration)

    def _maybe_change_isr(self) -> None:
        partition = self.partition
        assert partition is not None
        change = partition.isr_change_needed(self.wall, self.eligible)
        if change is None:
            return
        self.stats.isr_proposals += 1
        leader = partition.leader
        assert leader is not None
        for r in change.added:
            idle = self.wall - leader.followers[r].last_fetch_ms
            if idle > self.world.plan.replica_lag_time_max_ms:
                # Kafka expands the ISR only on the follower's own fetch (maybeExpandIsr):
                # this one has not fetched for longer than replica.lag.time.max.ms.
                self.stats.idle_isr_adds += 1
                self.trace(f"adds b{r} to the ISR though it has not fetched for {idle} ms")
        self.trace(
            f"propose ISR {list(change.isr)} (le {partition.leader_epoch} pe "
            f"{partition.partition_epoch}; +{list(change.added)} -{list(change.removed)})"
        )
        self._submit_isr_change(partition, change)

    def _submit_isr_change(self, partition: Partition, change: IsrChange) -> None:
        """AlterPartitionSender.submit: into the product's queue; the drain task, if not
        running, starts on the next turn of the event loop (asyncio.create_task)."""
        self.isr.submit(partition, change)
        self._wake_isr_sender()

    def _wake_isr_sender(self) -> None:
        if not self.isr_sending and self.isr.has_queued:
            self.isr_sending = True
            self.later(0, self._isr_drain)

    def _isr_drain(self) -> None:
        """AlterPartitionSender._drain: while changes are queued, take them and send those
        still pending in one request (one in flight: the next round starts once every
        answer was applied)."""
        while self.isr.has_queued:
            live, settled = self.isr.take()
            for p in settled:
                self.stats.isr_unsent += 1
                self.trace(f"AlterPartition isr={list(p.change.isr)} not sent: no longer pending")
            if not live:
                continue
            (p,) = live  # one partition in this model
            partition = p.partition
            proposal = IsrProposal(
                TOPIC_ID, PARTITION, p.leader_epoch, p.partition_epoch, p.change.isr
            )
            self.trace(
                f"send AlterPartition isr={list(p.change.isr)} le={p.leader_epoch} "
                f"pe={p.partition_epoch}"
                + (
                    f" (the partition is at le {partition.leader_epoch} pe "
                    f"{partition.partition_epoch})"
                    if (p.leader_epoch, p.partition_epoch)
                    != (partition.leader_epoch, partition.partition_epoch)
                    else ""
                )
            )
            self._alter_attempt(AlterCall(partition, p.change, proposal, self.broker_epoch))
            return
        self.isr_sending = False

    def _alter_attempt(self, call: AlterCall) -> None:
        """LifecycleClient.call_controller: the product's tries of the same request (a
        whole-request error, STALE_BROKER_EPOCH, is a failed try as no answer is)."""

        def answered(answer: Any) -> None:
            self._alter_done(call, answer if isinstance(answer, IsrResult) else None)

        controller = self.world.controller
        args = (self.id, call.broker_epoch, call.proposal)
        self._call(controller.handle_alter_partition, args, answered, call.broker_epoch, True)

    def _alter_done(self, call: AlterCall, answer: IsrResult | None) -> None:
        """ReplicaManager._isr_answered: the product's rule applied to the partition, then
        the sender's drain goes on."""
        partition, change = call.partition, call.change
        if answer is not None and answer.error is None and answer.registration is not None:
            reg = answer.registration
            outcome = self.isr.answered(partition, change, None, reg.isr, reg.partition_epoch)
            self.trace(
                f"ISR is now {list(reg.isr)} (partition epoch {reg.partition_epoch})"
                + ("" if outcome is Outcome.COMMITTED else f"; {outcome.value}")
            )
        else:
            self.stats.isr_refusals += 1
            error = answer.error if answer is not None else None
            name = "NO_ANSWER" if error is None else error.error_name
            outcome = self.isr.answered(partition, change, name)
            self.trace(f"ISR change to {list(change.isr)} not accepted: {name}; {outcome.value}")
            if outcome is Outcome.RETRY:
                self.later(ISR_RETRY_BACKOFF_MS, self._resend_isr_change, partition, change)
            elif outcome is Outcome.DROPPED:
                self.world.checker.note_refusal(self, partition, call.proposal, change, name)
        self._isr_drain()

    def _resend_isr_change(self, partition: Partition, change: IsrChange) -> None:
        """ReplicaManager._resend_isr_change."""
        if self.isr.resend(partition, change, partition is self.partition):
            self.stats.isr_resends += 1
            self._wake_isr_sender()

    # --- leader: producers and consumers -----------------------------------------------------

    def _leader_partition(self) -> Partition:
        """ReplicaManager.leader_partition."""
        partition = self.partition
        if partition is not None and partition.is_leader:
            return partition
        registration = self.image.topics.partition(TOPIC, PARTITION)
        if registration is None:
            raise ApiError("UNKNOWN_TOPIC_OR_PARTITION", "no such partition here")
        if not registration.has_leader:
            raise ApiError("LEADER_NOT_AVAILABLE", "no leader right now")
        raise ApiError("NOT_LEADER_OR_FOLLOWER", f"the leader is {registration.leader}")

    def handle_produce(self, request: Any) -> None:
        if not self.reachable(request.incarnation):
            request.fail("connection reset")
            return
        try:
            partition = self._leader_partition()
            append = partition.append_as_leader(request.records, request.acks, self.wall)
        except ApiError as exc:
            if exc.error_name in PRODUCER_STATE_ERRORS and request.producer.idempotent:
                self.world.checker.producer_state_error(self, request, exc)
            request.answer(self, None, exc.error_name)
            return
        self.world.trace.record(
            f"b{self.id}: append {request.describe()} at {append.base_offset}..."
            f"{append.next_offset - 1} (le {append.leader_epoch}"
            + (", duplicate)" if append.duplicate else ")")
        )
        if request.acks != -1:
            request.answer(self, append, None)
            return
        op = self.purgatory.produce(
            [((TOPIC, PARTITION), partition, append)], request.timeout_ms, self.now
        )
        if op.done:
            self._answer_produce(op, request, append)
            return
        self.produces[op] = (request, append)
        self._arm_purgatory()

    def _answer_produce(self, op: DelayedProduce, request: Any, append: LeaderAppend) -> None:
        """ReplicaManager._await_replication's answer, as the purgatory decided it."""
        error = op.results[(TOPIC, PARTITION)]
        if error is not None:
            request.answer(self, None, error.error_name)
            return
        self.world.checker.acknowledged(self, request, append)
        request.answer(self, append, None)

    def delete_records(self, offset: int) -> int:
        """ClientServicer.DeleteRecords for the partition (an admin's request; its answer is
        not modelled): the leader moves its log start (Partition.delete_records_before, which
        persists the truncated leader epoch cache at once), then writes the offset checkpoints
        (persist_offsets -> Node._checkpoint_now, in a thread: a later turn of the event loop)
        and only then answers. Raises the ApiError the request would be answered with."""
        partition = self._leader_partition()
        start = partition.delete_records_before(offset)
        self.later(0, self._write_checkpoint)
        return start

    def handle_consume(self, request: Any) -> None:
        if not self.reachable(request.incarnation):
            request.fail("connection reset")
            return
        try:
            partition = self._leader_partition()
            records = partition.read_for_consumer(request.offset, request.max_bytes)
        except ApiError as exc:
            request.answer(self, None, exc.error_name)
            return
        self.world.checker.consumed(self, request, records, partition.log.high_watermark)
        request.answer(self, records, None)

    # --- for the checker and the summary ------------------------------------------------------

    def describe(self) -> str:
        if not self.alive or self.log is None:
            return f"b{self.id}: down"
        log = self.log
        p = self.partition
        role = "-"
        if p is not None:
            role = (
                f"LEADER le={p.leader_epoch} pe={p.partition_epoch} isr={list(p.isr)}"
                + (
                    f" pending={list(p.leader.pending.isr)}"
                    if p.leader and p.leader.pending
                    else ""
                )
                if p.is_leader
                else f"follower of {p.leader_id} le={p.leader_epoch}"
            )
        return (
            f"b{self.id} inc {self.incarnation} epoch {self.broker_epoch}: {role}; log "
            f"[{log.log_start_offset}, {log.log_end_offset}) hw {log.high_watermark} epochs "
            f"{log.leader_epochs.entries[-4:]}; metadata offset {self.image.offset}"
            + (f" (loaded {self.loaded.offset})" if self.loaded.offset != self.image.offset else "")
        )


def _reset(call: FetchCall) -> FetchReply:
    """The follower's read on a stream whose server process is gone."""
    return FetchReply(
        call.leader, call.follower_incarnation, call.stream, call.request.correlation_id, "reset"
    )
