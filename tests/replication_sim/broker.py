"""One simulated broker process holding replicas of several partitions, and the pumps of the
product's cores that make it a broker (docs/architecture.md §8). Nothing here decides what
the broker does: each module pumps one core of broker/ as the node does on its event loop,
on the simulated clock and network.

    broker.py           the process: start, crash, clean stop; the lifecycle pump
    metadata_pump.py    the metadata loader and the MetadataGate
    replicas.py         the replicas on disk: LogManager, checkpoints, a Partition per replica
    follower.py         the replica fetcher: FollowerFetch, one stream per leader broker
    leader.py           the leader side: follower fetches, produces, reads, the Purgatory
    isr.py              ISR changes: IsrProposals, AlterPartition requests of many partitions
    controller_link.py  the calls to the controller quorum: ControllerRouting picks the node

This module:
- lifecycle: the product's BrokerLifecycle (broker/lifecycle_state.py: when to register and
  heartbeat, want_fence until the broker applies metadata, what an answer does, whether a
  STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED to any call drops the registration, when a
  controlled shutdown is over), pumped as LifecycleClient._pump pumps it; registering again
  after a restart is a new incarnation, refused while the old session lives;
- the process: a crash loses everything in memory (replicas.py says what the disk keeps); a
  clean stop snapshots the producers, flushes and checkpoints; a restart opens every log and
  builds each Partition when the metadata first names it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.controller_routing import NO_CONTROLLER_S
from broker.lifecycle_state import BrokerLifecycle, BrokerState, RegisterBroker
from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from metadata.broker_lifecycle import HeartbeatRequest, HeartbeatResponse
from metadata.image import MetadataImage
from tests.replication_sim.controller import TopicPartition, incarnation_id, tp_name
from tests.replication_sim.controller_link import ControllerLink
from tests.replication_sim.follower import (
    FetchCall,
    FetchReply,
    FollowerPump,
    HurryCall,
    reset,
)
from tests.replication_sim.isr import IsrPump
from tests.replication_sim.leader import LeaderSide
from tests.replication_sim.metadata_pump import MetadataPump
from tests.replication_sim.replicas import Replicas

if TYPE_CHECKING:
    from storage.log import Log
    from tests.replication_sim.world import World

CONTROLLED_SHUTDOWN_TIMEOUT_MS = 30_000  # server/node.py CONTROLLED_SHUTDOWN_TIMEOUT_S


@dataclass
class BrokerStats:
    crashes: int = 0
    clean_stops: int = 0
    truncations: int = 0
    truncated_records: int = 0
    restarts_at: int = 0
    fetches: int = 0
    # fetches of a stream whose fetch session holds more than one partition
    multi_partition_fetches: int = 0
    incremental_fetches: int = 0  # fetches naming only what changed in their session
    hurries: int = 0  # hurries sent: a partition followed while the fetch out left it out
    broken_streams: int = 0
    isr_proposals: int = 0
    batched_alter_requests: int = 0  # AlterPartition requests of more than one partition
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
        plan = world.plan
        self.replica_config = ReplicaConfig(
            fetch_wait_max_ms=plan.fetch_wait_max_ms,
            fetch_backoff_ms=plan.fetch_backoff_ms,
            fetch_max_bytes=plan.fetch_max_bytes,
        )
        self.alive = False
        self.incarnation = -1
        self.replicas = Replicas(self, directory)
        self.replicas.on_change = self._on_change
        self.stats = BrokerStats()
        self.down_until: int | None = None  # when a stopped broker comes back
        self.metadata_floor = 0  # how far the local metadata log goes (it survives a restart)
        self._reset_memory()

    def _reset_memory(self) -> None:
        """Everything a process holds in memory only."""
        self.metadata = MetadataPump(self, self.metadata_floor)
        # The product's lifecycle decisions, and the pump's run (a controlled shutdown
        # starts a new one, as LifecycleClient cancels its task: the old one's timers and
        # answers are dropped)
        self.lifecycle = BrokerLifecycle(self.id, self.world.plan.heartbeat_interval_ms / 1000)
        self.pump_run = 0
        self.previous_broker_epoch = -1
        self.link = ControllerLink(self)
        self.follower = FollowerPump(self)
        self.leader = LeaderSide(self)
        self.isr = IsrPump(self)

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

    @property
    def image(self) -> MetadataImage:
        """The ReplicaManager's image: the last one applied."""
        return self.metadata.image

    def partition_of(self, tp: TopicPartition) -> Partition | None:
        return self.replicas.partitions.get(tp)

    def log_of(self, tp: TopicPartition) -> Log | None:
        return self.replicas.logs.get(tp)

    # --- what arrives over the network (to whichever incarnation is up) ----------------------

    def handle_fetch(self, call: FetchCall) -> None:
        if not self.reachable(call.leader_incarnation):
            # the stream's server process is gone: the follower's read fails
            follower = self.world.brokers[call.follower]
            self.world.network.send(self.id, follower.id, follower.handle_fetch_answer, reset(call))
            return
        self.leader.handle_fetch(call)

    def handle_hurry(self, hurry: HurryCall) -> None:
        if self.reachable(hurry.leader_incarnation):
            self.leader.handle_hurry(hurry)

    def handle_fetch_answer(self, reply: FetchReply) -> None:
        if self.reachable(reply.follower_incarnation):
            self.follower.answered(reply)

    def handle_produce(self, request: Any) -> None:
        if not self.reachable(request.incarnation):
            request.fail("connection reset")
            return
        self.leader.handle_produce(request)

    def handle_consume(self, request: Any) -> None:
        if not self.reachable(request.incarnation):
            request.fail("connection reset")
            return
        self.leader.handle_consume(request)

    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        return self.leader.delete_records(tp, offset)

    # --- the process ---------------------------------------------------------------------------

    def start(self, broker_epoch: int = -1) -> None:
        assert not self.alive
        self.incarnation += 1
        self.alive = True
        self.down_until = None
        self._reset_memory()
        # What LogManager.previous_broker_epoch gives the broker to register with.
        self.previous_broker_epoch = self.replicas.open()
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
            self.metadata.gate.broker_caught_up()
            self.metadata.run_gate()
        opened = []
        for tp, log in sorted(self.replicas.logs.items()):
            cut = log.load_info.truncated_bytes
            opened.append(
                f"{tp_name(tp)} [{log.log_start_offset}, {log.log_end_offset}) hw "
                f"{log.high_watermark}" + (f" (recovery cut {cut} B)" if cut else "")
            )
            self.world.checker.on_log_opened(self, tp, log)
        self.trace(f"start incarnation {self.incarnation}: " + ("; ".join(opened) or "no logs"))
        plan = self.world.plan
        self.later(0, self._lifecycle, self.pump_run)
        self.later(max(plan.replica_lag_time_max_ms // 2, 50), self.isr.expiration)
        self.later(plan.hw_checkpoint_ms, self._checkpoint_loop)
        if not self.metadata.gate.caught_up:
            self.metadata.await_caught_up()
        self.metadata.schedule()

    def crash(self) -> None:
        assert self.alive
        self.stats.crashes += 1
        self.trace(f"CRASH ({self._ends()})")
        self._die()
        self.replicas.crash()

    def clean_stop(self) -> None:
        assert self.alive
        self.stats.clean_stops += 1
        # As Node._shutdown_logs: its registration's epoch, else the one it started with.
        epoch = self.broker_epoch if self.broker_epoch >= 0 else self.previous_broker_epoch
        self.trace(f"clean stop ({self._ends()})")
        self._die()
        self.replicas.clean_stop(epoch)

    def _ends(self) -> str:
        return ", ".join(
            f"{tp_name(tp)} end {log.log_end_offset} hw {log.high_watermark}"
            for tp, log in sorted(self.replicas.logs.items())
        )

    def _die(self) -> None:
        self.alive = False
        self.metadata_floor = max(self.metadata_floor, self.metadata.pos)
        self.leader.drop_all()
        self._reset_memory()
        self.world.checker.on_logs_closed(self)

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

    def _checkpoint_loop(self) -> None:
        self.replicas.checkpoint()
        self.later(self.world.plan.hw_checkpoint_ms, self._checkpoint_loop)

    # --- the lifecycle (LifecycleClient._pump) --------------------------------------------------

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
            self.link.call("handle_register", (self.id, me, self.previous_broker_epoch), registered)
            return

        def beat(answer: Any) -> None:
            if run != self.pump_run:
                return
            if isinstance(answer, HeartbeatResponse):
                if answer.is_caught_up and not core.caught_up:
                    self.trace(f"caught up (metadata offset {self.metadata.loaded.offset})")
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
            self.metadata.loaded.offset,
            want_fence=request.want_fence,
            want_shutdown=request.want_shut_down,
        )
        self.link.call("handle_heartbeat", (heartbeat,), beat, heartbeat.broker_epoch)

    # --- for the leader side ------------------------------------------------------------------

    def eligible(self, broker_id: int) -> bool:
        """ReplicaManager.eligible: registered, unfenced, not shutting down, in our image."""
        broker = self.image.cluster.brokers.get(broker_id)
        return broker is not None and not broker.fenced and not broker.in_controlled_shutdown

    def _on_change(self, tp: TopicPartition) -> None:
        """Partition.on_change: the checker reads the new log state now; the purgatory
        hears of it on the next turn of the loop (leader.py)."""
        self.world.checker.on_partition_change(self, tp)
        self.leader.partition_changed(tp)

    # --- for the checker and the summary ------------------------------------------------------

    def describe(self) -> str:
        if not self.alive:
            return f"b{self.id}: down"
        lines = [
            f"b{self.id} inc {self.incarnation} epoch {self.broker_epoch}: metadata offset "
            f"{self.image.offset}"
            + (
                f" (loaded {loaded})"
                if (loaded := self.metadata.loaded.offset) != self.image.offset
                else ""
            )
        ]
        for tp, log in sorted(self.replicas.logs.items()):
            p = self.replicas.partitions.get(tp)
            role = "-"
            if p is not None and p.is_leader:
                pending = p.leader.pending if p.leader else None
                role = f"LEADER le={p.leader_epoch} pe={p.partition_epoch} isr={list(p.isr)}" + (
                    f" pending={list(pending.isr)}" if pending else ""
                )
            elif p is not None:
                role = f"follower of {p.leader_id} le={p.leader_epoch}"
            lines.append(
                f"      {tp_name(tp)}: {role}; log [{log.log_start_offset}, "
                f"{log.log_end_offset}) hw {log.high_watermark} epochs "
                f"{log.leader_epochs.entries[-4:]}"
            )
        return "\n".join(lines)
