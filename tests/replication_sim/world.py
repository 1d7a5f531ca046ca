"""The simulated world of one run: clock, random streams, network, controller, brokers,
clients and checker, and the loop that runs events and checks the invariants after each.

Time only moves when the next event is taken off the queue (tests/sim/events.py). The storage
clock the Logs see is a ManualClock kept at the simulated time (plus a fixed epoch, so record
timestamps look like real ones); brokers get the same wall time for the Partition's clocks.
Every random choice comes from a stream drawn from the seed, one per concern, so that (for
instance) one more message drawing a delay does not change which broker the next crash hits.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable

from storage.clock import ManualClock
from tests.replication_sim.broker import SimBroker
from tests.replication_sim.checker import Checker
from tests.replication_sim.clients import ClientStats, Consumer, Producer
from tests.replication_sim.controller import SimController
from tests.replication_sim.network import Network
from tests.replication_sim.plan import Plan
from tests.sim.events import EventQueue
from tests.sim.trace import Trace

EPOCH_MS = 1_700_000_000_000
MAX_EVENTS = 2_000_000


class RunawayError(AssertionError):
    pass


class World:
    def __init__(self, plan: Plan, directory: str, echo: bool = False) -> None:
        self.plan = plan
        self.seed = plan.seed
        master = random.Random(plan.seed)
        self.rngs = {
            name: random.Random(master.getrandbits(64))
            for name in (
                "network",
                "metadata",
                "faults",
                "producers",
                "consumers",
                "controller",
                "quorum",
                "quorum links",
                "fetch sessions",
            )
        }
        self.queue = EventQueue()
        self.clock = ManualClock(EPOCH_MS)
        self.trace = Trace(lambda: self.queue.now_ms, keep=600, echo=echo)
        self.tokens = itertools.count()
        self.network = Network(self.rngs["network"], plan, self.queue, self.trace)
        self.controller = SimController(self)
        self.checker = Checker(self)
        self.client_stats = ClientStats()
        ids = list(range(1, plan.brokers + 1))
        self.brokers = {b: SimBroker(self, b, os.path.join(directory, f"b{b}")) for b in ids}
        producers_rng = self.rngs["producers"]
        self.producers = [
            Producer(self, i, producers_rng.random() < plan.idempotent, producers_rng)
            for i in range(plan.producers)
        ]
        self.consumers = [Consumer(self, i, self.rngs["consumers"]) for i in range(2)]
        self.events = 0
        self.on_stop: Callable[[SimBroker], None] = lambda broker: None

    @property
    def now_ms(self) -> int:
        return self.queue.now_ms

    @property
    def wall_ms(self) -> int:
        return EPOCH_MS + self.queue.now_ms

    def start(self) -> None:
        """Once the controller quorum has its first active controller (a second or two in):
        brokers registered and unfenced and the topics created through it, then every broker
        up with the metadata as it stands (each partition's first leader is its first
        replica)."""
        controller = self.controller
        controller.bootstrap(sorted(self.brokers), self.plan.topics)
        image = controller.image
        for broker in self.brokers.values():
            broker.start(image.cluster.brokers[broker.id].epoch)
            broker.metadata.load(len(controller.history) - 1)
        controller.start()
        self.after_event()

    def on_metadata_commit(self) -> None:
        self.checker.on_metadata_commit()
        for broker in self.brokers.values():
            broker.metadata.schedule()

    def on_stopped(self, broker: SimBroker, stop: Callable[[], None]) -> None:
        """A broker's controlled shutdown ended: it stops now (the simulation schedules its
        restart)."""
        stop()
        self.on_stop(broker)

    # --- running ----------------------------------------------------------------------------

    def after_event(self) -> None:
        self.clock.now_ms = self.wall_ms
        self.controller.quorum.after_event()
        self.checker.check()

    def step(self) -> bool:
        event = self.queue.pop()
        if event is None:
            return False
        self.clock.now_ms = EPOCH_MS + event[0]
        event[2](*event[3])
        self.events += 1
        if self.events > MAX_EVENTS:
            raise RunawayError(f"more than {MAX_EVENTS} events")
        self.after_event()
        return True

    def run_until(
        self, until_ms: int, stop: Callable[[], bool] | None = None, probe_ms: int = 100
    ) -> bool:
        """Runs events up to `until_ms`; with `stop`, returns True as soon as it holds (looked
        at every `probe_ms`)."""
        next_probe = self.now_ms
        while True:
            if stop is not None and self.now_ms >= next_probe:
                if stop():
                    return True
                next_probe = self.now_ms + probe_ms
            at = self.queue.peek_ms()
            if at is None or at > until_ms:
                self.queue.now_ms = max(self.queue.now_ms, until_ms)
                return stop() if stop is not None else True
            self.step()
