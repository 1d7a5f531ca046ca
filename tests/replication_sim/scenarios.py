"""Scripted runs of the same world: a quiet plan (no random faults), then the faults one bug
needs, placed by hand, so that a bug the simulator found reproduces as a short story every
time (and, once fixed, the same story runs clean and guards the fix). The invariants are
checked after every event as in a seeded run; `echo=True` prints the trace.

    .venv/bin/python -m tests.replication_sim.scenarios NAME [--trace]
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from broker.partition import Partition
from metadata.alter_partition import IsrResult
from strom_api.records import Record, decode_batches, encode_batch
from tests.replication_sim.broker import SimBroker
from tests.replication_sim.plan import Plan
from tests.replication_sim.quorum import CONTROLLER_BASE
from tests.replication_sim.simulation import temp_root
from tests.replication_sim.world import World

# One partition ("orders-0", replicas [1, 2, 3]): the stories are about one partition.
TP = ("orders", 0)
QUIET = {
    "brokers": 3,
    "topics": ((1, 0),),
    "replication_factor": 3,
    "min_insync_replicas": 2,
    "replica_lag_time_max_ms": 1_000,
    "session_timeout_ms": 1_500,
    "heartbeat_interval_ms": 200,
    "fetch_wait_max_ms": 50,
    "fetch_backoff_ms": 50,
    "fetch_max_bytes": 64_000,
    "segment_bytes": 1 << 20,
    "hw_checkpoint_ms": 300,
    "produce_timeout_ms": 5_000,
    "min_delay_ms": 1,
    "max_delay_ms": 3,
    "slow": 0.0,
    "rpc_drop": 0.0,
    "metadata_delay_ms": 20,
    "producers": 1,
    "idempotent": 0.0,
    "acks_all": 1.0,
    "produce_every_ms": 20,
    "consume_every_ms": 50,
    "crash_every_ms": None,
    "isolate_every_ms": None,
    "controller_cut_every_ms": None,
    "link_cut_every_ms": None,
    "metadata_stall_every_ms": None,
    "stream_reset_every_ms": None,
    "controller_latency_ms": 2,
    "restart_replay": False,
    "delete_records_every_ms": None,
    "controllers": 1,
    "controller_crash_every_ms": None,
}


class ScenarioTimeout(AssertionError):
    pass


@contextmanager
def quiet_world(echo: bool = False, **overrides: Any) -> Iterator[World]:
    """Brokers 1, 2, 3 holding TP's replicas in that order (so b1 leads first and, among b2
    and b3, the controller elects b2 first), one plain acks=all producer, consumers, no
    faults."""
    directory = tempfile.mkdtemp(prefix="replication-scenario-", dir=temp_root())
    plan = dataclasses.replace(Plan.from_seed(0), **{**QUIET, **overrides})
    world = World(plan, directory, echo=echo)
    try:
        world.start()
        for producer in world.producers:
            producer.start()
        for consumer in world.consumers:
            consumer.start()
        yield world
    finally:
        for broker in world.brokers.values():
            broker.replicas.close()
        shutil.rmtree(directory, ignore_errors=True)


def wait_for(world: World, condition: Callable[[], bool], bound_ms: int, what: str) -> None:
    world.trace.record(f"SCENARIO: wait until {what}")
    if not world.run_until(world.now_ms + bound_ms, stop=condition, probe_ms=5):
        raise ScenarioTimeout(f"{what}: not within {bound_ms} ms")


def replica(broker: SimBroker) -> Partition:
    """`broker`'s replica of TP, which it must hold by now."""
    partition = broker.partition_of(TP)
    assert partition is not None, f"b{broker.id} holds no replica of {TP}"
    return partition


def log_end(broker: SimBroker) -> int:
    """The log end of `broker`'s replica of TP; -1 while it is down."""
    log = broker.log_of(TP)
    return -1 if log is None else log.log_end_offset


def high_watermark(broker: SimBroker) -> int:
    log = broker.log_of(TP)
    return -1 if log is None else log.high_watermark


def isr_of(broker: SimBroker) -> set[int] | None:
    """The ISR `broker` holds for TP, if it holds the partition."""
    partition = broker.partition_of(TP)
    return None if partition is None else set(partition.isr)


