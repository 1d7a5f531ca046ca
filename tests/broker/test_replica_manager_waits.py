"""ReplicaManager as the pump of the purgatory (broker/purgatory.py), on a real event loop
over real partitions: a partition's change wakes what waits on it, the timer answers at the
deadline, and a request whose caller went away leaves nothing parked. A consumer's fetch
holds no pool memory while it waits, and only the records of its answer after."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from broker.consumer_reads import FetchItem
from broker.follower_fetch import FetchRequest
from broker.memory_pool import MemoryPool
from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from broker.replica_manager import ReplicaManager
from broker.replication_settings import ReplicationSettings
from metadata.delta import MetadataDelta
from storage.log_manager import LogManager
from strom_api.v1 import metadata_pb2 as pb
from tests.broker import test_replication_quota as quota_tests
from tests.broker.test_partition import NOW, batch, elect, open_partition, registration
from tests.broker.test_replication_quota import TOPIC_ID
from tests.metadata.image_builder import build, topic_id

KEY = ("orders", 0)


def leading(tmp_path: os.PathLike[str], isr: list[int]) -> tuple[ReplicaManager, Partition]:
    async def no_controller(method: str, request: Any) -> None:
        return None

    partition = open_partition(os.path.join(tmp_path, "leader"), 1)
    elect([partition], leader=1, epoch=1, isr=isr, replicas=[1, 2])
    config = ReplicaConfig()
    manager = ReplicaManager(1, None, config, {}, no_controller, lambda: 1)  # type: ignore[arg-type]
    manager.partitions[KEY] = partition
    manager.by_id[TOPIC_ID, 0] = partition
    manager.replication = ReplicationSettings(1, config)
    partition.on_change = lambda: manager._fire(partition)  # as ReplicaManager._apply wires it
    return manager, partition


def follower_fetch(offset: int, max_wait_ms: int) -> FetchRequest:
    return quota_tests.follower_fetch(max_wait_ms, offset, max_bytes=1 << 20)


def test_a_long_poll_is_answered_when_records_arrive_and_at_its_deadline(tmp_path):
    manager, partition = leading(tmp_path, [1])

    async def scenario() -> None:
        start = time.monotonic()
        [empty] = (await manager.replica_fetch(follower_fetch(0, 100))).partitions
        assert empty.records == b"" and time.monotonic() - start >= 0.09
        poll = asyncio.create_task(manager.replica_fetch(follower_fetch(0, 5_000)))
        await asyncio.sleep(0.05)
        assert manager.purgatory.watched(KEY)
        partition.append_as_leader(batch(2), 1, NOW)
        [answer] = (await asyncio.wait_for(poll, 1)).partitions
        assert answer.records
        assert manager.purgatory.parked() == []
        await manager.stop()

    asyncio.run(scenario())


def test_a_long_poll_whose_caller_went_away_leaves_nothing_parked(tmp_path):
    manager, _ = leading(tmp_path, [1])

    async def scenario() -> None:
        poll = asyncio.create_task(manager.replica_fetch(follower_fetch(0, 5_000)))
        await asyncio.sleep(0.02)
        assert manager.purgatory.parked()
        poll.cancel()
        await asyncio.sleep(0)
        assert manager.purgatory.parked() == [] and not manager.purgatory.watched(KEY)
        assert manager.purgatory.next_wake_ms() is None
        await manager.stop()

    asyncio.run(scenario())


def test_a_hurry_answers_a_parked_follower_fetch_at_once(tmp_path):
    """ReplicaFetchRequest.hurry: the follower follows a partition its fetch out does not ask
    for, and wants the answer now rather than at the end of the long poll."""
    manager, _ = leading(tmp_path, [1])

    async def scenario() -> None:
        polls: list[Any] = []
        poll = asyncio.create_task(manager.replica_fetch(follower_fetch(0, 60_000), polls.append))
        await asyncio.sleep(0.05)
        assert not poll.done() and len(polls) == 1
        manager.hurry(polls[0])
        [answer] = (await asyncio.wait_for(poll, 1)).partitions
        assert answer.error is None and answer.records == b""
        assert manager.purgatory.parked() == [] and manager.purgatory.next_wake_ms() is None
        await manager.stop()

    asyncio.run(scenario())


def test_an_acks_all_produce_completes_when_the_follower_fetch_moves_the_high_watermark(
    tmp_path,
):
    manager, partition = leading(tmp_path, [1, 2])

    async def scenario() -> None:
        produce = asyncio.create_task(manager.produce(-1, 5_000, [("orders", 0, batch(3))]))
        await asyncio.sleep(0.02)
        assert not produce.done() and manager.stats.produce_waiting == 1
        await manager.replica_fetch(follower_fetch(0, 0))  # copies the batch
        await manager.replica_fetch(follower_fetch(3, 0))  # at the log end: the hw moves
        result = (await asyncio.wait_for(produce, 1))[KEY]
        assert result.error is None and result.append is not None
        assert partition.high_watermark == 3 and manager.stats.produce_waiting == 0
        await manager.stop()

    asyncio.run(scenario())


# --- consumer fetches -------------------------------------------------------------------------


def counting_reads(partition: Partition) -> list[int]:
    """The fetch offsets of the partition's consumer reads, as they happen (the real read)."""
    offsets: list[int] = []
    read = partition.read_for_consumer

    def counted(fetch_offset: int, max_bytes: int, current_leader_epoch: int = -1) -> bytes:
        offsets.append(fetch_offset)
        return read(fetch_offset, max_bytes, current_leader_epoch)

    partition.read_for_consumer = counted  # type: ignore[method-assign]
    return offsets


