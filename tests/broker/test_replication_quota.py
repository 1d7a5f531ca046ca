"""Replication throttles (KIP-73) without processes: the quota's bucket and throttled
partitions (broker/replication_quota.py), the settings a broker takes from its metadata
image (broker/replication_settings.py), and both fetch paths over real partitions: the
leader answering a follower's fetch (ReplicaManager) and the follower planning its fetch
(broker/follower_fetch.py). Time is a hand-moved clock."""

from __future__ import annotations

import asyncio
import os
import time
import zlib
from typing import Any

import pytest

from broker.follower_fetch import FetchRequest, FetchResponse, FetchStream, PartitionFetch
from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from broker.replica_fetcher import FetcherManager
from broker.replica_manager import ReplicaManager
from broker.replica_wire import response_of
from broker.replication_quota import (
    ALL,
    MAX_DELAY_S,
    UNLIMITED,
    ReplicationQuota,
    throttled_partitions,
)
from broker.replication_settings import ReplicationSettings
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from storage.clock import ManualClock
from storage.log import Log
from strom_api.v1 import metadata_pb2 as pb
from strom_api.v1 import replica_pb2
from tests.broker.test_partition import (
    NOW,
    TOPIC_ID,
    batch,
    elect,
    open_partition,
    topic_settings,
)

MIB = 1 << 20


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --- the quota -------------------------------------------------------------------------------


def test_the_bucket_starts_empty_lets_one_fetch_overshoot_then_waits_for_the_debt() -> None:
    clock = Clock()
    quota = ReplicationQuota(8 * MIB, clock)
    assert not quota.exceeded()  # nothing moved yet: the first fetch may go
    quota.record(MIB)
    assert quota.exceeded() and quota.delay_s() == 0.125
    clock.now += 0.0625
    assert quota.exceeded() and quota.delay_s() == 0.0625
    clock.now += 0.0625
    assert not quota.exceeded() and quota.delay_s() == 0
    # Idle, it saves up one second of the rate at most.
    clock.now += 60
    quota.record(8 * MIB)
    assert not quota.exceeded()
    quota.record(1)
    assert quota.exceeded()
    assert quota.stats.recorded_bytes == 9 * MIB + 1


def test_an_unlimited_quota_is_never_exceeded_and_a_new_rate_keeps_the_debt() -> None:
    clock = Clock()
    quota = ReplicationQuota(UNLIMITED, clock)
    quota.record(10**12)
    assert not quota.exceeded()
    quota.update_rate(MIB)  # a throttle set now starts from an empty bucket
    assert not quota.exceeded()
    quota.record(2 * MIB)
    assert quota.delay_s() == MAX_DELAY_S  # 2 s of debt: looked at again within a second
    quota.update_rate(4 * MIB)
    assert quota.delay_s() == pytest.approx(0.5)
    quota.update_rate(0)  # nothing more moves once in debt
    clock.now += 3600
    assert quota.exceeded() and quota.delay_s() == MAX_DELAY_S


def test_throttled_replicas_are_star_or_this_brokers_pairs() -> None:
    assert throttled_partitions("*", 7) is ALL
    assert throttled_partitions(" * ", 7) is ALL
    assert throttled_partitions("0:1,1:2,2:1, 3:1", 1) == {0, 2, 3}
    assert throttled_partitions("0:1,1:2", 3) == frozenset()
    assert throttled_partitions("", 1) == frozenset()


def test_only_throttled_replicas_out_of_sync_are_held_back() -> None:
    clock = Clock()
    quota = ReplicationQuota(MIB, clock)
    quota.set_throttled([("orders", frozenset({0})), ("all", ALL), ("none", frozenset())])
    assert quota.throttled_topics() == {"orders": frozenset({0}), "all": ALL}
    quota.record(2 * MIB)
    assert quota.should_throttle("orders", 0, in_sync=False)
    assert quota.should_throttle("all", 41, in_sync=False)
    assert not quota.should_throttle("orders", 0, in_sync=True)  # never shrinks an ISR
    assert not quota.should_throttle("orders", 1, in_sync=False)
    assert not quota.should_throttle("other", 0, in_sync=False)
    clock.now += 2
    assert not quota.should_throttle("orders", 0, in_sync=False)
    assert quota.stats.left_out == 2


