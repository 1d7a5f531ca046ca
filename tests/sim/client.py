"""The clients: they propose unique records to whoever they think leads.

Safety phase: a proposal now and then, to a node that believes it leads (a stale, cut-off
leader too: it accepts entries that can never commit, which other leaders must truncate) or
to any node (NotLeaderError is an answer, not a failure).

Liveness phase: a fixed set of records that must all commit. A record a deposed leader
accepted can be lost legitimately, so, as a real producer does, the client proposes a record
again to the current leader when it has not committed some time after the last attempt.
A retry may commit a record twice; that is fine here (no idempotence in the core), what
counts is that each one commits.
"""

from __future__ import annotations

import random

from raft.core import NotLeaderError
from tests.sim.cluster import Cluster
from tests.sim.events import EventQueue
from tests.sim.invariants import Checker
from tests.sim.trace import Trace

RETRY_AFTER_MS = 2_000
RETRY_CHECK_MS = 250


class Clients:
    def __init__(
        self,
        rng: random.Random,
        queue: EventQueue,
        cluster: Cluster,
        checker: Checker,
        trace: Trace,
        propose_every_ms: int,
    ) -> None:
        self.rng = rng
        self.queue = queue
        self.cluster = cluster
        self.checker = checker
        self.trace = trace
        self.propose_every_ms = propose_every_ms
        self.active = False
        self.counter = 0
        self.accepted = self.rejected = 0
        # Liveness phase: record -> time of the last attempt that a leader accepted (-1: none).
        self.pending: dict[bytes, int] = {}
        self.must_commit: list[bytes] = []

    def _record(self, node_id: int) -> bytes:
        self.counter += 1
        return b"n%d-%d" % (node_id, self.counter)

    # --- safety phase -----------------------------------------------------------------------

    def start(self) -> None:
        self.active = True
        self.queue.after(self._gap(), self._propose_some)

    def stop(self) -> None:
        self.active = False

    def _gap(self) -> int:
        return 1 + int(self.rng.expovariate(1.0 / self.propose_every_ms))

    def _propose_some(self) -> None:
        if not self.active:
            return
        up = self.cluster.up_nodes()
        if up:
            leaders = self.cluster.leaders()
            target = self.rng.choice(leaders if leaders and self.rng.random() < 0.8 else up)
            count = self.rng.randint(1, 3)
            records = [self._record(target.node_id) for _ in range(count)]
            self._try(target.node_id, records)
        self.queue.after(self._gap(), self._propose_some)

    def _try(self, node_id: int, records: list[bytes]) -> bool:
        try:
            self.cluster.propose(node_id, records)
        except NotLeaderError:
            self.rejected += 1
            return False
        self.accepted += 1
        return True

    # --- liveness phase ---------------------------------------------------------------------

    def start_liveness(self, count: int, spread_ms: int) -> None:
        """`count` records, each arriving at a random time within `spread_ms`."""
        for _ in range(count):
            self.counter += 1
            record = b"live-%d" % self.counter
            self.must_commit.append(record)
            self.queue.after(self.rng.randint(0, spread_ms), self._arrive, record)
        self.queue.after(RETRY_CHECK_MS, self._retry_pending)

    def _arrive(self, record: bytes) -> None:
        self.pending[record] = -1
        self._retry_pending(reschedule=False)

    def _retry_pending(self, reschedule: bool = True) -> None:
        now = self.queue.now_ms
        committed = self.checker.offset_of
        leader = self.current_leader()
        for record, last in list(self.pending.items()):
            if record in committed:
                del self.pending[record]
            elif leader is not None and (last < 0 or now - last >= RETRY_AFTER_MS):
                if self._try(leader, [record]):
                    self.pending[record] = now
        if reschedule and any(r not in committed for r in self.must_commit):
            self.queue.after(RETRY_CHECK_MS, self._retry_pending)

    def current_leader(self) -> int | None:
        """The leader of the highest epoch, as a client that follows redirects finds it."""
        leaders = self.cluster.leaders()
        if not leaders:
            return None
        best = max(leaders, key=lambda n: (n.core.epoch if n.core else -1, -n.node_id))
        return best.node_id

    def liveness_lagging(self) -> list[str]:
        """Why the liveness phase is not done yet; empty once it is."""
        why: list[str] = []
        if self.current_leader() is None:
            why.append("no leader")
        committed = self.checker.offset_of
        missing = [r.decode() for r in self.must_commit if r not in committed]
        if missing:
            why.append(f"not committed: {missing}")
            return why
        last = max(committed[r] for r in self.must_commit)
        for node in self.cluster.nodes.values():
            if node.applied <= last:
                kind = "voter" if node.is_voter else "observer"
                why.append(f"{kind} {node.node_id} applied {node.applied} of {last + 1}")
        return why