def consumer_fetch(manager: ReplicaManager, max_wait_ms: int = 5_000) -> Any:
    return manager.fetch([FetchItem("orders", 0, 0, 1 << 20)], max_wait_ms, 1, 1 << 20)


def test_a_consumer_long_poll_waits_in_the_purgatory_and_reads_again_when_the_hw_moves(
    tmp_path,
):
    manager, partition = leading(tmp_path, [1, 2])
    reads = counting_reads(partition)

    async def scenario() -> None:
        poll = asyncio.create_task(consumer_fetch(manager))
        await asyncio.sleep(0.02)
        assert manager.purgatory.watched(KEY) and manager.stats.fetch_waiting == 1
        assert manager.memory.in_use == 0  # parked: it holds no memory
        partition.append_as_leader(batch(3), 1, NOW)  # broker 2 has not copied it: hw 0
        await asyncio.sleep(0.02)
        assert not poll.done() and reads == [0]  # not read again: nothing to read yet
        await manager.replica_fetch(follower_fetch(0, 0))  # copies the batch
        await manager.replica_fetch(follower_fetch(3, 0))  # at the log end: the hw moves
        result = (await asyncio.wait_for(poll, 1))[KEY]
        assert result.error is None and result.high_watermark == 3 and reads == [0, 0]
        # The records stay reserved until the caller hands the response over.
        assert manager.memory.in_use == len(result.records) > 0
        manager.memory.release(len(result.records))
        assert manager.purgatory.parked() == [] and manager.stats.fetch_waiting == 0
        await manager.stop()

    asyncio.run(scenario())


def test_a_consumer_long_poll_is_answered_when_leadership_moves(tmp_path):
    manager, partition = leading(tmp_path, [1, 2])

    async def scenario() -> None:
        start = time.monotonic()
        poll = asyncio.create_task(consumer_fetch(manager))
        await asyncio.sleep(0.02)
        elect([partition], leader=2, epoch=2, isr=[1, 2], replicas=[1, 2])
        result = (await asyncio.wait_for(poll, 1))[KEY]
        # The error of a partition this broker no longer leads (this manager has no
        # metadata image, so it names no leader: UNKNOWN_TOPIC_OR_PARTITION).
        assert result.error is not None and not result.records
        assert time.monotonic() - start < 1 and manager.memory.in_use == 0
        await manager.stop()

    asyncio.run(scenario())


def test_a_consumer_long_poll_whose_caller_went_away_leaves_nothing_parked_or_reserved(
    tmp_path,
):
    manager, _ = leading(tmp_path, [1])

    async def scenario() -> None:
        poll = asyncio.create_task(consumer_fetch(manager))
        await asyncio.sleep(0.02)
        parked = manager.purgatory.parked()
        assert parked and manager.memory.in_use == 0
        poll.cancel()
        await asyncio.sleep(0)
        assert manager.purgatory.parked() == [] and not manager.purgatory.watched(KEY)
        assert manager.purgatory.next_wake_ms() is None and manager.stats.fetch_waiting == 0
        # Cancelled while it waits for memory: nothing reserved, nothing parked.
        manager.memory = MemoryPool(100)
        assert manager.memory.try_reserve(100)
        poll = asyncio.create_task(consumer_fetch(manager))
        await asyncio.sleep(0.02)
        assert manager.memory.waiting == 1
        poll.cancel()
        await asyncio.sleep(0)
        assert manager.memory.in_use == 100 and manager.purgatory.parked() == []
        await manager.stop()

    asyncio.run(scenario())


def test_a_debugging_consumers_long_poll_is_answered_when_its_replica_is_deleted(tmp_path):
    manager, partition = leading(tmp_path, [1, 2])
    manager.log_manager = LogManager([os.path.join(tmp_path, "logs")])
    image = build({KEY: registration(2, 2, isr=[1, 2], replicas=[1, 2])})
    manager.image = image
    elect([partition], leader=2, epoch=2, isr=[1, 2], replicas=[1, 2])  # we follow broker 2

    async def scenario() -> None:
        start = time.monotonic()
        item = FetchItem("orders", 0, 0, 1 << 20)
        poll = asyncio.create_task(manager.fetch([item], 5_000, 1, 1 << 20, any_replica=True))
        await asyncio.sleep(0.02)
        assert manager.purgatory.watched(KEY)
        delta = MetadataDelta(image).replay_all([pb.RemoveTopicRecord(topic_id=topic_id("orders"))])
        assert manager.detach(delta) == [KEY]
        result = (await asyncio.wait_for(poll, 1))[KEY]
        # Detached before the new image is attached: "Broker 1 holds no replica".
        assert result.error is not None and result.error.error_name == "NOT_LEADER_OR_FOLLOWER"
        assert time.monotonic() - start < 1 and manager.purgatory.parked() == []
        await manager.stop()

    asyncio.run(scenario())