# --- the settings a broker takes at runtime -------------------------------------------------


def image_of(records: list[Any]) -> MetadataImage:
    return MetadataDelta(EMPTY_IMAGE).replay_all(records).apply(len(records), 1)


def config(resource_type: int, name: str, key: str, value: str) -> pb.ConfigRecord:
    return pb.ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=value)


def test_per_broker_values_over_the_cluster_default_over_server_properties() -> None:
    static = ReplicaConfig(
        num_fetchers=2, fetch_max_bytes=5000, follower_replication_throttled_rate=9
    )
    settings = ReplicationSettings(1, static)
    changes: list[tuple[int, int]] = []
    settings.on_change.append(
        lambda: changes.append((settings.num_fetchers, settings.fetch_max_bytes))
    )
    assert (settings.num_fetchers, settings.fetch_max_bytes) == (2, 5000)
    assert (settings.leader.rate, settings.follower.rate) == (UNLIMITED, 9)

    settings.update(
        image_of(
            [
                config(pb.BROKER, "", "num.replica.fetchers", "3"),
                config(pb.BROKER, "", "leader.replication.throttled.rate", "1000"),
                config(pb.BROKER, "1", "leader.replication.throttled.rate", "2000"),
                config(pb.BROKER, "2", "replica.fetch.max.bytes", "77"),  # another broker's
                config(pb.TOPIC, "orders", "leader.replication.throttled.replicas", "0:1,1:2"),
                config(pb.TOPIC, "orders", "follower.replication.throttled.replicas", "1:1"),
                config(pb.TOPIC, "logs", "follower.replication.throttled.replicas", "*"),
            ]
        )
    )
    assert (settings.num_fetchers, settings.fetch_max_bytes) == (3, 5000)
    assert changes == [(3, 5000)]
    assert (settings.leader.rate, settings.follower.rate) == (2000, 9)
    assert settings.leader.throttled_topics() == {"orders": frozenset({0})}
    assert settings.follower.throttled_topics() == {"orders": frozenset({1}), "logs": ALL}

    settings.update(EMPTY_IMAGE)  # every dynamic value deleted: server.properties again
    assert (settings.num_fetchers, settings.leader.rate, settings.follower.rate) == (
        2,
        UNLIMITED,
        9,
    )
    assert settings.leader.throttled_topics() == {}
    assert changes == [(3, 5000), (2, 5000)]


# --- the leader serving a follower's fetch ---------------------------------------------------


def leader_with_data(tmp_path: os.PathLike[str], isr: list[int]) -> Partition:
    leader = open_partition(os.path.join(tmp_path, "leader"), 1)
    elect([leader], leader=1, epoch=1, isr=isr, replicas=[1, 2])
    for _ in range(4):
        leader.append_as_leader(batch(10, size=1000), acks=1, now_ms=NOW)
    return leader


def manager_leading(partition: Partition, settings: ReplicationSettings) -> ReplicaManager:
    async def no_controller(method: str, request: Any) -> None:
        return None

    manager = ReplicaManager(1, None, ReplicaConfig(), {}, no_controller, lambda: 1)  # type: ignore[arg-type]
    manager.partitions[partition.topic, partition.index] = partition
    manager.by_id[partition.topic_id, partition.index] = partition
    manager.replication = settings
    return manager


def follower_fetch(
    max_wait_ms: int = 0,
    offset: int = 0,
    topic_id: bytes = TOPIC_ID,
    leader_epoch: int = 1,
    max_bytes: int = 10 * MIB,
) -> FetchRequest:
    """Broker 2's sessionless fetch of partition 0 of `topic_id` from `offset` (its last
    batch of epoch 1, if any), knowing the leader by `leader_epoch`."""
    return FetchRequest(
        correlation_id=0,
        broker_epoch=-1,
        replica_id=2,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        partitions=(
            PartitionFetch(
                topic_id=topic_id,
                partition=0,
                current_leader_epoch=leader_epoch,
                fetch_offset=offset,
                last_fetched_epoch=1 if offset else -1,
                log_start_offset=0,
                partition_max_bytes=MIB,
            ),
        ),
    )


