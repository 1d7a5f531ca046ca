"""One seeded run: a safety phase under faults, then a liveness phase with every fault healed.

    safety    producers (plain acks=all / acks=1, idempotent acks=all) and consumers run
              over every partition against whoever they think leads it, while brokers crash
              (files intact: a process crash keeps the page cache) or stop cleanly after a
              controlled shutdown and come back later, get isolated from everyone or only
              from the controllers, lose links to each other, see the metadata late, and have
              fetch streams reset; an admin's DeleteRecords moves a partition's log start on
              its leader to any offset up to its high watermark; controller nodes crash (the
              active one more often than not) and come back, so the quorum fails over (a
              minority down at a time; a single-voter quorum is down until its node is back);
    liveness  every link heals, every broker and controller node comes back, the network
              stops losing or slowing messages, the old producers stop and a new idempotent
              one must get LIVENESS_BATCHES acks=all batches acknowledged; within
              LIVENESS_BOUND_MS a controller must be active, every broker up, registered and
              unfenced with the latest metadata, and for every partition the ISR must hold
              every replica, and every replica must hold the same log with its high watermark
              at its end.
Invariants (checker.py, and the quorum's, quorum.py: Raft's (a)-(k), the metadata's (m)-(s),
(t) and (u)) are checked after every event of both phases. A failure (an invariant, an
exception out of the code under test, a liveness timeout) names the seed and the command
that replays it, with the tail of the event trace; one with the signature of a known,
unfixed bug (known_bugs.py) says so in RunResult.known_bug.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace

from tests.replication_sim.broker import SimBroker
from tests.replication_sim.checker import InvariantViolation
from tests.replication_sim.clients import Producer, leader_from_metadata
from tests.replication_sim.controller import TopicPartition, tp_name
from tests.replication_sim.known_bugs import classify
from tests.replication_sim.network import CLIENTS
from tests.replication_sim.plan import Plan
from tests.replication_sim.world import World
from tests.sim.invariants import InvariantViolation as QuorumInvariantViolation

LIVENESS_BOUND_MS = 120_000
LIVENESS_BATCHES = 3
TRACE_TAIL = 80


def replay_command(seed: int) -> str:
    return f".venv/bin/python -m tests.replication_sim --seed {seed} --trace"


def temp_root() -> str | None:
    """/dev/shm when there is one: the logs are real files either way, RAM is just faster."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class LivenessFailure(AssertionError):
    pass


@dataclass(frozen=True, slots=True)
class RunResult:
    seed: int
    failure: str | None
    kind: str | None  # "invariant", "liveness", "exception"
    events: int
    sim_ms: int
    acked_records: int  # acks=all records acknowledged
    read_records: int
    leader_changes: int
    truncations: int
    truncated_records: int
    crashes: int
    fences: int
    isr_changes: int
    log_end: int  # the partitions' leaders' log ends, summed
    idle_isr_adds: int = 0
    restarts_at: int = 0  # followers that started over at the leader's log start
    mid_batch_refusals: int = 0
    reregistrations: int = 0
    multi_partition_fetches: int = 0
    incremental_fetches: int = 0
    hurries: int = 0
    batched_alter_requests: int = 0
    controller_crashes: int = 0
    failovers: int = 0  # controller activations after the first
    abandoned_writes: int = 0  # controller writes failed by a leadership change or crash
    known_bug: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


