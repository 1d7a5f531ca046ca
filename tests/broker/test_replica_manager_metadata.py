"""ReplicaManager acting on metadata deltas over real logs (a LogManager on disk), as
server/node.py applies them: the work a delta causes follows what it names, not every
replica the broker holds.

- The aggregate gauges (leaders, under-replicated, under and at min.insync.replicas) are
  counts the partitions keep as they change; after any sequence of creations, ISR and
  leader changes, config changes and deletions they equal a count over every replica.
- A topic's config change gives new settings to that topic's partitions only; a
  cluster-wide dynamic config, to all.
- Offline replicas (reported in every heartbeat) are none while every log directory is
  online, and the failed directory's replicas once it failed.
- ISR expiration visits the led partitions: a follower at the leader's log end stays in.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from broker import replica_manager as replica_manager_module
from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from broker.replica_manager import ReplicaManager, now_ms
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage, PartitionRegistration
from storage.log_manager import LogManager
from strom_api.records import Record, encode_batch
from strom_api.v1 import metadata_pb2 as pb
from tests.metadata.image_builder import build, topic_id

ME = 1


def ids(*values: int) -> pb.BrokerIdList:
    return pb.BrokerIdList(ids=values)


def replica_manager(tmp_path: os.PathLike[str], dirs: int = 1) -> ReplicaManager:
    async def no_controller(method: str, request: Any) -> None:
        return None

    logs = LogManager([os.path.join(tmp_path, f"d{i}") for i in range(dirs)])
    logs.startup()
    return ReplicaManager(ME, logs, ReplicaConfig(), {}, no_controller, lambda: 1)


def apply(manager: ReplicaManager, image: MetadataImage, *records: Any) -> MetadataImage:
    """One delta, as server/node.py's _apply_batch applies it."""
    delta = MetadataDelta(image).replay_all(records)
    new = delta.apply(image.offset + len(records), 1)
    for topic, index in manager.detach(delta):
        manager.log_manager.delete_log(topic, index)
    manager.create_logs(delta, new)
    manager.attach(delta, new)
    return new


def create(image: MetadataImage, name: str, placements: list[tuple[int, ...]]) -> list[Any]:
    """A topic whose partition i has replicas placements[i], the first leading, full ISR."""
    records: list[Any] = [pb.TopicRecord(name=name, topic_id=topic_id(name))]
    for index, replicas in enumerate(placements):
        registration = PartitionRegistration(replicas, replicas, replicas[0], 0, 0)
        records.append(registration.record(topic_id(name), index))
    return records


def brute_force(manager: ReplicaManager) -> dict[str, int]:
    leaders = [p for p in manager.partitions.values() if p.is_leader]
    return {
        "leaders": len(leaders),
        "under_replicated": sum(len(p.isr) < len(p.replicas) for p in leaders),
        "under_min_isr": sum(len(p.isr) < p.settings.min_insync_replicas for p in leaders),
        "at_min_isr": sum(len(p.isr) == p.settings.min_insync_replicas for p in leaders),
    }


def counted(manager: ReplicaManager) -> dict[str, int]:
    counts = manager.counts
    return {
        "leaders": counts.leaders,
        "under_replicated": counts.under_replicated,
        "under_min_isr": counts.under_min_isr,
        "at_min_isr": counts.at_min_isr,
    }


def test_the_aggregate_gauges_follow_every_change(tmp_path):
    manager = replica_manager(tmp_path)
    image = build({})
    # Leads orders-0 and -1, follows orders-2, holds no replica of orders-3.
    image = apply(manager, image, *create(image, "orders", [(1, 2, 3), (1, 2), (2, 1, 3), (2, 3)]))
    assert (
        counted(manager)
        == brute_force(manager)
        == {
            "leaders": 2,
            "under_replicated": 0,
            "under_min_isr": 0,
            "at_min_isr": 0,
        }
    )
    orders = topic_id("orders")
    image = apply(
        manager,
        image,
        pb.PartitionChangeRecord(partition_id=0, topic_id=orders, isr=ids(1, 2)),
        pb.ConfigRecord(
            resource_type=pb.TOPIC, resource_name="orders", name="min.insync.replicas", value="2"
        ),
    )
    assert counted(manager) == brute_force(manager)
    assert counted(manager)["under_replicated"] == 1 and counted(manager)["at_min_isr"] == 2
    # This broker takes orders-2 over, and loses orders-1 to broker 2 with a shrunk ISR.
    image = apply(
        manager,
        image,
        pb.PartitionChangeRecord(partition_id=2, topic_id=orders, leader=1, isr=ids(1, 3)),
        pb.PartitionChangeRecord(partition_id=1, topic_id=orders, leader=2, isr=ids(2)),
    )
    assert counted(manager) == brute_force(manager)
    assert counted(manager)["leaders"] == 2
    # An ISR change the controller accepted, answered to this leader directly.
    manager.partitions[("orders", 0)].isr_committed((1,), 99)
    assert counted(manager) == brute_force(manager)
    assert counted(manager)["under_min_isr"] == 1
    image = apply(manager, image, *create(image, "audit", [(1, 2, 3)]))
    assert counted(manager) == brute_force(manager)
    image = apply(manager, image, pb.RemoveTopicRecord(topic_id=orders))
    assert (
        counted(manager)
        == brute_force(manager)
        == {
            "leaders": 1,
            "under_replicated": 0,
            "under_min_isr": 0,
            "at_min_isr": 0,
        }
    )
    assert set(manager.counts.led) == {manager.partitions[("audit", 0)]}


