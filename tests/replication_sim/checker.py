"""The invariants, checked after every event (and where noted at the moment a broker decides),
for every partition on its own (a PartitionChecker each; a failure names the partition).
After an event only the partitions it may have changed are checked: those a replica signalled
a change of (Partition.on_change: every append, truncation, high watermark, role and ISR
change), whose logs opened or closed, that a client's acknowledgement or read or an ISR
answer touched, and all of them after a metadata commit; every SWEEP_EVENTS events all of
them are checked anyway, so a change that slipped past those signals is still seen.

Each open Log has a Mirror: the values at each offset, read back from the real log files with
Log.read and decoded (never from what the simulator thinks it wrote). The mirror is brought up
to date whenever the Partition signals a change (every append, truncation, restart_at) and
after every event, and is compared with a full re-read of the log at the end of the run.

The reference log of a partition is that of the leader the controller's registration names,
when that broker is up: it may not know yet that it leads, but it was in the ISR, so it holds
every committed record. Checked:
 (1) an acknowledged acks=all record (offset, value) is in the reference log at that offset,
     when acknowledged and ever after (each new reference, each truncation of it), unless
     a DeleteRecords removed it (the log start never passes the highest one asked for);
 (2) a consumer only gets records below the serving broker's high watermark, and every
     (offset, value) it got stays in the reference log the same way;
 (3) every replica's log below its own high watermark is the reference log's prefix (a
     difference below the highest DeleteRecords offset is tagged deleted-records-resurrected:
     those offsets were deleted, and a crash brought them back);
 (4) a leader's high watermark never goes back within one leader epoch (of one Partition
     object: a restart starts again from the checkpointed one);
 (5) after the run (simulation.py): every fault healed, all replicas converge to identical
     logs (from the highest log start on), high watermark = log end, and the ISR holds every
     replica;
 (6) no value is ever in a log twice (plain producers never resend a value; idempotent ones
     resend only with the same sequence, which the leader must recognise);
 (7) no two brokers lead in the same leader epoch;
 (8) an idempotent producer whose every earlier batch was acknowledged, the last of them
     still in the log (not deleted), never hears OUT_OF_ORDER_SEQUENCE_NUMBER,
     UNKNOWN_PRODUCER_ID or INVALID_PRODUCER_EPOCH from the current leader: its producer
     state must hold what its (committed) log holds;
 (9) the ISR the current leader computes its high watermark over (its maximal ISR: the
     committed one plus a proposal in flight) holds every member of the controller's ISR
     for its leader epoch. The controller elects from its own ISR, so a member the leader
     leaves out may lack records the leader acknowledges, and lose them when it leads (the
     guarantee Kafka's pending ISR states, KIP-497, are there for). Checked once the leader
     applied its leadership; a violation names its likely cause;
(10) every member of the controller's ISR that is up holds every record acknowledged or read
     by a consumer (but those DeleteRecords removed): the controller may elect any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.partition import LeaderAppend
from storage.log import Log
from strom_api.records import decode_batches
from tests.replication_sim.controller import TopicPartition, tp_name

if TYPE_CHECKING:
    from tests.replication_sim.broker import SimBroker
    from tests.replication_sim.world import World

READ_CHUNK = 1 << 20
SWEEP_EVENTS = 64


class InvariantViolation(AssertionError):
    pass


def read_values(log: Log, start: int, end: int) -> list[tuple[bytes, int]]:
    """(value, batch leader epoch) for every offset in [start, end), read from the files."""
    out: list[tuple[bytes, int]] = []
    pos = start
    while pos < end:
        data = log.read(pos, READ_CHUNK)
        if not data:
            raise InvariantViolation(f"{log.directory}: nothing to read at {pos} below {end}")
        for header, records in decode_batches(data):
            for record in records:
                if record.offset < pos:
                    continue
                if record.offset != pos:
                    raise InvariantViolation(
                        f"{log.directory}: offset {record.offset} follows {pos - 1}: a gap"
                    )
                out.append((record.value or b"", header.partition_leader_epoch))
                pos += 1
            if header.next_offset > pos:
                raise InvariantViolation(f"{log.directory}: batch {header} has missing records")
    return out


class Mirror:
    """What one open Log holds, offset by offset, kept current by reading what is new."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.start = log.log_start_offset
        self.entries: list[tuple[bytes, int]] = []
        self.generation = 0  # bumped whenever anything already read is gone
        self.sync()

    @property
    def end(self) -> int:
        return self.start + len(self.entries)

    def value(self, offset: int) -> bytes | None:
        if self.start <= offset < self.end:
            return self.entries[offset - self.start][0]
        return None

    def sync(self) -> None:
        log = self.log
        if log.log_start_offset != self.start:
            self.start = log.log_start_offset
            self.entries = []
            self.generation += 1
        leo = log.log_end_offset
        if leo < self.end:
            del self.entries[leo - self.start :]
            self.generation += 1
        if leo > self.end:
            self.entries += read_values(log, self.end, leo)

    def verify(self) -> None:
        """The mirror against a full re-read of the files."""
        fresh = read_values(self.log, self.log.log_start_offset, self.log.log_end_offset)
        if fresh != self.entries or self.start != self.log.log_start_offset:
            raise InvariantViolation(f"{self.log.directory}: the log changed under its mirror")