def isr(world: World) -> set[int]:
    registration = world.controller.registration(TP)
    assert registration is not None
    return set(registration.isr)


# --- isr-refused-after-lost-answer (fixed) --------------------------------------------------


def lost_expansion_answer(echo: bool = False, isr_view: bool = False) -> None:
    """b1 leads with ISR {1, 3}; b2 comes back and b1 asks to add it. The controller commits
    ISR {1, 2, 3}, but its answer is lost and b1 sees no metadata for a while; b1's retry gets
    INVALID_UPDATE_VERSION. The bug was that isr_refused then dropped the pending expansion:
    b2 fell behind again, b1 acknowledged acks=all records over {1, 3}, crashed, and the
    controller elected b2 (first in replica order of its ISR {1, 2, 3}), which lacked them:
    LOST (with isr_view, invariant (9) said so as soon as b1 dropped the expansion). Now the
    expansion stays pending until the metadata settles it, so b1's high watermark waits for
    b2 and nothing b2 lacks is acknowledged."""
    with quiet_world(echo) as world:
        world.checker.isr_view = isr_view
        net = world.network
        leader, lagging = world.brokers[1], world.brokers[2]
        world.run_until(1_000)
        net.cut(1, 2)
        wait_for(
            world,
            lambda: isr_of(leader) == {1, 3},
            10_000,
            "b2 is out of the ISR",
        )

        dropped: list[bool] = []

        def lose_answer(src: int, dst: int, action: Any, args: tuple[Any, ...]) -> bool:
            answers = args[0] if args else None
            if dropped or src < CONTROLLER_BASE or dst != 1 or not isinstance(answers, list):
                return False
            answer = answers[0]
            assert isinstance(answer, IsrResult)
            if answer.error is not None or answer.registration is None:
                return False
            if 2 not in answer.registration.isr:
                return False
            dropped.append(True)
            return True

        net.drop_rules.append(lose_answer)
        leader.metadata.stall(world.now_ms + 60_000)
        net.heal(1, 2)
        wait_for(world, lambda: isr(world) == {1, 2, 3}, 10_000, "the controller takes b2 back")
        refused = world.controller.stats.refused
        wait_for(
            world,
            lambda: refused["AlterPartition INVALID_UPDATE_VERSION"] > 0,
            5_000,
            "b1's retry is refused",
        )
        led = leader.partition_of(TP)
        assert led is not None and led.leader is not None
        assert 2 in led.leader.maximal_isr, "the refusal dropped the expansion"
        net.cut(1, 2)  # b2 falls behind again
        world.run_until(world.now_ms + 1_500)
        leader_log, lagging_log = leader.log_of(TP), lagging.log_of(TP)
        assert leader_log is not None and lagging_log is not None
        world.trace.record(
            f"SCENARIO: b1 hw {leader_log.high_watermark}, b2 log end {lagging_log.log_end_offset}"
        )
        leader.crash()
        wait_for(
            world,
            lambda: (p := lagging.partition_of(TP)) is not None and p.is_leader,
            10_000,
            "b2 leads",
        )
        world.run_until(world.now_ms + 1_000)


# --- follower-stuck-at-mid-batch-log-start (fixed) ------------------------------------------


def restart_inside_a_batch(echo: bool = False) -> None:
    """b3 is down while DeleteRecords moves the leader's log start into the middle of a
    batch. Back, b3 is behind the log start: restart_at puts its empty log there; the leader
    sends the whole batch, which starts below it. The bug was that the append was refused,
    again and again, and b3 never caught up; now (as Kafka) the empty log restarts at the
    batch's base offset and b3 rejoins the ISR."""
    with quiet_world(echo, produce_every_ms=5) as world:
        follower = world.brokers[3]
        world.run_until(300)
        end = log_end(follower)
        follower.crash()
        leader = world.brokers[1]
        partition = leader.partition_of(TP)
        assert partition is not None
        wait_for(world, lambda: partition.log.high_watermark > end + 50, 10_000, "records pile up")
        target = None
        data = partition.log.read(end + 10, 1 << 20, max_offset=partition.log.high_watermark)
        for header, _ in decode_batches(data):
            if header.base_offset >= end + 10 and header.last_offset_delta >= 1:
                target = header.base_offset + 1
                break
        assert target is not None, "no batch of more than one record"
        start = leader.delete_records(TP, target)
        world.checker.of(TP).deleted_before = start
        world.trace.record(f"SCENARIO: DeleteRecords before {target} (inside a batch)")
        follower.start()
        wait_for(
            world,
            lambda: (
                log_end(follower) >= partition.log.high_watermark > target
                and isr(world) == {1, 2, 3}
            ),
            10_000,
            "b3 catches up and is back in the ISR",
        )


