"""strom.aio against a real cluster: the async twins produce, consume in a group, commit and
administer from one asyncio event loop, which they never block."""

from __future__ import annotations

import asyncio
import time

import pytest

from strom.aio import AIOAdminClient, AIOConsumer, AIOProducer
from strom.consumer import TopicPartition
from strom.errors import StromError
from tests.client.cluster_helpers import FAST, bootstrap, create_topic


def test_produce_consume_commit_and_admin_on_one_event_loop(cluster):
    create_topic(cluster, "async-orders", partitions=2)
    servers = bootstrap(cluster)

    async def scenario() -> None:
        # A ticker proves the loop keeps running while the clients wait on the network.
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        async with AIOProducer(bootstrap_servers=servers, linger_ms=2) as producer:
            futures = [await producer.send("async-orders", b"v%d" % i) for i in range(200)]
            first = await producer.send_and_wait("async-orders", b"last", partition=1)
            offsets = await asyncio.gather(*futures)
        assert first.partition == 1 and first.offset >= 0
        assert sorted((m.partition, m.offset) for m in offsets) == sorted(
            {(m.partition, m.offset) for m in offsets}
        )
        async with AIOConsumer(
            "async-orders", bootstrap_servers=servers, group_id="async-group", **FAST
        ) as consumer:
            seen: set[bytes] = set()
            deadline = time.monotonic() + 30
            while len(seen) < 201 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    seen.update(r.value for r in records)
            assert seen == {b"v%d" % i for i in range(200)} | {b"last"}
            await consumer.commit()
            ends = {TopicPartition("async-orders", p) for p in range(2)}
            assert consumer.assignment() == ends
            assert [await consumer.committed(tp) for tp in sorted(ends)] == [
                await consumer.position(tp) for tp in sorted(ends)
            ]
        async with AIOAdminClient(bootstrap_servers=servers) as admin:
            assert "async-orders" in await admin.list_topics()
            lag = await admin.consumer_group_lag("async-group")
            assert sum(p.lag for p in lag) == 0
        ticker.cancel()
        assert ticks > 20

    asyncio.run(scenario())


def test_the_admin_client_before_start_says_so():
    async def early() -> None:
        admin = AIOAdminClient(bootstrap_servers="127.0.0.1:9")
        with pytest.raises(StromError) as failed:
            await admin.list_topics()
        assert failed.value.name == "ILLEGAL_STATE"
        assert "AIOAdminClient.list_topics() before start()" in failed.value.message
        with pytest.raises(AttributeError, match="no attribute 'list_topicz'"):
            admin.list_topicz  # noqa: B018 (a mistyped name stays an AttributeError)
        await admin.close()  # closing a client never started is fine

    asyncio.run(early())
