"""What one seed decides: the brokers, the topics and their partitions, the brokers'
timeouts, how hard the producers push, and every fault's rate (TigerBeetle-style: calm seeds
find the bugs that need a long quiet stretch, harsh ones those that need many faults close
together).

Every run follows from `Plan.from_seed(seed)` plus random streams drawn from the same seed,
so `python -m tests.replication_sim --seed N` replays a run exactly. Draws are made in a fixed
order; a new knob goes at the end so that older seeds keep their plans.

Times are Kafka's defaults scaled down (replica.lag.time.max.ms 30 s -> 1-10 s, session 9 s
-> 1.5-9 s, ...) so a run of a few simulated minutes sees many leader changes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Plan:
    seed: int
    brokers: int
    min_insync_replicas: int
    # broker and controller settings
    replica_lag_time_max_ms: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    fetch_wait_max_ms: int
    fetch_backoff_ms: int
    fetch_max_bytes: int  # replica.fetch.max.bytes, per partition
    segment_bytes: int
    hw_checkpoint_ms: int  # replica.high.watermark.checkpoint.interval.ms
    produce_timeout_ms: int  # the producer's request.timeout.ms, also the broker's wait
    # network
    min_delay_ms: int
    max_delay_ms: int
    slow: float  # probability of a long delay (up to slow_max_ms)
    slow_max_ms: int
    rpc_drop: float  # controller and client RPCs lost (a reset connection); streams never
    metadata_delay_ms: int  # upper bound of a broker's lag behind the metadata log
    # clients
    producers: int
    idempotent: float  # fraction of producers that are idempotent
    acks_all: float  # fraction of produce requests with acks=all (the rest acks=1)
    produce_every_ms: int
    consume_every_ms: int
    # faults: mean gap between two of a kind (None: off) and how long one lasts
    safety_ms: int
    crash_every_ms: int | None
    down_for_ms: tuple[int, int]
    clean_stop: float  # fraction of stops that are controlled shutdowns, not crashes
    isolate_every_ms: int | None
    isolate_for_ms: tuple[int, int]
    controller_cut_every_ms: int | None
    link_cut_every_ms: int | None
    metadata_stall_every_ms: int | None
    stream_reset_every_ms: int | None
    crash_leader: float  # probability a crash or isolation picks the current leader
    controller_latency_ms: int  # 3x the upper bound of a Raft message's delay between controllers
    # After a restart, the first image the broker's MetadataLoader publishes: False, the
    # newest it can fetch; True, any image from the one it last loaded before (Strom's loader
    # publishes a snapshot it loads, and each commit batch). Either way the broker applies
    # none until the controller says it is caught up (broker/metadata_gate.py).
    restart_replay: bool
    delete_records_every_ms: int | None  # DeleteRecords on the leader, up to its hw
    # The topics, as (partitions, placement start) each: 1-6 partitions in all, placed by
    # the controller's own placement (metadata/placement.py) from that start, so leaders
    # and replica sets differ between partitions; and their replication factor (below the
    # broker count, brokers hold different sets).
    topics: tuple[tuple[int, int], ...]
    replication_factor: int
    # the controller quorum (quorum.py): its voters, and crashes of its nodes (the active
    # one with probability controller_crash_active); never more than a minority down at
    # once, but the one node of a single-voter quorum, each back within down_for
    controllers: int
    controller_crash_every_ms: int | None
    controller_down_for_ms: tuple[int, int]
    controller_crash_active: float

    @classmethod
    def from_seed(cls, seed: int) -> Plan:
        rng = random.Random(f"replication-{seed}")

        def sometimes(probability: float, mean_ms: int) -> int | None:
            on = rng.random() < probability
            gap = rng.randint(mean_ms // 2, mean_ms * 2)
            return gap if on else None

        brokers = rng.choice((3, 3, 4))
        lag = rng.choice((1_000, 3_000, 10_000))
        session = rng.choice((1_500, 3_000, 9_000))
        heartbeat = rng.choice((200, 500))
        max_delay = rng.choice((3, 10, 40))
        return cls(
            seed=seed,
            brokers=brokers,
            min_insync_replicas=2,
            replica_lag_time_max_ms=lag,
            session_timeout_ms=session,
            heartbeat_interval_ms=heartbeat,
            fetch_wait_max_ms=rng.choice((50, 200, 500)),
            fetch_backoff_ms=rng.choice((50, 200, 1_000)),
            fetch_max_bytes=rng.choice((150, 1_000, 64_000)),
            segment_bytes=rng.choice((600, 4_096, 1 << 20)),
            hw_checkpoint_ms=rng.choice((300, 5_000)),
            produce_timeout_ms=rng.choice((1_500, 5_000, 30_000)),
            min_delay_ms=1,
            max_delay_ms=max_delay,
            slow=rng.choice((0.0, 0.01, 0.05)),
            slow_max_ms=rng.choice((300, 3_000)),
            rpc_drop=rng.choice((0.0, 0.01, 0.05)),
            metadata_delay_ms=rng.choice((20, 300, 2_000)),
            producers=rng.randint(1, 3),
            idempotent=rng.choice((0.0, 0.5, 1.0)),
            acks_all=rng.choice((0.5, 0.8, 1.0)),
            produce_every_ms=rng.choice((10, 40, 150)),
            consume_every_ms=rng.choice((50, 200)),
            safety_ms=rng.choice((10_000, 20_000, 30_000)),
            crash_every_ms=sometimes(0.8, rng.choice((1_500, 4_000, 10_000))),
            down_for_ms=(100, rng.choice((1_000, 5_000, 15_000))),
            clean_stop=rng.choice((0.0, 0.3)),
            isolate_every_ms=sometimes(0.6, rng.choice((2_000, 6_000))),
            isolate_for_ms=(100, rng.choice((1_000, 5_000, 15_000))),
            controller_cut_every_ms=sometimes(0.4, 6_000),
            link_cut_every_ms=sometimes(0.5, 4_000),
            metadata_stall_every_ms=sometimes(0.5, 4_000),
            stream_reset_every_ms=sometimes(0.3, 3_000),
            crash_leader=rng.choice((0.3, 0.7)),
            controller_latency_ms=rng.choice((2, 20, 300)),
            restart_replay=rng.random() < 0.2,
            delete_records_every_ms=sometimes(0.3, 5_000),
            topics=tuple(
                (rng.randint(1, 3), rng.randrange(brokers)) for _ in range(rng.choice((1, 1, 2)))
            ),
            replication_factor=rng.choice((3, 3, 2) if brokers == 3 else (4, 3, 3, 2)),
            controllers=rng.choice((1, 3, 3)),
            controller_crash_every_ms=sometimes(0.6, rng.choice((3_000, 8_000))),
            controller_down_for_ms=(100, rng.choice((1_000, 4_000))),
            controller_crash_active=rng.choice((0.5, 0.9)),
        )

    @property
    def partition_count(self) -> int:
        return sum(count for count, _ in self.topics)

    def describe(self) -> str:
        def every(ms: int | None) -> str:
            return "off" if ms is None else f"~{ms} ms"

        return (
            f"{self.brokers} brokers; topics of {[n for n, _ in self.topics]} partitions, RF "
            f"{self.replication_factor}, min ISR {self.min_insync_replicas}; lag "
            f"{self.replica_lag_time_max_ms} ms, session {self.session_timeout_ms} ms, heartbeat "
            f"{self.heartbeat_interval_ms} ms,"
            f" fetch wait {self.fetch_wait_max_ms} ms / backoff {self.fetch_backoff_ms} ms / "
            f"{self.fetch_max_bytes} B, segment {self.segment_bytes} B; net {self.min_delay_ms}-"
            f"{self.max_delay_ms} ms slow {self.slow} rpc drop {self.rpc_drop}, metadata lag <= "
            f"{self.metadata_delay_ms} ms; {self.producers} producers ({self.idempotent:.0%} "
            f"idempotent, {self.acks_all:.0%} acks=all) every ~{self.produce_every_ms} ms; "
            f"{self.safety_ms} ms of faults: crash {every(self.crash_every_ms)} down "
            f"{self.down_for_ms} (clean {self.clean_stop:.0%}), isolate "
            f"{every(self.isolate_every_ms)} for {self.isolate_for_ms}, controller cut "
            f"{every(self.controller_cut_every_ms)}, link cut {every(self.link_cut_every_ms)}, "
            f"metadata stall {every(self.metadata_stall_every_ms)}, stream reset "
            f"{every(self.stream_reset_every_ms)}; controller latency <= "
            f"{self.controller_latency_ms} ms"
            + ("; restarted brokers replay old metadata" if self.restart_replay else "")
            + f"; DeleteRecords {every(self.delete_records_every_ms)}; {self.controllers} "
            f"controllers, controller crash {every(self.controller_crash_every_ms)} down "
            f"{self.controller_down_for_ms} (the active one {self.controller_crash_active:.0%})"
        )