class Faults:
    """Draws every fault from the seed's `faults` stream, each kind recurring after an
    exponentially distributed gap with the plan's mean."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.rng = world.rngs["faults"]
        self.on = False
        world.on_stop = self._stopped

    def start(self) -> None:
        self.on = True
        plan = self.world.plan
        kinds: list[tuple[int | None, Callable[[], None]]] = [
            (plan.crash_every_ms, self._stop_one),
            (plan.isolate_every_ms, self._isolate),
            (plan.controller_cut_every_ms, self._controller_cut),
            (plan.link_cut_every_ms, self._link_cut),
            (plan.metadata_stall_every_ms, self._metadata_stall),
            (plan.stream_reset_every_ms, self._stream_reset),
            (plan.delete_records_every_ms, self._delete_records),
            (plan.controller_crash_every_ms, self._crash_controller),
        ]
        for every, action in kinds:
            if every is not None:
                self._schedule(every, action)

    def stop(self) -> None:
        self.on = False

    def _schedule(self, every: int, action: Callable[[], None]) -> None:
        gap = max(1, int(self.rng.expovariate(1 / every)))
        self.world.queue.after(gap, self._fire, every, action)

    def _fire(self, every: int, action: Callable[[], None]) -> None:
        if not self.on:
            return
        action()
        self._schedule(every, action)

    def _pick(self, leader_bias: bool = True) -> SimBroker | None:
        world = self.world
        alive = [b for b in world.brokers.values() if b.alive and not b.shutting_down]
        if not alive:
            return None
        tp = self.rng.choice(world.controller.partitions)
        reg = world.controller.registration(tp)
        if leader_bias and reg is not None and self.rng.random() < world.plan.crash_leader:
            leader = world.brokers.get(reg.leader)
            if leader is not None and leader in alive:
                return leader
        return self.rng.choice(alive)

    def _span(self, bounds: tuple[int, int]) -> int:
        return self.rng.randint(*bounds)

    # --- the faults ---------------------------------------------------------------------------

    def _stop_one(self) -> None:
        broker = self._pick()
        if broker is None:
            return
        if self.rng.random() < self.world.plan.clean_stop:
            broker.begin_controlled_shutdown()
            return
        broker.crash()
        self._stopped(broker)

    def _stopped(self, broker: SimBroker) -> None:
        down = self._span(self.world.plan.down_for_ms) if self.on else 0
        broker.down_until = self.world.now_ms + down
        self.world.queue.after(down, self._restart, broker)

    def _restart(self, broker: SimBroker) -> None:
        if not broker.alive:
            broker.start()

    def _isolate(self) -> None:
        broker = self._pick()
        if broker is None:
            return
        controllers = self.world.controller.quorum.node_ids
        others = [b for b in self.world.brokers if b != broker.id] + [*controllers, CLIENTS]
        span = self._span(self.world.plan.isolate_for_ms)
        self.world.trace.record(f"FAULT: isolate b{broker.id} for {span} ms")
        for other in others:
            self.world.network.cut(broker.id, other)
        self.world.queue.after(span, self._heal, [(broker.id, o) for o in others])

    def _controller_cut(self) -> None:
        broker = self._pick()
        if broker is None:
            return
        span = self._span(self.world.plan.isolate_for_ms)
        self.world.trace.record(f"FAULT: cut b{broker.id} from the controllers for {span} ms")
        pairs = [(broker.id, c) for c in self.world.controller.quorum.node_ids]
        for a, b in pairs:
            self.world.network.cut(a, b)
        self.world.queue.after(span, self._heal, pairs)

    def _link_cut(self) -> None:
        a, b = self.rng.sample(sorted(self.world.brokers), 2)
        span = self._span(self.world.plan.isolate_for_ms)
        self.world.trace.record(f"FAULT: cut b{a}-b{b} for {span} ms")
        self.world.network.cut(a, b)
        self.world.queue.after(span, self._heal, [(a, b)])

    def _heal(self, pairs: list[tuple[int, int]]) -> None:
        if not self.on:
            return  # heal_all took care of it
        self.world.trace.record(f"heal {pairs}")
        for a, b in pairs:
            self.world.network.heal(a, b)

    def _metadata_stall(self) -> None:
        broker = self._pick(leader_bias=False)
        if broker is None:
            return
        span = self._span(self.world.plan.isolate_for_ms)
        self.world.trace.record(f"FAULT: b{broker.id} replays no metadata for {span} ms")
        broker.metadata.stall(self.world.now_ms + span)

    def _stream_reset(self) -> None:
        broker = self._pick(leader_bias=False)
        if broker is None or not broker.follower.followed:
            return
        leader = self.rng.choice(broker.follower.followed)
        self.world.trace.record(f"FAULT: reset b{broker.id}'s fetch stream to b{leader}")
        broker.follower.break_stream(leader)

    def _delete_records(self) -> None:
        """An admin's DeleteRecords on a partition, sent to the broker its metadata names as
        leader."""
        world = self.world
        tp = self.rng.choice(world.controller.partitions)
        leader = leader_from_metadata(world, self.rng, tp)
        broker = world.brokers[leader] if leader is not None else None
        partition = None if broker is None else broker.partition_of(tp)
        if broker is None or partition is None or not partition.is_leader:
            return
        log = partition.log
        target = self.rng.randint(log.log_start_offset, log.high_watermark)
        start = broker.delete_records(tp, target)
        checks = world.checker.of(tp)
        checks.deleted_before = max(checks.deleted_before, start)
        world.trace.record(
            f"b{broker.id}: DeleteRecords {tp_name(tp)} before {target}: log start {start}"
        )

    def _crash_controller(self) -> None:
        """A controller node crashes (the active one with the plan's probability) and comes
        back within controller_down_for_ms; never more than a minority of the voters down at
        once, but a single voter's one node (the quorum is then down until it is back)."""
        world, plan = self.world, self.world.plan
        quorum = world.controller.quorum
        ids = quorum.raft_ids
        up = [i for i in ids if quorum.up(i)]
        if len(ids) - len(up) >= max(len(ids) // 2, 1) or not up:
            return
        found = quorum.active()
        if found is not None and self.rng.random() < plan.controller_crash_active:
            victim = found[0]
        else:
            victim = self.rng.choice(up)
        down = self._span(plan.controller_down_for_ms)
        world.trace.record(f"FAULT: crash controller node {victim} for {down} ms")
        quorum.crash(victim)
        world.queue.after(down, self._restart_controller, victim)

    def _restart_controller(self, raft_id: int) -> None:
        quorum = self.world.controller.quorum
        if not quorum.up(raft_id):
            quorum.restart(raft_id)

    def heal_all(self) -> None:
        self.stop()
        world = self.world
        world.network.heal_all()
        quorum = world.controller.quorum
        for raft_id in quorum.raft_ids:
            if not quorum.up(raft_id):
                world.queue.after(0, self._restart_controller, raft_id)
        for broker in world.brokers.values():
            broker.metadata.stalled_until = 0
            if not broker.alive and not broker.shutting_down:
                world.queue.after(0, self._restart, broker)


class Simulation:
    def __init__(self, seed: int, echo: bool = False, isr_view: bool = True) -> None:
        self.seed = seed
        self.plan = Plan.from_seed(seed)
        self.echo = echo
        self.isr_view = isr_view
        self.world: World | None = None
        self.liveness_producer: Producer | None = None

    def run(self) -> RunResult:
        directory = tempfile.mkdtemp(prefix=f"replication-sim-{self.seed}-", dir=temp_root())
        failure = kind = None
        try:
            self._run(directory)
        except (InvariantViolation, QuorumInvariantViolation) as error:
            failure, kind = self._describe(f"invariant violated: {error}", None), "invariant"
        except LivenessFailure as error:
            failure, kind = self._describe(f"liveness: {error}", None), "liveness"
        except Exception as error:  # noqa: BLE001 - any exception out of the code under test
            failure, kind = self._describe(f"{type(error).__name__}: {error}", error), "exception"
        finally:
            self._close()
            shutil.rmtree(directory, ignore_errors=True)
        return self._result(failure, kind)

    def _run(self, directory: str) -> None:
        plan = self.plan
        self.world = world = World(plan, directory, echo=self.echo)
        world.checker.isr_view = self.isr_view
        world.trace.record(f"SAFETY PHASE seed {self.seed}: {plan.describe()}")
        faults = Faults(world)
        world.start()
        world.trace.record(f"partitions: {world.controller.describe()}")
        for producer in world.producers:
            producer.start()
        for consumer in world.consumers:
            consumer.start()
        faults.start()
        world.run_until(plan.safety_ms)

        world.trace.record("LIVENESS PHASE: every fault healed")
        faults.heal_all()
        world.network.calm = True
        for producer in world.producers:
            producer.stop()
        self.liveness_producer = producer = Producer(
            world, len(world.producers), True, world.rngs["producers"]
        )
        producer.producer_id = 999
        producer.delivery_timeout_ms = LIVENESS_BOUND_MS
        producer.limit = LIVENESS_BATCHES
        producer.start()
        world.after_event()
        bound = world.now_ms + LIVENESS_BOUND_MS
        if not world.run_until(bound, stop=lambda: not self.lagging()):
            raise LivenessFailure(
                f"{LIVENESS_BOUND_MS} ms after every fault healed, still: "
                + "; ".join(self.lagging())
            )
        self._final_checks()

    def lagging(self) -> list[str]:
        """What keeps the run from having converged; empty when it has."""
        world = self.world
        assert world is not None
        out: list[str] = []
        controller = world.controller
        if controller.quorum.active() is None:
            return ["no active controller"]
        image = controller.image
        for broker in world.brokers.values():
            registered = image.cluster.brokers.get(broker.id)
            if not broker.alive:
                out.append(f"b{broker.id} down")
            elif registered is None or registered.fenced:
                out.append(f"b{broker.id} fenced")
            elif broker.image.offset != image.offset:
                out.append(
                    f"b{broker.id} at metadata offset {broker.image.offset} < {image.offset}"
                )
        if out:
            return out
        producer = self.liveness_producer
        if producer is not None and producer.acked < LIVENESS_BATCHES:
            out.append(f"liveness producer: {producer.acked}/{LIVENESS_BATCHES} batches acked")
        for tp in world.controller.partitions:
            out += [f"{tp_name(tp)}: {why}" for why in self._lagging(tp)]
        return out

    def _lagging(self, tp: TopicPartition) -> list[str]:
        world = self.world
        assert world is not None
        reg = world.controller.registration(tp)
        assert reg is not None
        if reg.leader < 0:
            return ["no leader"]
        out: list[str] = []
        if set(reg.isr) != set(reg.replicas):
            out.append(f"ISR {list(reg.isr)} lacks some of {list(reg.replicas)}")
        leader = world.brokers[reg.leader]
        lp = leader.partition_of(tp)
        if lp is None or not lp.is_leader or lp.leader_epoch != reg.leader_epoch:
            out.append(f"b{leader.id} does not lead epoch {reg.leader_epoch} yet")
            return out
        if lp.leader is not None and lp.leader.pending is not None:
            out.append(f"b{leader.id} has an ISR change pending")
        ref = world.checker.of(tp).mirrors[leader.id]
        for broker_id in reg.replicas:
            broker = world.brokers[broker_id]
            p = broker.partition_of(tp)
            if p is None or p.leader_epoch != reg.leader_epoch:
                out.append(f"b{broker.id} not in leader epoch {reg.leader_epoch}")
                continue
            log = p.log
            if log.log_end_offset != ref.end or log.high_watermark != log.log_end_offset:
                out.append(
                    f"b{broker.id} log end {log.log_end_offset} hw {log.high_watermark} (leader's"
                    f" end {ref.end})"
                )
        return out

    def _final_checks(self) -> None:
        """(5) and (6): identical logs, read afresh from the files, for every partition; and
        a full pass of the quorum's Raft and metadata invariants over every controller node."""
        world = self.world
        assert world is not None
        quorum = world.controller.quorum
        quorum.checker.check_all(quorum.cluster)
        for tp in world.controller.partitions:
            try:
                self._final_checks_of(tp)
            except InvariantViolation as error:
                raise InvariantViolation(f"{tp_name(tp)}: {error}") from None

    def _final_checks_of(self, tp: TopicPartition) -> None:
        world = self.world
        assert world is not None
        reg = world.controller.registration(tp)
        assert reg is not None
        checker = world.checker.of(tp)
        ref = checker.mirrors[reg.leader]
        for broker_id in reg.replicas:
            broker = world.brokers[broker_id]
            mirror = checker.mirrors[broker.id]
            mirror.verify()
            # Log starts may differ: a DeleteRecords reaches followers with their next fetch,
            # and one the leader took before a failover may never reach the new leader.
            start = max(mirror.start, ref.start)
            if (
                mirror.end != ref.end
                or mirror.entries[start - mirror.start :] != ref.entries[start - ref.start :]
            ):
                first = next(
                    (
                        offset
                        for offset in range(start, min(mirror.end, ref.end))
                        if mirror.entries[offset - mirror.start] != ref.entries[offset - ref.start]
                    ),
                    min(mirror.end, ref.end),
                )
                cause = ""
                if first < checker.deleted_before:
                    cause = (
                        f" [deleted-records-resurrected: below {checker.deleted_before}, where a "
                        "DeleteRecords had moved the log start]"
                    )
                mine = mirror.entries[first - mirror.start] if first < mirror.end else None
                theirs = ref.entries[first - ref.start] if first < ref.end else None
                raise InvariantViolation(
                    f"after convergence b{broker.id}'s log [{mirror.start}, {mirror.end}) "
                    f"differs from the leader b{reg.leader}'s [{ref.start}, {ref.end}){cause}: "
                    f"at offset {first} (value, batch leader epoch) {mine} vs {theirs}"
                )
        seen: dict[bytes, int] = {}
        for i, (value, _) in enumerate(ref.entries):
            offset = ref.start + i
            if value in seen:
                raise InvariantViolation(
                    f"DUPLICATE: {value!r} at offsets {seen[value]} and {offset} of the final log"
                )
            seen[value] = offset
        if ref.start > checker.deleted_before:
            raise InvariantViolation(
                f"the final log starts at {ref.start}, past every DeleteRecords "
                f"({checker.deleted_before})"
            )
        for offset, observed in checker.must_stay.items():
            if offset >= ref.start and ref.value(offset) != observed.value:
                raise InvariantViolation(
                    f"LOST: offset {offset} held {observed.value!r} ({observed.what}); the final "
                    f"log has {ref.value(offset)!r}"
                )

    def _close(self) -> None:
        world = self.world
        if world is None:
            return
        for broker in world.brokers.values():
            broker.replicas.close()

    # --- reporting ---------------------------------------------------------------------------

    def _describe(self, what: str, error: BaseException | None) -> str:
        lines = [
            f"Replication simulation failed, seed {self.seed}: {what}",
            f"  replay: {replay_command(self.seed)}",
            f"  plan: {self.plan.describe()}",
        ]
        if error is not None:
            frames = traceback.extract_tb(error.__traceback__)
            lines.append("  raised at:")
            lines += [f"    {f.filename}:{f.lineno} in {f.name}" for f in frames[-6:]]
        world = self.world
        if world is not None:
            lines.append(
                f"  at {world.now_ms} ms after {world.events} events; controller: "
                f"{world.controller.describe()}"
            )
            lines += [f"    {broker.describe()}" for broker in world.brokers.values()]
            lines.append(f"  last {TRACE_TAIL} trace lines:")
            lines += ["  " + line for line in world.trace.lines(TRACE_TAIL)]
        return "\n".join(lines)

    def _result(self, failure: str | None, kind: str | None) -> RunResult:
        world = self.world
        if world is None:
            return RunResult(self.seed, failure, kind, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        stats = [b.stats for b in world.brokers.values()]
        quorum = world.controller.quorum
        log_end = 0
        for tp in world.controller.partitions:
            reg = world.controller.registration(tp)
            mirror = None if reg is None else world.checker.of(tp).mirrors.get(reg.leader)
            log_end += 0 if mirror is None else mirror.end
        result = RunResult(
            seed=self.seed,
            failure=failure,
            kind=kind,
            events=world.events,
            sim_ms=world.now_ms,
            acked_records=world.checker.acked_records,
            read_records=world.checker.read_records,
            leader_changes=world.controller.stats.leader_changes,
            truncations=sum(s.truncations for s in stats),
            truncated_records=sum(s.truncated_records for s in stats),
            crashes=sum(s.crashes + s.clean_stops for s in stats),
            fences=world.controller.stats.fences,
            isr_changes=world.controller.stats.isr_changes,
            log_end=log_end,
            idle_isr_adds=sum(s.idle_isr_adds for s in stats),
            restarts_at=sum(s.restarts_at for s in stats),
            mid_batch_refusals=sum(s.mid_batch_refusals for s in stats),
            reregistrations=sum(s.reregistrations for s in stats),
            multi_partition_fetches=sum(s.multi_partition_fetches for s in stats),
            incremental_fetches=sum(s.incremental_fetches for s in stats),
            hurries=sum(s.hurries for s in stats),
            batched_alter_requests=sum(s.batched_alter_requests for s in stats),
            controller_crashes=quorum.stats.crashes,
            failovers=max(quorum.stats.activations - 1, 0),
            abandoned_writes=quorum.stats.abandoned,
        )
        if failure is not None:
            bug = classify(result, failure)
            if bug is not None:
                return replace(result, known_bug=bug.name)
        return result


def run_seed(seed: int, echo: bool = False, isr_view: bool = True) -> RunResult:
    """`isr_view=False` leaves out invariant (9), to see what its violations lead to."""
    return Simulation(seed, echo=echo, isr_view=isr_view).run()


def summarize(results: list[RunResult]) -> str:
    def total(attr: str) -> int:
        return sum(getattr(r, attr) for r in results)

    return (
        f"{total('events')} events checked, {total('acked_records')} acks=all records "
        f"acknowledged, {total('read_records')} records read by consumers, "
        f"{total('leader_changes')} leader changes, {total('truncations')} truncations "
        f"({total('truncated_records')} records cut), {total('restarts_at')} restarts at the "
        f"leader's log start, {total('crashes')} broker stops, "
        f"{total('fences')} fences, {total('isr_changes')} ISR changes by AlterPartition "
        f"({total('idle_isr_adds')} proposed adding a follower that was not fetching; "
        f"{total('batched_alter_requests')} requests of several partitions), "
        f"{total('multi_partition_fetches')} follower fetches of several partitions "
        f"({total('incremental_fetches')} incremental, in a fetch session; "
        f"{total('hurries')} hurries); "
        f"{total('controller_crashes')} controller crashes, {total('failovers')} failovers, "
        f"{total('abandoned_writes')} controller writes abandoned"
    )
