"""The broker's background log work on real partitions and a real event loop: retention
deletes expired segments on schedule, compaction keeps the latest value per key with the
swap done on the loop, and a flush is done when flush.ms says so."""

from __future__ import annotations

import asyncio
import time

from broker.log_maintenance import LogMaintenance
from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from broker.topic_settings import TopicSettings
from metadata.image import PartitionRegistration
from storage.config import LogConfig
from storage.log import Log
from strom_api.records import Record, decode_batches, encode_batch


def leader(tmp_path, **config) -> Partition:
    log_config = LogConfig(segment_bytes=300, **config)
    log = Log.open(str(tmp_path / "t-0"), log_config)
    settings = TopicSettings(log=log_config)
    partition = Partition("t", 0, b"i" * 16, log, 1, settings)
    registration = PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0)
    partition.apply_registration(registration, 0, settings)
    return partition


def produce(partition: Partition, key: bytes, value: bytes | None, ts: int | None = None):
    now = int(time.time() * 1000) if ts is None else ts
    partition.append_as_leader(encode_batch([Record(0, now, key, value)]), 1, now)


def values(partition: Partition) -> list[tuple[bytes | None, bytes | None]]:
    out, offset = [], partition.log.log_start_offset
    while offset < partition.log.log_end_offset:
        for header, records in decode_batches(partition.log.read(offset, 1 << 20)):
            out += [(r.key, r.value) for r in records]
            offset = header.next_offset
    return out


def run(coroutine):
    return asyncio.run(coroutine)


def test_retention_deletes_expired_segments_and_moves_the_log_start(tmp_path):
    partition = leader(tmp_path, retention_ms=60_000)
    old = int(time.time() * 1000) - 3_600_000
    for i in range(12):
        produce(partition, b"k%d" % i, b"v" * 40, ts=old)
    produce(partition, b"fresh", b"v" * 40)
    assert len(partition.log.segments) > 3
    changes = []
    partition.on_change = lambda: changes.append(1)
    maintenance = LogMaintenance(lambda: [partition], ReplicaConfig())
    run(maintenance.retention_and_compaction())
    assert maintenance.segments_deleted > 0 and changes
    assert partition.log.log_start_offset > 0
    assert (b"fresh", b"v" * 40) in values(partition)


def test_compaction_keeps_the_latest_value_of_each_key(tmp_path):
    partition = leader(tmp_path, cleanup_policy="compact")
    for round_ in range(6):
        for key in (b"a", b"b", b"c"):
            produce(partition, key, b"%s-%d" % (key, round_))
    produce(partition, b"tail", b"x")
    before = partition.log.log_end_offset
    maintenance = LogMaintenance(lambda: [partition], ReplicaConfig())
    run(maintenance.retention_and_compaction())
    assert maintenance.records_compacted > 0
    kept = values(partition)
    latest = {k: v for k, v in kept}
    assert latest[b"a"] == b"a-5" and latest[b"b"] == b"b-5" and latest[b"c"] == b"c-5"
    assert len(kept) < 19 and partition.log.log_end_offset == before
    # The log still reads and appends after the swap.
    produce(partition, b"a", b"after")
    assert values(partition)[-1] == (b"a", b"after")


def test_a_scheduled_flush_moves_the_recovery_point(tmp_path):
    partition = leader(tmp_path, flush_ms=0)
    produce(partition, b"k", b"v")
    assert partition.log.recovery_point == 0

    async def scheduled() -> None:
        maintenance = LogMaintenance(
            lambda: [partition], ReplicaConfig(flush_scheduler_interval_ms=10)
        )
        maintenance.start()
        await asyncio.sleep(0.2)
        await maintenance.stop()

    run(scheduled())
    assert partition.log.recovery_point == partition.log.log_end_offset == 1


def test_retention_runs_every_log_retention_check_interval_ms(tmp_path):
    partition = leader(tmp_path, retention_ms=60_000)
    old = int(time.time() * 1000) - 3_600_000
    partition.append_as_leader(encode_batch([Record(0, old, b"k", b"v")]), 1, old)

    async def scheduled(interval_ms: int) -> int:
        maintenance = LogMaintenance(
            lambda: [partition], ReplicaConfig(retention_check_interval_ms=interval_ms)
        )
        maintenance.start()
        await asyncio.sleep(0.3)
        await maintenance.stop()
        return maintenance.segments_deleted

    assert run(scheduled(60_000)) == 0  # not yet due
    assert run(scheduled(10)) == 1
    assert partition.log.log_start_offset == 1


def test_an_idle_partition_loses_its_expired_active_segment_but_not_its_producers(tmp_path):
    """Retention takes the last segment too once all of it has expired (Kafka rolls a new
    one first), so an idle topic does not keep its last records forever. The producers'
    state is snapshotted at the roll, so after a crash a retry of the last batch is
    still known as a duplicate although no batch of it is left in the log."""
    partition = leader(tmp_path, retention_ms=60_000)
    old = int(time.time() * 1000) - 3_600_000
    sent = [
        encode_batch(
            [Record(0, old, b"k", b"v%d" % seq)], producer_id=7, producer_epoch=0, base_sequence=seq
        )
        for seq in range(2)
    ]
    for batch in sent:
        partition.append_as_leader(batch, 1, old)
    assert len(partition.log.segments) == 1 and partition.log.log_end_offset == 2
    maintenance = LogMaintenance(lambda: [partition], ReplicaConfig())
    run(maintenance.retention_and_compaction())
    assert maintenance.segments_deleted == 1
    assert partition.log.log_start_offset == partition.log.log_end_offset == 2
    assert values(partition) == []
    partition.log.close()  # a crash: no producer snapshot at shutdown

    reopened = Log.open(str(tmp_path / "t-0"), partition.log.config)
    assert reopened.log_start_offset == 2
    settings = TopicSettings(log=reopened.config)
    restarted = Partition("t", 0, b"i" * 16, reopened, 1, settings)
    registration = PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0)
    restarted.apply_registration(registration, 0, settings)
    retry = restarted.append_as_leader(sent[1], 1, old)
    assert retry.duplicate and (retry.base_offset, retry.next_offset) == (1, 2)
    assert restarted.log.log_end_offset == 2
