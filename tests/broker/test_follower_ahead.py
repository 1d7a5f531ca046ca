"""A follower whose metadata is ahead of the leader's (broker/follower_reads.follower_ahead),
on a real event loop over real logs: its fetch waits for the leader's metadata instead of
being answered an error that rests the partition at the follower for
replica.fetch.backoff.ms. Before, the first acks=all produce to a new topic waited about a
second whenever a follower learned of the topic before its leader did.

A follower behind the leader (an older epoch, a topic the leader deleted) still hears of it
at once or, for a replica the leader does not hold, at the fetch's deadline."""

from __future__ import annotations

import asyncio
import time

from broker.follower_fetch import FetchRequest
from broker.follower_reads import NEW_REPLICA_KEY
from metadata.image import MetadataImage
from strom_api.error_codes import ErrorCode
from tests.broker.test_partition import NOW, batch, elect
from tests.broker.test_replica_manager_metadata import apply, create, replica_manager
from tests.broker.test_replication_quota import follower_fetch
from tests.metadata.image_builder import build, topic_id

TOPIC = "orders"


def fetch_of(epoch: int, max_wait_ms: int) -> FetchRequest:
    """Broker 2's sessionless fetch of orders-0 from offset 0, knowing leader epoch `epoch`."""
    return follower_fetch(max_wait_ms, topic_id=topic_id(TOPIC), leader_epoch=epoch)


def empty_image() -> MetadataImage:
    return build({})


def test_a_fetch_of_a_replica_not_held_yet_waits_for_it_and_then_for_records(tmp_path):
    manager = replica_manager(tmp_path)

    async def scenario() -> None:
        image = empty_image()
        fetch = asyncio.create_task(manager.replica_fetch(fetch_of(0, 5_000)))
        await asyncio.sleep(0.05)
        assert not fetch.done()  # before: UNKNOWN_TOPIC_OR_PARTITION at once
        assert manager.purgatory.watched(NEW_REPLICA_KEY)
        apply(manager, image, *create(image, TOPIC, [(1, 2)]))  # broker 1 leads orders-0
        await asyncio.sleep(0.05)
        assert not fetch.done()  # held now, no records yet: a long poll like any other
        manager.partitions[TOPIC, 0].append_as_leader(batch(2), 0, NOW)
        [answer] = (await asyncio.wait_for(fetch, 1)).partitions
        assert answer.error is None and answer.records
        assert manager.purgatory.parked() == []
        await manager.stop()

    asyncio.run(scenario())


def test_a_replica_that_never_comes_is_answered_at_the_fetch_deadline(tmp_path):
    manager = replica_manager(tmp_path)

    async def scenario() -> None:
        start = time.monotonic()
        [answer] = (await manager.replica_fetch(fetch_of(0, 100))).partitions
        assert answer.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert time.monotonic() - start >= 0.09
        assert manager.purgatory.parked() == []
        await manager.stop()

    asyncio.run(scenario())


def test_a_newer_leader_epoch_waits_for_the_election_and_an_older_is_fenced_at_once(tmp_path):
    manager = replica_manager(tmp_path)

    async def scenario() -> None:
        image = empty_image()
        apply(manager, image, *create(image, TOPIC, [(1, 2)]))  # epoch 0
        partition = manager.partitions[TOPIC, 0]
        partition.append_as_leader(batch(2), 0, NOW)
        fetch = asyncio.create_task(manager.replica_fetch(fetch_of(1, 5_000)))
        await asyncio.sleep(0.05)
        assert not fetch.done()  # before: UNKNOWN_LEADER_EPOCH at once
        elect([partition], leader=1, epoch=1, isr=[1, 2], replicas=[1, 2])
        [answer] = (await asyncio.wait_for(fetch, 1)).partitions
        assert answer.error is None and answer.records
        [fenced] = (await asyncio.wait_for(manager.replica_fetch(fetch_of(0, 5_000)), 1)).partitions
        assert fenced.error == ErrorCode.FENCED_LEADER_EPOCH
        await manager.stop()

    asyncio.run(scenario())


def test_a_follower_naming_a_newer_epoch_of_a_partition_this_broker_follows_waits(tmp_path):
    """NOT_LEADER_OR_FOLLOWER to a fetch that knows a newer epoch: this broker is about to lead."""
    manager = replica_manager(tmp_path)

    async def scenario() -> None:
        image = empty_image()
        apply(manager, image, *create(image, TOPIC, [(3, 1, 2)]))  # broker 3 leads, epoch 0
        partition = manager.partitions[TOPIC, 0]
        # The same epoch: the follower is not ahead, it is wrong about the leader.
        [wrong] = (await asyncio.wait_for(manager.replica_fetch(fetch_of(0, 5_000)), 1)).partitions
        assert wrong.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
        fetch = asyncio.create_task(manager.replica_fetch(fetch_of(1, 5_000)))
        await asyncio.sleep(0.05)
        assert not fetch.done()
        elect([partition], leader=1, epoch=1, isr=[1, 2], replicas=[3, 1, 2])
        partition.append_as_leader(batch(1), 1, NOW)
        [answer] = (await asyncio.wait_for(fetch, 1)).partitions
        assert answer.error is None and answer.records
        await manager.stop()

    asyncio.run(scenario())