# --- deleted-records-resurrected (fixed but for a narrow window) -------------------------------


def append_directly(
    world: World, broker_id: int, values: list[str], one_batch: bool = False
) -> None:
    """Appends one single-record batch per value (or, `one_batch`, one batch of them all) on
    `broker_id`, which must lead, as an acks=1 produce would (the scenario needs exact batch
    boundaries, which the simulated producers draw at random)."""
    partition = world.brokers[broker_id].partition_of(TP)
    assert partition is not None and partition.is_leader, f"b{broker_id} does not lead"
    records = [Record(i, world.wall_ms, None, v.encode()) for i, v in enumerate(values)]
    for batch in [records] if one_batch else [[r] for r in records]:
        partition.append_as_leader(encode_batch(batch), 1, world.wall_ms)
    world.trace.record(
        f"SCENARIO: b{broker_id} appends {values} (le {partition.leader_epoch}"
        + (", one batch)" if one_batch else ")")
    )


def leads(world: World, broker_id: int) -> Callable[[], bool]:
    def check() -> bool:
        reg = world.controller.registration(TP)
        p = world.brokers[broker_id].partition_of(TP)
        return (
            reg is not None
            and reg.leader == broker_id
            and p is not None
            and p.is_leader
            and p.leader_epoch == reg.leader_epoch
        )

    return check


def _deleted_records_story(echo: bool, crash_before_checkpoint: bool) -> None:
    """b1 leads epoch 0 and appends four records nobody else gets (cut off from b2, b3 is
    down), then crashes. b2 leads (ISR {2}, min ISR 1) and writes eight other records at
    the same offsets and on; DeleteRecords before 4 moves its log start to 4, and its leader
    epoch cache, persisted at once, now says its epoch starts at 4. b2 crashes and comes back
    and leads again; b1 comes back and follows b2: it fetches at 4 with last epoch 0, and
    b2's cache, with no entry for epoch 0 or below, answers that epoch 0 ends at 4 (Kafka's
    endOffsetFor rule): no divergence. If b2's log start 4 was durable, b1 then moves its own
    log start to 4 and its four stale records are gone; if b2 reopened with the old one,
    0-3 are readable on b2 again and b1 keeps its own 0-3 under the high watermark: records
    that never were committed, different from the leader's: DIVERGED (invariant (3))."""
    with quiet_world(
        echo,
        producers=0,
        min_insync_replicas=1,
        hw_checkpoint_ms=600_000,  # no periodic checkpoint within the story
    ) as world:
        net = world.network
        b1, b2, b3 = (world.brokers[b] for b in (1, 2, 3))
        world.run_until(500)
        b3.crash()
        net.cut(1, 2)
        append_directly(world, 1, [f"stale-{i}" for i in range(4)])
        world.run_until(world.now_ms + 50)
        b1.crash()
        wait_for(world, leads(world, 2), 10_000, "b2 leads")
        net.heal(1, 2)
        append_directly(world, 2, [f"new-{i}" for i in range(8)])
        partition = replica(b2)
        wait_for(world, lambda: partition.log.high_watermark == 8, 5_000, "b2's hw reaches 8")
        start = b2.delete_records(TP, 4)
        world.checker.of(TP).deleted_before = start
        world.trace.record(
            f"SCENARIO: DeleteRecords before 4 on b2: log start {start}, epochs "
            f"{partition.log.leader_epochs.entries}"
        )
        if not crash_before_checkpoint:
            world.run_until(world.now_ms + 50)  # the checkpoint is written, DeleteRecords answers
        b2.crash()
        b2.start()
        reopened = b2.log_of(TP)
        assert reopened is not None
        world.trace.record(f"SCENARIO: b2 reopened with log start {reopened.log_start_offset}")
        wait_for(world, leads(world, 2), 10_000, "b2 leads again")
        b1.start()
        wait_for(
            world,
            lambda: high_watermark(b1) >= 8,
            10_000,
            "b1 catches up with b2",
        )
        world.run_until(world.now_ms + 500)
        b1_log = b1.log_of(TP)
        assert b1_log is not None and b1_log.log_start_offset == 4, "b1 kept deleted records"


