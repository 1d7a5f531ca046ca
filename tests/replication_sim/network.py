"""The simulated network between brokers, the controller nodes and the clients.

It decides when a message arrives, never what it says. Links behave as TCP connections do:
- a message takes a uniform delay in [min, max] ms, now and then (`slow`) a long one;
- a cut link (a partition) holds what is sent over it and delivers it, in order, once the
  link heals, unless it was held longer than MAX_HOLD_MS (the connection is gone by then) or
  it is an RPC request past its deadline (the server refuses an expired call); whoever
  waits for an answer meanwhile times out on its own clock;
- RPC messages (controller calls, produce and consume calls; `lossy=True`) may be lost
  outright with probability `rpc_drop` (a connection reset); replica fetch streams are not:
  a stream only breaks as a whole (Broker.break_stream).
Nothing is duplicated: gRPC over TCP never delivers a message twice, and the fetcher has one
fetch in flight per stream, so a stale answer is one of an earlier, cancelled stream.
Node ids: brokers are 1..n, controller node k is quorum.CONTROLLER_BASE + k (the Raft
messages between them go over these links too, quorum.QuorumLinks), every client CLIENTS.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from tests.replication_sim.plan import Plan
from tests.sim.events import EventQueue
from tests.sim.trace import Trace

CLIENTS = -1
MAX_HOLD_MS = 10_000

# (sent at, deadline or None, action, args)
Message = tuple[int, "int | None", Callable[..., None], tuple[Any, ...]]


def link(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a <= b else (b, a)


class Network:
    def __init__(self, rng: random.Random, plan: Plan, queue: EventQueue, trace: Trace) -> None:
        self.rng = rng
        self.plan = plan
        self.queue = queue
        self.trace = trace
        self.cuts: Counter[tuple[int, int]] = Counter()
        self.held: dict[tuple[int, int], list[Message]] = {}
        self.calm = False  # the liveness phase: no losses, no slow messages
        # Scripted faults for scenarios: a message any rule matches (src, dst, action, args)
        # is lost; a rule that matches once and then never drops exactly one message.
        self.drop_rules: list[Callable[[int, int, Callable[..., None], tuple[Any, ...]], bool]] = []
        self.sent = 0
        self.lost = 0
        self.held_count = 0

    # --- faults -------------------------------------------------------------------------------

    def cut(self, a: int, b: int) -> None:
        self.cuts[link(a, b)] += 1

    def heal(self, a: int, b: int) -> None:
        pair = link(a, b)
        self.cuts[pair] -= 1
        if self.cuts[pair] <= 0:
            del self.cuts[pair]
            self._release(pair)

    def heal_all(self) -> None:
        for pair in list(self.cuts):
            del self.cuts[pair]
            self._release(pair)

    def connected(self, a: int, b: int) -> bool:
        return link(a, b) not in self.cuts

    # --- delivery -----------------------------------------------------------------------------

    def delay(self) -> int:
        plan = self.plan
        if not self.calm and plan.slow and self.rng.random() < plan.slow:
            return self.rng.randint(plan.max_delay_ms, plan.slow_max_ms)
        return self.rng.randint(plan.min_delay_ms, plan.max_delay_ms)

    def send(
        self,
        src: int,
        dst: int,
        action: Callable[..., None],
        *args: Any,
        lossy: bool = False,
        deadline_ms: int | None = None,
    ) -> None:
        """`deadline_ms`: an RPC request's gRPC deadline; one that arrives later is dropped
        (the server refuses an expired call) instead of being handled."""
        self.sent += 1
        plan = self.plan
        for rule in self.drop_rules:
            if rule(src, dst, action, args):
                self.lost += 1
                self.trace.record(f"net: dropped {src}->{dst} by a scenario's rule")
                return
        if lossy and not self.calm and plan.rpc_drop and self.rng.random() < plan.rpc_drop:
            self.lost += 1
            self.trace.record(f"net: lost {src}->{dst} {getattr(action, '__name__', action)}")
            return
        message = (self.queue.now_ms, deadline_ms, action, args)
        self.queue.after(self.delay(), self._arrive, link(src, dst), message)

    def _arrive(self, pair: tuple[int, int], message: Message) -> None:
        if pair in self.cuts:
            self.held_count += 1
            self.held.setdefault(pair, []).append(message)
            return
        _, deadline_ms, action, args = message
        if deadline_ms is not None and self.queue.now_ms > deadline_ms:
            self.lost += 1
            return
        action(*args)

    def _release(self, pair: tuple[int, int]) -> None:
        for message in self.held.pop(pair, []):
            if self.queue.now_ms - message[0] > MAX_HOLD_MS:
                self.lost += 1
                continue
            self.queue.after(self.delay(), self._arrive, pair, message)
