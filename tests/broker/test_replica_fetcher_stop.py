"""A node's stop waits for its replica fetchers, so a fetcher must end when stopped, whatever
it was doing: a stop that waited on one for ever got the node killed by `make run`'s
supervisor (and CI failed)."""

from __future__ import annotations

import asyncio
import os

from test_partition import elect
from test_replication_quota import follower_of

from broker.follower_fetch import FetchStream
from broker.replica_config import ReplicaConfig
from broker.replica_fetcher import FetcherManager, ReplicaFetcher
from broker.replication_settings import ReplicationSettings


def test_a_fetcher_woken_in_the_turn_it_is_stopped_still_stops() -> None:
    # Python 3.11's asyncio.wait_for returns the awaited result when the result and the
    # cancel land in the same loop turn, dropping the cancel: the fetcher, waiting for work,
    # went on waiting and stop() never returned. Each count of turns between the wake-up
    # and the stop puts the cancel at another point of that wait.
    async def scenario() -> None:
        for turns in range(8):
            config = ReplicaConfig()
            stream = FetchStream((1, 0), "127.0.0.1:1", 2, config, ReplicationSettings(2, config))
            fetcher = ReplicaFetcher(stream, lambda: 1)
            fetcher.wake()
            await asyncio.sleep(0.05)  # waiting for a partition to fetch
            fetcher.wake()
            for _ in range(turns):
                await asyncio.sleep(0)
            # Not asyncio.timeout: stop() suppresses the CancelledError of the task it
            # awaits, which would hide the timeout's cancel too.
            done, _ = await asyncio.wait({asyncio.create_task(fetcher.stop())}, timeout=5)
            assert done, f"the fetcher was still running 5 s after stop() ({turns} turns)"

    asyncio.run(scenario())


def test_no_fetcher_starts_once_the_manager_is_stopping(tmp_path: os.PathLike[str]) -> None:
    # Metadata keeps arriving while a node stops (its peers stop too and leaders move); a
    # partition followed then must not start a fetcher that nothing will ever stop.
    async def scenario() -> None:
        config = ReplicaConfig()
        manager = FetcherManager(
            2,
            config,
            lambda: 1,
            lambda leader: f"127.0.0.{leader}:1",
            ReplicationSettings(2, config),
        )
        manager.follow(follower_of(tmp_path, 0))
        stopping = asyncio.create_task(manager.stop())
        await asyncio.sleep(0)
        moved = follower_of(tmp_path, 1)
        elect([moved], leader=3, epoch=2, isr=[3], replicas=[3, 2])  # a stream to a new leader
        manager.follow(moved)
        done, _ = await asyncio.wait({stopping}, timeout=5)
        assert done
        running = [t for t in asyncio.all_tasks() if "ReplicaFetcher._run" in repr(t)]
        assert running == []

    asyncio.run(scenario())