def test_a_failed_log_directory_stops_its_replicas_counting_as_led(tmp_path):
    manager = replica_manager(tmp_path, dirs=2)
    image = build({})
    apply(manager, image, *create(image, "orders", [(1, 2, 3)] * 4))
    assert manager.offline_replicas() == []
    failed = manager.partitions[("orders", 0)].log.log_dir
    manager.log_manager.failures.mark_offline(failed, "test")
    stopped = manager.stop_serving_dir(failed)
    in_failed = {(p.topic_id, p.index) for p in stopped}
    assert in_failed and len(in_failed) < 4
    assert set(manager.offline_replicas()) == in_failed
    assert counted(manager) == brute_force(manager)
    assert counted(manager)["leaders"] == 4 - len(in_failed)


def settings_identity(manager: ReplicaManager, topic: str) -> list[int]:
    return [id(p.settings) for (t, _), p in sorted(manager.partitions.items()) if t == topic]


def test_a_topic_config_change_resets_that_topics_partitions_only(tmp_path):
    manager = replica_manager(tmp_path)
    image = build({})
    image = apply(manager, image, *create(image, "orders", [(1, 2, 3)] * 3))
    image = apply(manager, image, *create(image, "audit", [(1, 2, 3)] * 3))
    audit_before = settings_identity(manager, "audit")
    image = apply(
        manager,
        image,
        pb.ConfigRecord(
            resource_type=pb.TOPIC, resource_name="orders", name="retention.ms", value="1000"
        ),
    )
    orders: list[Partition] = [p for (t, _), p in manager.partitions.items() if t == "orders"]
    assert all(p.settings.log.retention_ms == 1000 for p in orders)
    assert all(p.log.config.retention_ms == 1000 for p in orders)
    assert settings_identity(manager, "audit") == audit_before  # not even looked at
    # A cluster-wide default reaches every topic that does not set its own.
    apply(
        manager,
        image,
        pb.ConfigRecord(
            resource_type=pb.BROKER, resource_name="", name="log.retention.ms", value="5000"
        ),
    )
    audit = [p for (t, _), p in manager.partitions.items() if t == "audit"]
    assert all(p.settings.log.retention_ms == 5000 for p in audit)
    assert all(p.settings.log.retention_ms == 1000 for p in orders)


def test_isr_expiration_keeps_caught_up_followers_of_idle_partitions(tmp_path):
    manager = replica_manager(tmp_path)
    image = build({})
    apply(manager, image, *create(image, "orders", [(1, 2, 3), (2, 1, 3)]))
    led = manager.partitions[("orders", 0)]
    assert led.leader is not None
    for follower in (2, 3):
        led.leader.on_follower_fetch(follower, 0, 0, 1)  # at the (empty) log's end

    async def expire() -> None:
        # Long after replica.lag.time.max.ms: nothing to propose, so nothing is sent.
        manager.expire_isr(10 * manager.config.replica_lag_time_max_ms)
        assert led.leader is not None and led.leader.pending is None
        await manager.stop()

    asyncio.run(expire())


def test_a_new_replicas_first_leader_epoch_is_written_with_its_log_not_on_attach(tmp_path):
    manager = replica_manager(tmp_path)
    image = build({})
    records = create(image, "orders", [(1, 2, 3), (2, 1, 3)])
    delta = MetadataDelta(image).replay_all(records)
    new = delta.apply(image.offset + len(records), 1)
    manager.create_logs(delta, new)  # the worker thread's part
    led, followed = (
        manager.log_manager.get_log("orders", 0),
        manager.log_manager.get_log("orders", 1),
    )
    assert led is not None and followed is not None
    assert led.leader_epochs.entries == [(0, 0)] and followed.leader_epochs.entries == []
    written = os.stat(led.leader_epochs.path)
    manager.attach(delta, new)  # the event loop's part: no fsync for it left
    assert manager.partitions[("orders", 0)].is_leader
    after = os.stat(led.leader_epochs.path)
    assert (after.st_ino, after.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)


