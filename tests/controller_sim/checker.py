"""The metadata invariants, checked after every event on top of the Raft simulator's.

MetadataChecker is the Raft checker (tests/sim/invariants.py, invariants (a)-(k)) that also
keeps the reference images: `images[n]` is the image after replaying `committed[:n]` from the
empty image. Its letters continue the Raft checker's:
 (m) every node's image equals the reference image at the offset it applied, so any two
     nodes at the same offset have equal images, and a node restarted from a snapshot plus
     the log tail reaches the image the others had there (its snapshot's image included);
 (n) every metadata snapshot (written, downloaded or loaded) holds exactly the records of
     the reference image at its end offset, MetadataImage.records() encoded;
 (o) image sanity at every committed offset: each partition's replicas are distinct, its
     ISR is within the replicas and non-empty unless its ELR is not (KIP-966), its leader
     is -1 or in the ISR; topic names and ids index the same topics; partition and leader
     epochs never decrease while the partition exists;
 (p) a controller operation is all or nothing: the records it proposed together are either
     all committed, at the offsets and epoch they were proposed in, or none is;
 (q) after every committed operation, a fenced broker (or one not registered) leads no
     partition: a partition whose only eligible leader is fenced is offline (leader -1);
 (r) an operation the controller completes (answers) is committed: its last record is in
     the committed log, in the epoch it was proposed in;
 (s) an operation that commits was computed against the committed image at its first
     offset: the pending writes it saw are exactly the records committed before it (a
     controller that kept abandoned writes, or skipped some, computes against another).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import NO_LEADER, topic_id_str
from raft.messages import Entry, SnapshotId
from tests.controller_sim.machine import (
    MetadataStateMachine,
    decode_snapshot,
    image_from_records,
    image_records,
    next_image,
)
from tests.sim.cluster import SimNode
from tests.sim.invariants import Checker, InvariantViolation


@dataclass(frozen=True, slots=True)
class Operation:
    """Records one controller operation proposed together: offsets first..last of `epoch`."""

    kind: str
    epoch: int
    first: int
    last: int
    # The image the controller computed it against (None: not checked).
    basis: MetadataImage | None = field(default=None, compare=False, repr=False)


def diff_images(a: MetadataImage, b: MetadataImage) -> str:
    """What differs, as the records that rebuild each image."""
    ra = [str(r).replace("\n", " ") for r in a.records()]
    rb = [str(r).replace("\n", " ") for r in b.records()]
    only_a = [r for r in ra if r not in rb]
    only_b = [r for r in rb if r not in ra]
    return (
        f"offset/epoch {a.offset}/{a.epoch} vs {b.offset}/{b.epoch}; "
        f"only in the first: {only_a[:4]}; only in the second: {only_b[:4]}"
    )


def sanity_problems(image: MetadataImage) -> list[str]:
    """(o)'s structural checks on one image."""
    problems = []
    topics = image.topics
    if len(topics.by_id) != len(topics.by_name):
        problems.append(f"{len(topics.by_id)} topic ids but {len(topics.by_name)} names")
    for name, topic in topics.by_name.items():
        if topics.by_id.get(topic.topic_id) != topic:
            problems.append(
                f"topic {name!r} is not indexed by its id {topic_id_str(topic.topic_id)}"
            )
        for pid, p in topic.partitions.items():
            where = f"{name}-{pid}"
            if len(set(p.replicas)) != len(p.replicas) or not p.replicas:
                problems.append(f"{where}: replicas {p.replicas}")
            if not p.isr and not p.elr:
                # KIP-966: an empty ISR is legal while an eligible leader replica remains
                # (the last member left it after an unclean restart, broker_lifecycle.py).
                problems.append(f"{where}: empty ISR and ELR")
            if not set(p.isr) <= set(p.replicas) or len(set(p.isr)) != len(p.isr):
                problems.append(f"{where}: ISR {p.isr} not a set within replicas {p.replicas}")
            if p.leader != NO_LEADER and p.leader not in p.isr:
                problems.append(f"{where}: leader {p.leader} not in ISR {p.isr}")
    return problems


def fenced_leaders(image: MetadataImage) -> list[str]:
    """(q): partitions led by a broker that is fenced or not registered."""
    out = []
    brokers = image.cluster.brokers
    for name, topic in sorted(image.topics.by_name.items()):
        for pid, p in sorted(topic.partitions.items()):
            if p.leader == NO_LEADER:
                continue
            broker = brokers.get(p.leader)
            if broker is None or broker.fenced:
                state = "unregistered" if broker is None else "fenced"
                out.append(f"{name}-{pid} led by {state} broker {p.leader} (ISR {p.isr})")
    return out