@pytest.mark.parametrize(
    ("throttled", "isr", "held_back"),
    [
        ("0:1", [1], True),  # a lagging follower of a throttled replica: nothing this time
        ("*", [1], True),
        ("0:1", [1, 2], False),  # in the ISR: never slowed
        ("0:3", [1], False),  # throttled on another broker only
        ("", [1], False),
    ],
)
def test_the_leader_answers_no_records_for_throttled_replicas_while_over_its_rate(
    tmp_path: os.PathLike[str], throttled: str, isr: list[int], held_back: bool
) -> None:
    clock = Clock()
    settings = ReplicationSettings(1, ReplicaConfig(leader_replication_throttled_rate=1000), clock)
    settings.update(
        image_of([config(pb.TOPIC, "orders", "leader.replication.throttled.replicas", throttled)])
    )
    leader = leader_with_data(tmp_path, isr)

    async def scenario() -> None:
        manager = manager_leading(leader, settings)
        [(_, _, first)], was_held = manager._read_for_follower(follower_fetch())
        assert first.records and not was_held  # the bucket was not in debt yet
        [(_, _, second)], was_held = manager._read_for_follower(follower_fetch())
        assert (was_held, second.records == b"") == (held_back, held_back)
        assert second.high_watermark == first.high_watermark  # the follower still learns it
        recorded = len(first.records) + (0 if held_back else len(second.records))
        expected = recorded if throttled in ("0:1", "*") else 0
        assert settings.leader.stats.recorded_bytes == expected
        await manager.stop()

    asyncio.run(scenario())


def test_a_held_back_fetch_is_answered_once_the_debt_is_paid_not_at_max_wait(
    tmp_path: os.PathLike[str],
) -> None:
    settings = ReplicationSettings(1, ReplicaConfig(leader_replication_throttled_rate=100_000))
    settings.update(
        image_of([config(pb.TOPIC, "orders", "leader.replication.throttled.replicas", "*")])
    )
    leader = leader_with_data(tmp_path, [1])

    async def scenario() -> None:
        manager = manager_leading(leader, settings)
        settings.leader.record(20_000)  # 0.2 s of debt
        start = time.monotonic()
        [answer] = (await manager.replica_fetch(follower_fetch(max_wait_ms=5000))).partitions
        took = time.monotonic() - start
        assert answer.records, "answered empty: the long poll gave up on the throttled data"
        assert 0.15 < took < 2, took
        await manager.stop()

    asyncio.run(scenario())


# --- the follower planning its fetch ---------------------------------------------------------


def follower_of(tmp_path: os.PathLike[str], index: int = 0) -> Partition:
    settings = topic_settings()
    log = Log.open(
        os.path.join(tmp_path, f"follower-{index}"), settings.log, clock=ManualClock(NOW)
    )
    follower = Partition("orders", index, TOPIC_ID, log, 2, settings)
    elect([follower], leader=1, epoch=1, isr=[1], replicas=[1, 2])
    return follower