def test_attach_pauses_every_step_and_a_replica_not_reached_keeps_its_role(tmp_path, monkeypatch):
    monkeypatch.setattr(replica_manager_module, "ATTACH_STEP", 3)
    manager = replica_manager(tmp_path)
    image = build({})
    records = create(image, "orders", [(1, 2, 3)] * 7)
    delta = MetadataDelta(image).replay_all(records)
    new = delta.apply(image.offset + len(records), 1)
    manager.create_logs(delta, new)
    steps = manager.attach_in_steps(delta, new)
    next(steps)
    assert len(manager.partitions) == 3  # the others wait for the next turn of the loop
    next(steps)
    assert len(manager.partitions) == 6
    assert list(steps) == []
    assert len(manager.partitions) == 7 and manager.counts.leaders == 7


def test_an_unanswered_isr_change_is_sent_again_only_for_a_replica_still_served(tmp_path):
    manager = replica_manager(tmp_path)
    image = build({})
    image = apply(manager, image, *create(image, "orders", [(1, 2, 3), (1, 2, 3)]))
    kept, deleted = manager.partitions[("orders", 0)], manager.partitions[("orders", 1)]
    changes = {}
    for partition in (kept, deleted):
        assert partition.leader is not None
        later = now_ms() + 10 * manager.config.replica_lag_time_max_ms  # no follower fetched
        change = partition.leader.isr_change_needed(0, later, lambda b: True)
        assert change is not None
        changes[partition.index] = change
    image = apply(
        manager,
        image,
        pb.PartitionChangeRecord(partition_id=1, topic_id=topic_id("orders"), replicas=ids(2, 3)),
    )
    assert ("orders", 1) not in manager.partitions

    async def resend() -> None:
        manager._resend_isr_change(deleted, changes[1])
        assert not manager.isr_sender.proposals.has_queued  # moved away: not sent again
        manager._resend_isr_change(kept, changes[0])
        assert manager.isr_sender.proposals.has_queued
        await manager.stop()

    asyncio.run(resend())


def test_the_logs_of_a_delta_cost_one_fsync_of_their_log_directory(tmp_path, monkeypatch):
    import storage.log_manager as log_manager_module

    synced: list[str] = []
    real = log_manager_module.fsync_dir
    monkeypatch.setattr(log_manager_module, "fsync_dir", lambda d: (synced.append(d), real(d)))
    manager = replica_manager(tmp_path, dirs=2)
    image = build({})
    records = create(image, "orders", [(1, 2, 3)] * 6)
    delta = MetadataDelta(image).replay_all(records)
    manager.create_logs(delta, delta.apply(image.offset + len(records), 1))
    assert len(manager.log_manager.logs) == 6
    assert sorted(synced) == sorted(manager.log_manager.log_dirs)  # each once, both used


def test_attach_pauses_once_a_step_took_its_time(tmp_path, monkeypatch):
    monkeypatch.setattr(replica_manager_module, "ATTACH_STEP_S", 0.0)  # every replica is slow
    manager = replica_manager(tmp_path)
    image = build({})
    records = create(image, "orders", [(1, 2, 3)] * 3)
    delta = MetadataDelta(image).replay_all(records)
    new = delta.apply(image.offset + len(records), 1)
    manager.create_logs(delta, new)
    steps = manager.attach_in_steps(delta, new)
    next(steps)
    assert len(manager.partitions) == 1
    assert len(list(steps)) == 1 and len(manager.partitions) == 3


def test_a_log_opened_at_start_up_indexes_as_its_topic_says(tmp_path):
    # A broker opens its logs with the defaults before it has the metadata; once a replica
    # takes its topic's configs, the active segment indexes by them too (Kafka opens logs
    # with their topic's configs): index.interval.bytes 0 puts every batch in the index.
    image = build({})
    records = [
        *create(image, "orders", [(1, 2, 3)]),
        pb.ConfigRecord(
            resource_type=pb.TOPIC, resource_name="orders", name="index.interval.bytes", value="0"
        ),
        pb.ConfigRecord(
            resource_type=pb.TOPIC, resource_name="orders", name="segment.index.bytes", value="80"
        ),
    ]
    first = replica_manager(tmp_path)
    apply(first, image, *records)
    first.partitions[("orders", 0)].append_as_leader(encode_batch([Record(0, 1, None, b"v")]), 1, 1)
    first.log_manager.shutdown()
    restarted = replica_manager(tmp_path)
    apply(restarted, image, *records)
    log = restarted.partitions[("orders", 0)].log
    segment = log.active_segment
    assert segment.index.max_entries == 10 and segment.time_index.max_entries == 6
    for _ in range(3):
        restarted.partitions[("orders", 0)].append_as_leader(
            encode_batch([Record(0, 1, None, b"v")]), 1, 1
        )
    assert len(segment.index) == 3 and log.active_segment is segment
