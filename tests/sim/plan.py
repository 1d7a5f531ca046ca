"""What one seed decides: the cluster's shape, how it is driven, and every fault's rate.

Everything a run does follows from `Plan.from_seed(seed)` plus random streams drawn from the
same seed, so `python -m tests.sim --seed N` replays a run exactly. The draws here are made in
a fixed order; adding a new knob at the *end* keeps the earlier ones (and so old seeds' plans)
as they were.

Seeds vary the intensity on purpose: a few calm runs with rare faults find the bugs that need
a long stable stretch, harsh ones find those that need many faults close together.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.sim.cluster import TickMode
from tests.sim.network import NetworkConfig


@dataclass(frozen=True, slots=True)
class Plan:
    seed: int
    voters: int
    observers: int
    tick_mode: TickMode
    network: NetworkConfig  # during the safety phase; the liveness phase drops no messages
    safety_ms: int
    # Each fault recurs after an exponentially distributed gap with this mean; None: off.
    crash_every_ms: int | None
    restart_after_ms: tuple[int, int]
    torn_write: float  # probability a crash keeps some unsynced writes
    crash_in_ready: float  # probability a crash strikes partway through a Ready instead
    partition_every_ms: int | None
    partition_for_ms: tuple[int, int]
    resign_every_ms: int | None
    propose_every_ms: int
    liveness_records: int
    # How many entries one FetchResponse carries at most: small values make followers catch
    # up page by page, so high watermarks run ahead of their log ends.
    fetch_max_entries: int
    # Snapshots (KIP-630): how often some node's state machine takes one (None: never), how
    # often the log is then compacted to it, and the largest FetchSnapshot chunk (tiny ones
    # make a download take many round trips, so it is more often cut short by a crash, a
    # leader change or a newer snapshot deleting the one being downloaded).
    snapshot_every_ms: int | None = None
    compact: float = 0.0
    fetch_snapshot_max_bytes: int = 1 << 20
    liveness_bound_ms: int = 30_000

    @classmethod
    def from_seed(cls, seed: int) -> Plan:
        rng = random.Random(seed)

        def sometimes(probability: float, mean_ms: int) -> int | None:
            on = rng.random() < probability
            gap = rng.randint(mean_ms // 3, mean_ms * 2)
            return gap if on else None

        voters = rng.choice((3, 3, 5))
        observers = rng.choice((0, 1))
        tick_mode = rng.choice((TickMode.WAKEUP, TickMode.WAKEUP, TickMode.INTERVAL))
        min_delay = rng.randint(0, 5)
        network = NetworkConfig(
            min_delay_ms=min_delay,
            max_delay_ms=min_delay + rng.choice((2, 10, 30, 100)),
            drop=rng.choice((0.0, 0.01, 0.05, 0.2)),
            duplicate=rng.choice((0.0, 0.01, 0.05)),
            slow=rng.choice((0.0, 0.0, 0.005, 0.02)),
            slow_max_ms=rng.choice((500, 2000, 4000)),
        )
        safety_ms = rng.randint(5_000, 20_000)
        # INTERVAL runs tick every node every 10 ms: fewer simulated seconds for the same cost.
        if tick_mode is TickMode.INTERVAL:
            safety_ms //= 2
        return cls(
            seed=seed,
            voters=voters,
            observers=observers,
            tick_mode=tick_mode,
            network=network,
            safety_ms=safety_ms,
            crash_every_ms=sometimes(0.7, 3_000),
            restart_after_ms=(0, rng.choice((200, 1_000, 4_000))),
            torn_write=rng.choice((0.0, 0.5, 1.0)),
            crash_in_ready=rng.choice((0.0, 0.3, 0.6, 1.0)),
            partition_every_ms=sometimes(0.7, 3_000),
            partition_for_ms=(100, rng.choice((500, 2_000, 6_000))),
            resign_every_ms=sometimes(0.4, 4_000),
            propose_every_ms=rng.choice((20, 100, 300)),
            liveness_records=rng.randint(3, 20),
            fetch_max_entries=rng.choice((1000, 1000, 100, 25)),
            # Frequent on purpose: a follower that was cut off or down for a second or two
            # should often find the entries it needs compacted away.
            snapshot_every_ms=sometimes(0.85, 1_000),
            compact=rng.choice((0.3, 0.7, 1.0)),
            fetch_snapshot_max_bytes=rng.choice((16, 50, 200, 1 << 20)),
        )

    def describe(self) -> str:
        n = self.network
        off = "off"
        return (
            f"{self.voters} voters + {self.observers} observer(s), {self.tick_mode.value} ticks; "
            f"safety {self.safety_ms} ms: delay {n.min_delay_ms}-{n.max_delay_ms} ms, "
            f"drop {n.drop}, dup {n.duplicate}, slow {n.slow} (<= {n.slow_max_ms} ms); "
            f"crash every ~{self.crash_every_ms or off} ms (restart <= "
            f"{self.restart_after_ms[1]} ms, torn {self.torn_write}, "
            f"in-Ready {self.crash_in_ready}); partition every ~"
            f"{self.partition_every_ms or off} ms for <= {self.partition_for_ms[1]} ms; "
            f"resign every ~{self.resign_every_ms or off} ms; "
            f"propose every ~{self.propose_every_ms} ms; "
            f"fetch pages of <= {self.fetch_max_entries} entries; "
            f"snapshot every ~{self.snapshot_every_ms or off} ms (compact {self.compact}, "
            f"chunks <= {self.fetch_snapshot_max_bytes} bytes); "
            f"liveness: {self.liveness_records} records within {self.liveness_bound_ms} ms"
        )