@dataclass(frozen=True, slots=True)
class Observation:
    value: bytes
    what: str  # "acked by b2 in le 3 at 1234 ms" / "read from b1 at ..."


class PartitionChecker:
    """The invariants of one partition: its replicas' mirrors (by broker id) and what must
    stay in its log."""

    def __init__(self, checker: Checker, tp: TopicPartition) -> None:
        self.checker = checker
        self.world = checker.world
        self.tp = tp
        self.mirrors: dict[int, Mirror] = {}
        self.must_stay: dict[int, Observation] = {}
        self._must_stay_order: list[int] = []  # must_stay's offsets, in the order added
        # (1)/(2): the reference the whole must_stay set was last checked against
        self._checked_against: tuple[int, int, int, int] | None = None
        # (3): per broker, (its key, reference key, offset verified up to)
        self._prefix: dict[int, tuple[tuple[int, int, int], tuple[int, int, int], int]] = {}
        # (4): per broker, (incarnation, partition object, leader epoch) -> high watermark
        self._leader_hw: dict[int, tuple[tuple[int, int, int], int]] = {}
        # isr_refused calls (the answer to the pending proposal was one of the errors that
        # drop it): (broker, partition id, ms, the proposal as sent, the change, the error)
        self.refusals: list[tuple[int, int, int, Any, Any, str]] = []
        self.deleted_before = 0  # the highest log start a DeleteRecords asked for
        self.max_committed = -1  # the highest offset acknowledged or read by a consumer
        # (10): per ISR member, what its log was last checked as, and how many of
        # must_stay's offsets (in the order added) it was checked for
        self._member_checked: dict[int, tuple[tuple[int, int, int], int]] = {}

    # --- the logs --------------------------------------------------------------------------

    def on_log_opened(self, broker: SimBroker, log: Log) -> None:
        self.mirrors[broker.id] = Mirror(log)
        self._prefix.pop(broker.id, None)

    def on_log_closed(self, broker: SimBroker) -> None:
        self.mirrors.pop(broker.id, None)
        self._prefix.pop(broker.id, None)
        self._leader_hw.pop(broker.id, None)

    def on_partition_change(self, broker: SimBroker) -> None:
        mirror = self.mirrors.get(broker.id)
        if mirror is not None:
            mirror.sync()

    def reference(self) -> tuple[SimBroker, Mirror] | None:
        registration = self.world.controller.registration(self.tp)
        if registration is None or registration.leader < 0:
            return None
        broker = self.world.brokers[registration.leader]
        mirror = self.mirrors.get(broker.id)
        if not broker.alive or mirror is None:
            return None
        return broker, mirror

    # --- what brokers decide -----------------------------------------------------------------

    def acknowledged(self, broker: SimBroker, request: Any, append: LeaderAppend) -> None:
        """An acks=all produce is answered with success now."""
        if append.next_offset - append.base_offset != len(request.values):
            self.fail(
                f"b{broker.id} acknowledged {request.describe()} at {append.base_offset}.."
                f"{append.next_offset - 1}: {append.next_offset - append.base_offset} offsets "
                f"for {len(request.values)} records"
            )
        what = f"acked by b{broker.id} (le {append.leader_epoch}) for {request.describe()}"
        if append.duplicate:
            what += " as a duplicate"
        for i, value in enumerate(request.values):
            self._observe(broker, append.base_offset + i, value, what)
        self.checker.acked_records += len(request.values)

    def consumed(self, broker: SimBroker, request: Any, records: bytes, hw: int) -> None:
        offset = request.offset
        for _, batch in decode_batches(records):
            for record in batch:
                if record.offset >= hw:
                    self.fail(
                        f"b{broker.id} served a consumer offset {record.offset}, at or past its "
                        f"high watermark {hw}"
                    )
                if record.offset < offset:
                    continue
                self.checker.read_records += 1
                self._observe(broker, record.offset, record.value or b"", f"read from b{broker.id}")

    def _observe(self, broker: SimBroker, offset: int, value: bytes, what: str) -> None:
        what = f"{what} at {self.world.now_ms} ms"
        mirror = self.mirrors[broker.id]
        mirror.sync()
        if offset < mirror.start:
            return  # a retry answered with the offsets of a batch DeleteRecords removed since
        if mirror.value(offset) != value:
            self.fail(
                f"{what}: offset {offset} should hold {value!r} but b{broker.id}'s log has "
                f"{mirror.value(offset)!r}"
            )
        known = self.must_stay.get(offset)
        if known is not None and known.value != value:
            self.fail(f"offset {offset}: {value!r} {what}, but {known.value!r} was {known.what}")
        if known is None:
            self.must_stay[offset] = Observation(value, what)
            self._must_stay_order.append(offset)
            self.max_committed = max(self.max_committed, offset)
        ref = self.reference()
        if ref is not None:
            self._check_one(ref[0], ref[1], offset, self.must_stay[offset])

    def producer_state_error(self, broker: SimBroker, request: Any, error: Exception) -> None:
        """(8): `broker` refused an idempotent producer's batch for its sequence or epoch."""
        registration = self.world.controller.registration(self.tp)
        partition = broker.partition_of(self.tp)
        if (
            registration is None
            or registration.leader != broker.id
            or partition is None
            or partition.leader_epoch != registration.leader_epoch
        ):
            return  # a deposed leader's producer state may be behind: refusing is fine
        last = request.producer.in_order_after_acks(request)
        if last is None or last < partition.log.log_start_offset:
            return  # nothing of this producer epoch left in the log (DeleteRecords took it)
        self.fail(
            f"PRODUCER STATE: the leader b{broker.id} (le {partition.leader_epoch}) refused "
            f"idempotent {request.describe()}, though every earlier batch of that producer epoch "
            f"was acknowledged: {error}"
        )

    # --- after every event --------------------------------------------------------------------

    def check(self) -> None:
        for mirror in self.mirrors.values():
            mirror.sync()
        ref = self.reference()
        self._check_leaders()
        if self.checker.isr_view:
            self._check_isr_view()
            self._check_isr_members()
        if ref is None:
            return
        broker, mirror = ref
        key = (broker.id, broker.incarnation, mirror.generation, id(mirror))
        if key != self._checked_against:
            for offset, seen in self.must_stay.items():
                self._check_one(broker, mirror, offset, seen)
            self._checked_against = key
        for other in self.world.brokers.values():
            self._check_prefix(other, broker, mirror)

    def _check_one(self, broker: SimBroker, mirror: Mirror, offset: int, seen: Observation) -> None:
        if offset < mirror.start:
            if mirror.start > self.deleted_before:
                self.fail(
                    f"LOST: offset {offset} held {seen.value!r} ({seen.what}); the leader "
                    f"b{broker.id}'s log now starts at {mirror.start}, past every DeleteRecords"
                    f" ({self.deleted_before})"
                )
            return
        held = mirror.value(offset)
        if held != seen.value:
            what = "nothing" if held is None else repr(held)
            self.fail(
                f"LOST: offset {offset} held {seen.value!r} ({seen.what}); the leader b{broker.id}"
                f" (per the controller) has {what} there (log [{mirror.start}, {mirror.end}))"
            )

    def _check_prefix(self, other: SimBroker, leader: SimBroker, ref: Mirror) -> None:
        mirror = self.mirrors.get(other.id)
        if mirror is None or other is leader or not other.alive:
            return
        hw = mirror.log.high_watermark
        mine = (other.incarnation, mirror.generation, id(mirror))
        theirs = (leader.id, ref.generation, id(ref))
        state = self._prefix.get(other.id)
        upto = state[2] if state is not None and state[0] == mine and state[1] == theirs else 0
        start = max(upto, mirror.start, ref.start)
        if hw <= start:
            return
        if hw > ref.end:
            self.fail(
                f"b{other.id}'s high watermark {hw} is past the end {ref.end} of the leader "
                f"b{leader.id}'s log"
            )
        for offset in range(start, hw):
            a, b = mirror.entries[offset - mirror.start], ref.entries[offset - ref.start]
            if a[0] != b[0]:
                cause = ""
                if offset < self.deleted_before:
                    cause = (
                        f" [deleted-records-resurrected: below {self.deleted_before}, where a "
                        "DeleteRecords had moved the log start]"
                    )
                self.fail(
                    f"DIVERGED below the high watermark{cause}: b{other.id} has {a[0]!r} (le "
                    f"{a[1]}) at offset {offset} < its hw {hw}; the leader b{leader.id} has "
                    f"{b[0]!r} (le {b[1]}), log [{ref.start}, {ref.end})"
                )
        self._prefix[other.id] = (mine, theirs, hw)

    def _check_leaders(self) -> None:
        leaders: dict[int, int] = {}
        for broker in self.world.brokers.values():
            p = broker.partition_of(self.tp)
            if p is None or not p.is_leader:
                self._leader_hw.pop(broker.id, None)
                continue
            if p.leader_epoch in leaders:
                self.fail(
                    f"b{leaders[p.leader_epoch]} and b{broker.id} both lead in leader epoch "
                    f"{p.leader_epoch}"
                )
            leaders[p.leader_epoch] = broker.id
            key = (broker.incarnation, id(p), p.leader_epoch)
            hw = p.log.high_watermark
            last = self._leader_hw.get(broker.id)
            if last is not None and last[0] == key and hw < last[1]:
                self.fail(
                    f"b{broker.id}'s high watermark went back from {last[1]} to {hw} in leader "
                    f"epoch {p.leader_epoch}"
                )
            self._leader_hw[broker.id] = (key, hw)

    def note_refusal(
        self, broker: SimBroker, partition: Any, proposal: Any, change: Any, error: str
    ) -> None:
        """isr_refused dropped the pending change `change` on the answer `error`."""
        at = self.world.now_ms
        self.refusals.append((broker.id, id(partition), at, proposal, change, error))

    def _check_isr_view(self) -> None:
        controller = self.world.controller
        reg = controller.registration(self.tp)
        if reg is None or reg.leader < 0:
            return
        broker = self.world.brokers[reg.leader]
        p = broker.partition_of(self.tp)
        if not broker.alive or p is None or p.leader is None or p.leader_epoch != reg.leader_epoch:
            return
        missing = set(reg.isr) - set(p.leader.maximal_isr)
        if not missing:
            return
        self.fail(
            f"ISR VIEW [{self._isr_view_cause(broker, p, missing)}]: the controller's ISR "
            f"{list(reg.isr)} (pe {reg.partition_epoch}) has {sorted(missing)}, which the "
            f"leader b{broker.id} (le {p.leader_epoch}, pe {p.partition_epoch}) leaves out of "
            f"the ISR it computes its high watermark over: {list(p.leader.maximal_isr)}"
        )

    def _committed(self, leader_epoch: int, after_pe: int, isr: Any) -> bool:
        """Whether the controller ever held `isr` in `leader_epoch` past partition epoch
        `after_pe`."""
        for image in self.world.controller.history:
            r = image.topics.partition(*self.tp)
            if (
                r is not None
                and r.leader_epoch == leader_epoch
                and r.partition_epoch > after_pe
                and tuple(r.isr) == tuple(isr)
            ):
                return True
        return False

    def _isr_view_cause(self, broker: SimBroker, p: Any, missing: set[int]) -> str:
        """The likeliest reason the controller's ISR has members the leader's lacks."""
        events: list[tuple[int, str]] = []
        for broker_id, pid, at, proposal, change, error in self.refusals:
            if broker_id != broker.id or pid != id(p) or not missing <= set(change.isr):
                continue
            if self._committed(p.leader_epoch, proposal.partition_epoch, change.isr):
                events.append(
                    (
                        at,
                        f"isr-refused: at {at} ms the answer {error} made isr_refused drop the "
                        f"pending ISR {list(change.isr)}, which the controller had committed",
                    )
                )
        if events:
            return max(events)[1]
        controller_pe = self.world.controller.registration(self.tp).partition_epoch  # type: ignore[union-attr]
        if broker.incarnation == 0 or p.partition_epoch >= controller_pe:
            return "unknown"
        return (
            f"stale-registration: the restarted leader acts on partition epoch "
            f"{p.partition_epoch}, the controller is at {controller_pe}"
        )

    def _check_isr_members(self) -> None:
        """(10): every member of the controller's ISR that is up holds every record
        acknowledged or read (but those DeleteRecords removed)."""
        reg = self.world.controller.registration(self.tp)
        if reg is None or self.max_committed < 0:
            return
        for member in reg.isr:
            mirror = self.mirrors.get(member)
            if mirror is None or not self.world.brokers[member].alive:
                continue
            if mirror.end <= self.max_committed:
                seen = self.must_stay[self.max_committed]
                self.fail(
                    f"ISR MEMBER [{self._member_cause(member, reg)}]: b{member} is in the "
                    f"controller's ISR {list(reg.isr)} (le {reg.leader_epoch} pe "
                    f"{reg.partition_epoch}) but its log ends at {mirror.end}, before offset "
                    f"{self.max_committed} ({seen.what})"
                )
            # A log that lost nothing it held (same mirror generation) still holds what it
            # was checked to hold: only offsets added to must_stay since need a look.
            key = (id(mirror), mirror.generation, reg.partition_epoch)
            checked_key, checked = self._member_checked.get(member, (key, 0))
            if checked_key != key:
                checked = 0
            for offset in self._must_stay_order[checked:]:
                seen = self.must_stay[offset]
                if offset >= mirror.start and mirror.value(offset) != seen.value:
                    self.fail(
                        f"ISR MEMBER [{self._member_cause(member, reg)}]: b{member} is in the "
                        f"controller's ISR {list(reg.isr)} but has {mirror.value(offset)!r} at "
                        f"offset {offset}, which held {seen.value!r} ({seen.what})"
                    )
            self._member_checked[member] = (key, len(self._must_stay_order))

    def _member_cause(self, member: int, reg: Any) -> str:
        """When `member` last joined the controller's ISR (for the trace to be read from)."""
        joined = None
        for image in reversed(self.world.controller.history):
            r = image.topics.partition(*self.tp)
            if r is None or member not in r.isr:
                break
            joined = (image.offset, r.leader_epoch, r.partition_epoch)
        if joined is None:
            return "unknown"
        offset, le, pe = joined
        return f"unknown; b{member} joined the ISR at metadata offset {offset} (le {le} pe {pe})"

    def fail(self, message: str) -> None:
        raise InvariantViolation(f"{tp_name(self.tp)}: {message}")


