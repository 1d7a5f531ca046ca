"""Raft's safety properties, checked after every event of a simulated run.

The checker keeps the truth as the run reveals it and compares every node against it:
- `committed`: offset -> entry, every entry any node ever reported committed (handed over in
  Ready.committed, or below its high watermark). Committed is forever, so this list only
  grows, and no offset ever gets a second value. `digests[n]` is the state a state machine
  has after applying `committed[:n]` (state_machine.py), what a snapshot ending at n holds.
- `leaders`: epoch -> the node that led it; `votes`: (voter, epoch) -> the candidate it voted
  for.

The invariants (the letters are the brief's; a violation names its letter):
 (a) at most one leader per epoch, over the whole run;
 (b) a committed entry never changes: each node's log below its own high watermark equals
     `committed` (on the offsets the log holds: it starts at its snapshot), and `committed`
     never gets two values for one offset;
 (c) so the logs of all nodes agree up to their high watermarks;
 (d) a node's high watermark never moves backwards (a restart starts it again from 0);
 (e) a node's epoch never decreases, across restarts too (the election state is durable);
 (f) what each node applies is, in order and without gaps, a prefix of `committed`: from 0,
     or from the end of the snapshot it loaded (never below what it applied already), and its
     state machine's state is then that of the committed prefix it applied;
 (g) leader completeness: every entry committed before a new leader took over is in its log,
     or below its log start and so in the snapshot there;
 (h) a voter grants at most one vote per epoch, across restarts too;
 (i) the election state a node acts on is the one on its disk: after the driver has carried
     out its Readies, the persisted epoch and vote equal the core's (else a restart could
     vote twice or forget an epoch);
 (j) an entry once committed stays on a majority of the voters: in their logs, or below the
     end of a (durable, verified) snapshot in their store; whenever a log loses entries
     (truncation, a crash, a compaction, a snapshot install), those offsets are counted again;
 (k) a snapshot holds exactly a committed prefix: every snapshot a node writes or downloads
     equals what a state machine has after applying `committed[:end_offset]` (and its id
     names the epoch of the entry at end_offset - 1), when it appears and when it is loaded.
Each check looks only at what the event could have changed (SimLog reports the offsets it
touched), so checking after every event stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raft.messages import Entry, Ready, SnapshotId, VoteResponse
from raft.roles import Role
from tests.sim.cluster import Cluster, SimNode
from tests.sim.state_machine import EMPTY, TAIL, chain, encode_snapshot


class InvariantViolation(AssertionError):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"invariant ({invariant}) violated: {detail}")
        self.invariant = invariant
        self.detail = detail


@dataclass(slots=True)
class _Watch:
    """What the checker remembers of one node."""

    incarnation: int = 0
    verified_upto: int = 0  # offsets below were checked against `committed`, unchanged since
    last_hw: int = 0
    max_epoch: int = 0  # over every incarnation
    applied_next: int = 0  # the offset this incarnation must apply next
    led_epoch: int = -1  # the last epoch in which it was seen leading


class Checker:
    def __init__(self) -> None:
        self.committed: list[Entry] = []
        self.digests: list[bytes] = [EMPTY]  # digests[n]: the state after committed[:n]
        self.offset_of: dict[bytes, int] = {}  # data -> first committed offset (for clients)
        self.leaders: dict[int, int] = {}
        self.votes: dict[tuple[int, int], int] = {}
        self.events_checked = 0
        self._watch: dict[int, _Watch] = {}

    # --- what the driver tells us -----------------------------------------------------------

    def on_start(self, node: SimNode) -> None:
        watch = self._watch.setdefault(node.node_id, _Watch())
        watch.incarnation = node.incarnation
        watch.verified_upto = watch.last_hw = watch.applied_next = 0
        watch.led_epoch = -1

    def on_crash(self, node: SimNode) -> None:
        pass  # the watch resets when the node starts again; (j) is checked after the event

    def on_ready(self, node: SimNode, ready: Ready, committed: Sequence[Entry]) -> None:
        watch = self._watch[node.node_id]
        load = ready.load_snapshot
        if load is not None:
            data = node.snapshots.snapshots.get(load)
            if data is None:
                raise InvariantViolation(
                    "k", f"node {node.node_id} loads snapshot {load}, which is not in its store"
                )
            self._check_snapshot(node, load, data, "loaded")
            if load.end_offset < watch.applied_next:
                raise InvariantViolation(
                    "f",
                    f"node {node.node_id} loads snapshot {load} having applied up to "
                    f"{watch.applied_next}: its state machine would go back",
                )
            watch.applied_next = load.end_offset
        for entry in committed:
            if entry.offset != watch.applied_next:
                raise InvariantViolation(
                    "f",
                    f"node {node.node_id} applied offset {entry.offset}, expected "
                    f"{watch.applied_next} (a gap or a repeat)",
                )
            if entry.offset >= ready.high_watermark:
                raise InvariantViolation(
                    "f",
                    f"node {node.node_id} applied offset {entry.offset} at or above its high "
                    f"watermark {ready.high_watermark}",
                )
            self._commit(entry, f"applied by node {node.node_id}")
            watch.applied_next += 1
        for message in ready.messages:
            if type(message) is VoteResponse and message.granted and not message.pre_vote:
                key = (message.src, message.epoch)
                holder = self.votes.setdefault(key, message.dst)
                if holder != message.dst:
                    raise InvariantViolation(
                        "h",
                        f"node {message.src} granted its vote in epoch {message.epoch} to "
                        f"node {message.dst}, having granted it to node {holder}",
                    )

    # --- after every event ------------------------------------------------------------------

    def after_event(self, cluster: Cluster) -> None:
        self.events_checked += 1
        touched = sorted(cluster.touched)
        # Snapshots first: (j) counts on every snapshot in a store having been verified.
        for node_id in touched:
            node = cluster.nodes[node_id]
            if node.snapshots.fresh:
                for snapshot_id, data in node.snapshots.take_fresh():
                    self._check_snapshot(node, snapshot_id, data, "written")
        for node_id in touched:
            node = cluster.nodes[node_id]
            changed_from, removed = node.log.take_changes()
            if removed is not None:
                self._check_majority(cluster, node, removed)
            if node.core is not None:
                self._check_node(node, changed_from)

    def check_all(self, cluster: Cluster) -> None:
        """A full pass over every node, not only what changed (end of a run)."""
        for node in cluster.nodes.values():
            for snapshot_id, data in sorted(node.snapshots.snapshots.items()):
                self._check_snapshot(node, snapshot_id, data, "kept")
            if node.core is not None:
                self._watch[node.node_id].verified_upto = 0
                self._check_node(node, 0)

    def _check_node(self, node: SimNode, changed_from: int) -> None:
        core = node.core
        assert core is not None
        watch = self._watch[node.node_id]
        nid = node.node_id
        # (e)
        if core.epoch < watch.max_epoch:
            raise InvariantViolation(
                "e", f"node {nid}'s epoch went back from {watch.max_epoch} to {core.epoch}"
            )
        watch.max_epoch = core.epoch
        # (i)
        durable = node.durable
        if (durable.epoch, durable.voted_for) != (core.epoch, core.voted_for):
            raise InvariantViolation(
                "i",
                f"node {nid} acts in epoch {core.epoch} with vote {core.voted_for}, but its "
                f"quorum-state holds epoch {durable.epoch} with vote {durable.voted_for}",
            )
        # (d)
        hw = core.high_watermark
        if hw < watch.last_hw:
            raise InvariantViolation(
                "d", f"node {nid}'s high watermark went back from {watch.last_hw} to {hw}"
            )
        watch.last_hw = hw
        # (b), (c)
        entries, start = node.log.entries, node.log.start_offset
        if hw > start + len(entries):
            raise InvariantViolation(
                "b",
                f"node {nid}'s high watermark {hw} is beyond its log end {start + len(entries)}",
            )
        for offset in range(max(start, min(watch.verified_upto, changed_from)), hw):
            self._commit(entries[offset - start], f"below node {nid}'s high watermark {hw}")
        watch.verified_upto = hw
        # (f): the state machine's state is that of the committed prefix it applied.
        sm = node.sm
        if sm.digest != self.digests[sm.applied]:
            raise InvariantViolation(
                "f",
                f"node {nid}'s state machine, having applied up to {sm.applied} (from a "
                f"snapshot at {sm.start}), differs from the committed log's",
            )
        # (a), (g)
        if core.role is Role.LEADER:
            holder = self.leaders.setdefault(core.epoch, nid)
            if holder != nid:
                raise InvariantViolation(
                    "a", f"nodes {holder} and {nid} both lead epoch {core.epoch}"
                )
            if watch.led_epoch != core.epoch:
                watch.led_epoch = core.epoch
                self._check_leader_complete(node)

    def _commit(self, entry: Entry, where: str) -> None:
        offset = entry.offset
        committed = self.committed
        if offset < len(committed):
            known = committed[offset]
            if known is not entry and known != entry:
                raise InvariantViolation(
                    "b",
                    f"offset {offset} was committed as {_show(known)}, now {_show(entry)} "
                    f"({where})",
                )
        elif offset == len(committed):
            committed.append(entry)
            self.digests.append(chain(self.digests[-1], entry))
            self.offset_of.setdefault(entry.data, offset)
        else:
            raise InvariantViolation(
                "b", f"offset {offset} committed before offset {len(committed)} ({where})"
            )

    def _check_leader_complete(self, node: SimNode) -> None:
        assert node.core is not None
        count = len(self.committed)
        log = node.log
        start = log.start()
        if start.end_offset > 0:
            # What is below the log start is in the snapshot there, which (k) verified when
            # it was written: it must still be in the store.
            if node.snapshots.size(start) is None:
                raise InvariantViolation(
                    "g",
                    f"node {node.node_id} leads epoch {node.core.epoch} with its log starting "
                    f"at {start}, a snapshot its store no longer has",
                )
        first = min(start.end_offset, count)
        if log.entries[: count - first] == self.committed[first:]:
            return
        for offset in range(first, count):
            have = log.entry_at(offset)
            if have != self.committed[offset]:
                raise InvariantViolation(
                    "g",
                    f"node {node.node_id} leads epoch {node.core.epoch} without committed "
                    f"offset {offset} {_show(self.committed[offset])}: its log has "
                    f"{_show(have)} (log {start.end_offset}..{log.end_offset()})",
                )

    def _check_snapshot(
        self, node: SimNode, snapshot_id: SnapshotId, data: bytes, how: str
    ) -> None:
        """(k): the snapshot is the state after exactly `committed[:end_offset]`."""
        end = snapshot_id.end_offset
        where = f"snapshot {end}-{snapshot_id.epoch} {how} by node {node.node_id}"
        if end > len(self.committed):
            raise InvariantViolation(
                "k", f"{where} reaches past the committed log (offset {len(self.committed)})"
            )
        if end > 0 and snapshot_id.epoch != self.committed[end - 1].epoch:
            raise InvariantViolation(
                "k",
                f"{where} names epoch {snapshot_id.epoch}; committed offset {end - 1} is "
                f"{_show(self.committed[end - 1])}",
            )
        expected = encode_snapshot(end, self.digests[end], self.committed[max(0, end - TAIL) : end])
        if data != expected:
            raise InvariantViolation(
                "k", f"{where} holds {data[:200]!r}, the committed prefix gives {expected[:200]!r}"
            )

    def _check_majority(self, cluster: Cluster, node: SimNode, removed: tuple[int, int]) -> None:
        low, high = removed[0], min(removed[1], len(self.committed))
        if low >= high:
            return
        majority = len(cluster.voter_ids) // 2 + 1
        # A voter holds an offset below the end of its latest snapshot (every snapshot in a
        # store was verified by (k) when it appeared), or in its log.
        voters = [(v, v.snapshots.covered_end()) for v in cluster.nodes.values() if v.is_voter]
        for offset in range(low, high):
            entry = self.committed[offset]
            holders = [
                v.node_id
                for v, covered in voters
                if offset < covered or v.log.entry_at(offset) == entry
            ]
            if len(holders) < majority:
                raise InvariantViolation(
                    "j",
                    f"committed offset {offset} {_show(entry)} is left on voters {holders} only "
                    f"after node {node.node_id} lost it",
                )


def _show(entry: Entry | None) -> str:
    if entry is None:
        return "nothing"
    data = "<LeaderChange>" if entry.control else repr(entry.data)
    return f"e{entry.epoch} {data}"