class MetadataChecker(Checker):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[MetadataImage] = [EMPTY_IMAGE]
        # first offset -> the operations proposed starting there (one per epoch at most).
        self._operations: dict[int, list[Operation]] = {}
        self._open: list[Operation] = []  # first record committed, last not yet
        self.operations_committed = 0
        self.operations_cut = 0  # (p) violations seen (only counted once raised)
        self._compared: dict[int, tuple[int, int]] = {}  # node -> (incarnation, applied)

    # --- what the controller tells us -------------------------------------------------------

    def expect_operation(self, operation: Operation) -> None:
        if operation.first < len(self.committed):
            raise AssertionError(f"{operation} proposed below the committed log end")
        self._operations.setdefault(operation.first, []).append(operation)

    def operation_completed(self, operation: Operation) -> None:
        """(r): the controller answered the operation's caller."""
        last = operation.last
        if last >= len(self.committed) or self.committed[last].epoch != operation.epoch:
            held = (
                f"epoch {self.committed[last].epoch}"
                if last < len(self.committed)
                else f"nothing (committed up to {len(self.committed)})"
            )
            raise InvariantViolation(
                "r",
                f"operation {operation.kind} (offsets {operation.first}..{last} of epoch "
                f"{operation.epoch}) completed, but its last offset holds {held}",
            )

    # --- the reference images ---------------------------------------------------------------

    def _commit(self, entry: Entry, where: str) -> None:
        before = len(self.committed)
        super()._commit(entry, where)
        if len(self.committed) > before:
            self._extend(entry)

    def _extend(self, entry: Entry) -> None:
        offset = entry.offset
        previous = self.images[-1]
        try:
            image = next_image(previous, entry)
        except Exception as error:  # noqa: BLE001 - a record the image refuses is a finding
            raise InvariantViolation(
                "o", f"committed offset {offset} does not replay: {type(error).__name__}: {error}"
            ) from error
        self.images.append(image)
        problems = sanity_problems(image)
        if problems:
            raise InvariantViolation("o", f"image at {offset + 1}: {'; '.join(problems[:5])}")
        self._check_epochs(previous, image)
        # (p)
        for operation in self._operations.pop(offset, []):
            if operation.epoch == entry.epoch:
                self._open.append(operation)
                basis = operation.basis
                if basis is not None and basis != previous:
                    raise InvariantViolation(
                        "s",
                        f"operation {operation.kind} committed at {operation.first}.."
                        f"{operation.last} was computed against another image than the "
                        f"committed one before it: {diff_images(basis, previous)}",
                    )
        still_open = []
        for operation in self._open:
            if entry.epoch != operation.epoch and operation.first <= offset <= operation.last:
                raise InvariantViolation(
                    "p",
                    f"operation {operation.kind} (offsets {operation.first}..{operation.last} "
                    f"of epoch {operation.epoch}) is half committed: offset {offset} holds "
                    f"{'a LeaderChange' if entry.control else 'a record'} of epoch "
                    f"{entry.epoch}",
                )
            if offset == operation.last:
                self.operations_committed += 1
                leaders = fenced_leaders(image)
                if leaders:
                    raise InvariantViolation(
                        "q",
                        f"after operation {operation.kind} committed at {operation.first}.."
                        f"{operation.last}: {'; '.join(leaders[:4])}",
                    )
            else:
                still_open.append(operation)
        self._open = still_open

    def _check_epochs(self, old: MetadataImage, new: MetadataImage) -> None:
        if old.topics is new.topics:
            return
        for topic_id, topic in new.topics.by_id.items():
            before = old.topics.by_id.get(topic_id)
            if before is None or before is topic:
                continue
            for pid, p in topic.partitions.items():
                q = before.partitions.get(pid)
                if q is None:
                    continue
                if p.partition_epoch < q.partition_epoch or p.leader_epoch < q.leader_epoch:
                    raise InvariantViolation(
                        "o",
                        f"{topic.name}-{pid} at {new.offset}: partition/leader epoch "
                        f"{q.partition_epoch}/{q.leader_epoch} -> "
                        f"{p.partition_epoch}/{p.leader_epoch}",
                    )

    # --- per node ---------------------------------------------------------------------------

    def _check_node(self, node: SimNode, changed_from: int) -> None:
        super()._check_node(node, changed_from)
        sm = node.sm
        if not isinstance(sm, MetadataStateMachine):
            return
        key = (node.incarnation, sm.applied)
        if self._compared.get(node.node_id) == key:
            return
        self._compared[node.node_id] = key
        expected = self.images[sm.applied]
        if sm.image != expected:
            raise InvariantViolation(
                "m",
                f"node {node.node_id}'s image at {sm.applied} (from a snapshot at {sm.start}) "
                f"differs from the committed log's: {diff_images(sm.image, expected)}",
            )

    def _check_snapshot(
        self, node: SimNode, snapshot_id: SnapshotId, data: bytes, how: str
    ) -> None:
        try:
            base, records = decode_snapshot(data)
        except ValueError as error:
            raise InvariantViolation(
                "n", f"snapshot {snapshot_id} {how} by node {node.node_id}: {error}"
            ) from error
        super()._check_snapshot(node, snapshot_id, base, how)
        end = snapshot_id.end_offset
        expected = self.images[end]
        if records != image_records(expected):
            rebuilt = image_from_records(records, end, snapshot_id.epoch)
            raise InvariantViolation(
                "n",
                f"snapshot {end}-{snapshot_id.epoch} {how} by node {node.node_id} holds "
                f"another image than the committed log's: {diff_images(rebuilt, expected)}",
            )