class Checker:
    """Every partition's PartitionChecker, and what the brokers tell about any of them."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.partitions: dict[TopicPartition, PartitionChecker] = {}
        self.acked_records = 0
        self.read_records = 0
        self.events = 0
        self.isr_view = True  # check (9); off to see what a violation leads to
        self.dirty: set[TopicPartition] = set()  # to check after this event

    def of(self, tp: TopicPartition) -> PartitionChecker:
        """The partition's checks (its state may change: it is checked after this event)."""
        self.dirty.add(tp)
        checks = self.partitions.get(tp)
        if checks is None:
            checks = self.partitions[tp] = PartitionChecker(self, tp)
        return checks

    def touched(self, tp: TopicPartition) -> None:
        """Something the signals below do not cover changed the partition (an ISR proposal
        or answer: the leader's maximal ISR)."""
        self.dirty.add(tp)

    def on_metadata_commit(self) -> None:
        self.dirty.update(self.world.controller.partitions)

    def on_log_opened(self, broker: SimBroker, tp: TopicPartition, log: Log) -> None:
        self.of(tp).on_log_opened(broker, log)

    def on_logs_closed(self, broker: SimBroker) -> None:
        for tp, checks in self.partitions.items():
            checks.on_log_closed(broker)
            self.dirty.add(tp)

    def on_partition_change(self, broker: SimBroker, tp: TopicPartition) -> None:
        self.of(tp).on_partition_change(broker)

    def acknowledged(self, broker: SimBroker, request: Any, append: LeaderAppend) -> None:
        self.of(request.tp).acknowledged(broker, request, append)

    def consumed(self, broker: SimBroker, request: Any, records: bytes, hw: int) -> None:
        self.of(request.tp).consumed(broker, request, records, hw)

    def producer_state_error(self, broker: SimBroker, request: Any, error: Exception) -> None:
        self.of(request.tp).producer_state_error(broker, request, error)

    def note_refusal(
        self, broker: SimBroker, partition: Any, proposal: Any, change: Any, error: str
    ) -> None:
        tp = (partition.topic, partition.index)
        self.of(tp).note_refusal(broker, partition, proposal, change, error)

    def check(self) -> None:
        self.events += 1
        if self.events % SWEEP_EVENTS == 0:
            self.dirty.update(self.world.controller.partitions)
        dirty, self.dirty = self.dirty, set()
        for tp in self.world.controller.partitions:
            if tp in dirty:
                checks = self.partitions.get(tp)
                if checks is None:
                    checks = self.partitions[tp] = PartitionChecker(self, tp)
                checks.check()