def test_the_follower_leaves_out_throttled_lagging_partitions_while_over_its_rate(
    tmp_path: os.PathLike[str],
) -> None:
    clock = Clock()
    settings = ReplicationSettings(
        2, ReplicaConfig(follower_replication_throttled_rate=1000, fetch_max_bytes=4096), clock
    )
    settings.update(
        image_of([config(pb.TOPIC, "orders", "follower.replication.throttled.replicas", "0:2")])
    )
    throttled, free = follower_of(tmp_path, 0), follower_of(tmp_path, 1)
    patient = ReplicaConfig(fetch_wait_max_ms=5000)
    stream = FetchStream((1, 0), "127.0.0.1:1", 2, patient, settings)
    for p in (throttled, free):
        stream.add(p)
    assert set(stream.plan(0)) == {(TOPIC_ID, 0), (TOPIC_ID, 1)}
    request = fetch(stream)
    assert [p.partition_max_bytes for p in request.partitions] == [4096, 4096]

    settings.follower.record(500)  # half a second of debt
    request = fetch(stream)
    assert [p.partition for p in request.partitions] == [1], (
        "the throttled partition was fetched over the rate"
    )
    assert request.max_wait_ms == 501  # the leader may not hold the fetch past the debt
    stream.lag[TOPIC_ID, 0] = 0  # caught up with the leader's high watermark: in sync
    assert set(stream.plan(0)) == {(TOPIC_ID, 0), (TOPIC_ID, 1)}
    stream.lag[TOPIC_ID, 0] = 5
    assert set(stream.plan(0)) == {(TOPIC_ID, 1)}
    clock.now += 0.5
    assert set(stream.plan(0)) == {(TOPIC_ID, 0), (TOPIC_ID, 1)}

    # A dynamic replica.fetch.max.bytes applies to the next fetch.
    settings.update(image_of([config(pb.BROKER, "2", "replica.fetch.max.bytes", "12345")]))
    request = fetch(stream)
    assert [p.partition_max_bytes for p in request.partitions] == [12345, 12345]


def fetch(stream: FetchStream) -> FetchRequest:
    """The stream's next fetch, answered with nothing so that the next one may go."""
    request = stream.next_fetch(0, broker_epoch=1)
    assert request is not None
    stream.answered(request.correlation_id, FetchResponse(), 0)
    return request


def test_the_follower_records_the_throttled_bytes_and_its_lag(tmp_path: os.PathLike[str]) -> None:
    settings = ReplicationSettings(2, ReplicaConfig(follower_replication_throttled_rate=10**6))
    settings.update(
        image_of([config(pb.TOPIC, "orders", "follower.replication.throttled.replicas", "*")])
    )
    leader = leader_with_data(tmp_path, [1])
    follower = follower_of(tmp_path)
    stream = FetchStream((1, 0), "127.0.0.1:1", 2, ReplicaConfig(), settings)
    key = (TOPIC_ID, 0)
    stream.add(follower)
    request = stream.next_fetch(0, broker_epoch=1)
    assert request is not None
    read = leader.read_for_follower(2, 0, -1, 1, 2500, NOW)
    answer = replica_pb2.ReplicaFetchResponse.Partition(
        topic_id=TOPIC_ID,
        partition=0,
        records=read.records,
        high_watermark=40,
        log_start_offset=0,
        log_end_offset=40,
    )
    response = replica_pb2.ReplicaFetchResponse(partitions=[answer])
    stream.answered(request.correlation_id, response_of(response), 0)
    assert follower.log.log_end_offset < 40
    assert stream.lag[key] == 40 - follower.log.log_end_offset
    assert settings.follower.stats.recorded_bytes == len(read.records)


# --- dynamic num.replica.fetchers ------------------------------------------------------------


def test_a_new_num_replica_fetchers_rehashes_the_partitions_and_stops_idle_fetchers(
    tmp_path: os.PathLike[str],
) -> None:
    settings = ReplicationSettings(2, ReplicaConfig())

    async def scenario() -> None:
        manager = FetcherManager(2, ReplicaConfig(), lambda: 1, lambda _: "127.0.0.1:1", settings)
        followers = [follower_of(tmp_path, i) for i in range(8)]
        for p in followers:
            manager.follow(p)
        assert set(manager.fetchers) == {(1, 0)}
        settings.update(image_of([config(pb.BROKER, "2", "num.replica.fetchers", "3")]))
        hashed = {zlib.crc32(f"orders-{i}".encode()) % 3 for i in range(8)}
        assert {index for _, index in manager.fetchers} == hashed == {1, 2}
        assert sum(len(f.partitions) for f in manager.fetchers.values()) == 8
        settings.update(image_of([config(pb.BROKER, "", "num.replica.fetchers", "1")]))
        assert set(manager.fetchers) == {(1, 0)}
        assert len(manager.fetchers[1, 0].partitions) == 8
        await manager.stop()

    asyncio.run(scenario())