def deleted_records_stay_deleted(echo: bool = False) -> None:
    """deleted-records-resurrected, fixed for a crash after DeleteRecords answered: its
    log start was written to the checkpoint first."""
    _deleted_records_story(echo, crash_before_checkpoint=False)


def crash_before_delete_records_is_durable(echo: bool = False) -> None:
    """The window the fix leaves: b2 crashes after delete_records_before (the truncated epoch
    cache is on disk) and before the checkpoint write that DeleteRecords awaits."""
    _deleted_records_story(echo, crash_before_checkpoint=True)


# --- follower-stuck-below-a-mid-batch-log-start ----------------------------------------------


def stale_follower_inside_a_batch(echo: bool = False) -> None:
    """b1 leads epoch 0 and appends two records nobody else gets (cut off from b2, b3 is
    down), then crashes with log end 2. b2 leads epoch 1 from offset 0 and appends one batch
    of four records, 0-3; DeleteRecords before 2, inside that batch: log start 2, and b2's
    leader epoch cache now says epoch 1 starts at 2 (where it started, 0, is gone). b1 comes
    back and fetches at 2 with last epoch 0; b2's cache, with no entry for epoch 0 or below,
    answers that epoch 0 ends at 2 (endOffsetFor): no divergence. b2 sends the batch holding
    offset 2, which starts at 0, below b1's log end; b1's log is not empty, so
    Partition.append_as_follower refuses it, and again at every fetch: b1 never catches up
    (Kafka's follower, which also restarts only an empty log at the batch, fails the
    partition the same way)."""
    with quiet_world(echo, producers=0, min_insync_replicas=1) as world:
        net = world.network
        b1, b2, b3 = (world.brokers[b] for b in (1, 2, 3))
        world.run_until(500)
        b3.crash()
        net.cut(1, 2)
        append_directly(world, 1, ["stale-0", "stale-1"])
        world.run_until(world.now_ms + 50)
        b1.crash()
        wait_for(world, leads(world, 2), 10_000, "b2 leads")
        net.heal(1, 2)
        append_directly(world, 2, [f"new-{i}" for i in range(4)], one_batch=True)
        partition = replica(b2)
        wait_for(world, lambda: partition.log.high_watermark == 4, 5_000, "b2's hw reaches 4")
        start = b2.delete_records(TP, 2)
        world.checker.of(TP).deleted_before = start
        world.trace.record(
            f"SCENARIO: DeleteRecords before 2 on b2: log start {start}, epochs "
            f"{partition.log.leader_epochs.entries}"
        )
        b1.start()
        wait_for(
            world,
            lambda: log_end(b1) >= 4,
            10_000,
            "b1 catches up with b2",
        )


SCENARIOS: dict[str, Callable[..., None]] = {
    "lost-expansion-answer": lost_expansion_answer,
    "restart-inside-a-batch": restart_inside_a_batch,
    "deleted-records-stay-deleted": deleted_records_stay_deleted,
    "crash-before-delete-records-is-durable": crash_before_delete_records_is_durable,
    "stale-follower-inside-a-batch": stale_follower_inside_a_batch,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.replication_sim.scenarios")
    parser.add_argument("name", choices=sorted(SCENARIOS))
    parser.add_argument("--trace", action="store_true")
    args = parser.parse_args(argv)
    try:
        SCENARIOS[args.name](echo=args.trace)
    except AssertionError as error:
        print(f"{args.name}: {type(error).__name__}: {error}")
        return 1
    print(f"{args.name}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
