"""Three Raft drivers over real gRPC on loopback, with real metadata logs on disk.

A leader is elected; appends commit on every node in the same order; a graceful stop of
the leader hands over at once (not after a fetch timeout); the stopped node restarts from its
own disk (a clean restart: no segment scanned) and catches up; nothing committed is lost.
Snapshots: a node left behind while the leader's log moved past it catches up by
downloading the leader's snapshot file in chunks; a node restarts from its own snapshot.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import threading
import time

import pytest
from process_cluster import free_ports, wait_for

from raft.config import RaftConfig
from raft.core import NotLeaderError
from raft.driver import RaftDriver
from raft.messages import LeaderAndEpoch, SnapshotId
from raft.roles import Role
from raft.snapshot_files import file_name
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import Log
from strom_api.records import Record, encode_batch

FAST = RaftConfig(
    election_timeout_ms=300,
    fetch_timeout_ms=600,
    election_backoff_max_ms=200,
    request_timeout_ms=300,
    append_linger_ms=5,
)


class Recorder:
    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.leaders: list[LeaderAndEpoch] = []
        self.loaded: list[SnapshotId] = []

    def handle_load_snapshot(self, snapshot_id: SnapshotId, records) -> None:
        self.loaded.append(snapshot_id)
        self.data = list(records)

    def handle_commit(self, entries) -> None:
        self.data += [e.data for e in entries if not e.control]

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leaders.append(leader)


async def append_via_leader(drivers, records) -> int:
    while True:
        leader = next((d for d in drivers if d.core and d.role is Role.LEADER), None)
        if leader is None:
            await asyncio.sleep(0.02)
            continue
        try:
            return await leader.append(records)
        except NotLeaderError:
            await asyncio.sleep(0.02)


def test_three_voters_elect_replicate_fail_over_and_recover(tmp_path):
    # Followers that were not told of the leader's resignation would wait this fetch timeout
    # before an election: a handover well inside it came from the resignation itself.
    config = dataclasses.replace(FAST, fetch_timeout_ms=10_000)

    async def scenario() -> None:
        ports = free_ports(3)
        voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(ports)}

        def make(node_id: int, recorder: Recorder) -> RaftDriver:
            return RaftDriver(
                node_id, voters, voters[node_id], str(tmp_path / f"n{node_id}"), recorder, config
            )

        recorders = {i: Recorder() for i in voters}
        drivers = {i: make(i, recorders[i]) for i in voters}
        for d in drivers.values():
            await d.start()
        try:
            leader = await wait_for(
                lambda: next((d for d in drivers.values() if d.role is Role.LEADER), None),
                10,
                "a leader",
            )
            first = [b"a%d" % i for i in range(50)]
            for i in range(0, 50, 10):
                await append_via_leader(list(drivers.values()), first[i : i + 10])
            stats = leader.stats()
            assert stats.appends_committed == 50 and stats.commit_latency_avg_ms > 0
            assert stats.core.role == "Leader" and stats.messages_sent > 0
            await wait_for(
                lambda: all(r.data == first for r in recorders.values()),
                10,
                "every node to apply the first 50 records",
            )

            # Graceful stop of the leader: the most caught-up voter takes over quickly.
            started = time.monotonic()
            await leader.stop(graceful=True)
            rest = [d for d in drivers.values() if d is not leader]
            await wait_for(lambda: any(d.role is Role.LEADER for d in rest), 5, "a new leader")
            second = [b"b%d" % i for i in range(20)]
            await append_via_leader(rest, second)
            failover_s = time.monotonic() - started
            assert failover_s < config.fetch_timeout_ms / 2000, f"failover took {failover_s:.2f}s"

            # The old leader restarts from its disk and catches up; nothing is lost.
            old = leader.node_id
            recorders[old] = Recorder()
            drivers[old] = make(old, recorders[old])
            await drivers[old].start()
            # It had stopped cleanly: its metadata log reopens without scanning a segment.
            assert drivers[old].raft_log.log.load_info.recovered_segments == 0
            await wait_for(
                lambda: recorders[old].data == first + second,
                10,
                "the restarted node to apply everything",
            )
            for r in recorders.values():
                assert r.data[: len(first)] == first
        finally:
            for d in drivers.values():
                if d._task is not None and not d._task.done():
                    await d.stop(graceful=False)

    asyncio.run(scenario())


def test_a_node_left_behind_catches_up_from_the_leaders_snapshot(tmp_path):
    # Log-prefix cleanup at every snapshot, and small chunks so the download takes several.
    config = RaftConfig(
        election_timeout_ms=500,
        fetch_timeout_ms=1500,
        election_backoff_max_ms=200,
        request_timeout_ms=500,
        append_linger_ms=5,
        fetch_snapshot_max_bytes=1000,
        max_retention_bytes=0,
    )

    async def scenario() -> None:
        ports = free_ports(3)
        voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(ports)}

        def make(node_id: int, recorder: Recorder) -> RaftDriver:
            return RaftDriver(
                node_id, voters, voters[node_id], str(tmp_path / f"n{node_id}"), recorder, config
            )

        recorders = {i: Recorder() for i in voters}
        drivers = {i: make(i, recorders[i]) for i in voters}
        for d in drivers.values():
            await d.start()
        try:
            leader = await wait_for(
                lambda: next((d for d in drivers.values() if d.role is Role.LEADER), None),
                10,
                "a leader",
            )
            lagging = next(d for d in drivers.values() if d is not leader)
            await lagging.stop(graceful=False)
            rest = [d for d in drivers.values() if d is not lagging]
            records = [b"record-%04d" % i for i in range(300)]
            for i in range(0, 300, 50):
                await append_via_leader(rest, records[i : i + 50])
            # (A retried batch may commit twice if leadership moved meanwhile: Raft without
            # idempotence. What matters is that every node ends with the same history.)
            await wait_for(lambda: set(records) <= set(recorders[leader.node_id].data), 10, "apply")

            # The leader's state machine snapshots all it applied; the log then starts there.
            leader = await wait_for(
                lambda: next((d for d in rest if d.role is Role.LEADER), None), 10, "a leader"
            )
            core = leader.core
            assert core is not None
            history = list(recorders[leader.node_id].data)
            snapshot_id = await leader.create_snapshot(core.applied, history)
            assert (
                tmp_path / f"n{leader.node_id}" / "__cluster_metadata-0" / file_name(snapshot_id)
            ).exists()
            assert core.log.start() == snapshot_id and core.stats().log_start_offset > 0

            # The lagging node restarts with what it had; the entries it needs are gone from
            # the leader's log, so it downloads the snapshot (several 1000-byte chunks).
            node = lagging.node_id
            recorders[node] = Recorder()
            drivers[node] = make(node, recorders[node])
            await drivers[node].start()
            await append_via_leader(list(drivers.values()), [b"after"])
            await wait_for(
                lambda: recorders[node].data == history + [b"after"], 10, "the snapshot and more"
            )
            assert recorders[node].loaded == [snapshot_id]
            assert drivers[node].stats().core.snapshots_fetched == 1
            assert drivers[node].raft_log.start() == snapshot_id

            # The leader restarts from its own snapshot: it loads it before the log's tail.
            old = leader.node_id
            await leader.stop(graceful=True)
            recorders[old] = Recorder()
            drivers[old] = make(old, recorders[old])
            await drivers[old].start()
            await wait_for(
                lambda: recorders[old].data == history + [b"after"], 10, "the restarted node"
            )
            assert recorders[old].loaded == [snapshot_id]
        finally:
            for d in drivers.values():
                if d._task is not None and not d._task.done():
                    await d.stop(graceful=False)

    asyncio.run(scenario())


def test_a_metadata_log_with_an_epoch_beyond_the_largest_is_refused_at_start(tmp_path) -> None:
    """Entries of epoch 2^31-1 (a forged leader's, appended by a version that accepted it)
    would make every election after them overflow: the driver refuses to start on them with
    a StorageError naming the directory, as it does for such a quorum-state."""
    metadata = tmp_path / "metadata"
    log = Log.open(str(metadata / "__cluster_metadata-0"), LogConfig())
    log.append_as_follower(
        encode_batch([Record(0, 0, None, b"forged")], partition_leader_epoch=2**31 - 1)
    )
    log.close()
    driver = RaftDriver(1, {1: "127.0.0.1:1"}, None, str(metadata), Recorder(), FAST)
    with pytest.raises(
        StorageError, match=r"__cluster_metadata-0 holds entries of epoch 2147483647"
    ):
        asyncio.run(driver.start())


class _LoopbackTransport:
    """A transport between drivers in one event loop (raft/driver.DriverTransport): a message
    reaches its destination's `deliver` on the next turn of the loop, as a network would."""

    def __init__(self, router: dict[int, object], node_id: int, deliver) -> None:
        self.router = router
        self.node_id = node_id
        self.deliver = deliver
        self.sent = self.received = self.dropped = self.refused = 0
        self.open = False

    def start(self) -> None:
        self.open = True
        self.router[self.node_id] = self

    def send(self, message) -> None:
        self.sent += 1
        peer = self.router.get(message.dst)
        if not isinstance(peer, _LoopbackTransport) or not peer.open:
            self.dropped += 1
            return
        peer.received += 1
        asyncio.get_running_loop().call_soon(peer.deliver, message)

    async def close(self) -> None:
        self.open = False


def test_the_driver_runs_on_the_transport_clock_and_randomness_it_is_given(tmp_path) -> None:
    """The driver takes its transport, clock and randomness as parameters (Kafka's
    KafkaRaftClient does): three drivers on real metadata logs, talking through an in-process
    transport instead of gRPC, elect a leader and commit appends on every node."""

    async def scenario() -> None:
        voters = {1: "unused:1", 2: "unused:2", 3: "unused:3"}
        router: dict[int, object] = {}
        clock_reads = [0]

        def clock() -> int:
            clock_reads[0] += 1
            return time.monotonic_ns() // 1_000_000

        recorders = {i: Recorder() for i in voters}
        drivers = [
            RaftDriver(
                i,
                voters,
                voters[i],
                str(tmp_path / f"n{i}"),
                recorders[i],
                FAST,
                clock=clock,
                rng=random.Random(i),
                make_transport=lambda deliver, refused, i=i: _LoopbackTransport(router, i, deliver),
            )
            for i in voters
        ]
        for driver in drivers:
            await driver.start()
        try:
            assert all(d.bound_port == 0 for d in drivers), "no gRPC listener with this transport"
            last = await asyncio.wait_for(append_via_leader(drivers, [b"a", b"b", b"c"]), 10)
            await wait_for(
                lambda: all(d.high_watermark > last for d in drivers), 10, "the commit everywhere"
            )
            for recorder in recorders.values():
                await wait_for(
                    lambda r=recorder: r.data[-3:] == [b"a", b"b", b"c"], 10, "the records applied"
                )
            assert clock_reads[0] > 0
            assert sum(d.transport.sent for d in drivers) > 0
            assert all(isinstance(d.transport, _LoopbackTransport) for d in drivers)
        finally:
            for driver in drivers:
                await driver.stop(graceful=False)

    asyncio.run(scenario())


def test_a_graceful_stop_during_a_slow_disk_write_writes_each_entry_once(tmp_path) -> None:
    """stop() carries out its resignation's Readies while the loop's task may be inside a
    Ready, waiting for the disk: the log writes of a Ready not yet advanced must not be
    handed out and written a second time. The restarted node holds each record once."""
    metadata = str(tmp_path / "n1")
    voters = {1: "unused:1"}

    async def write_then_stop() -> None:
        driver = RaftDriver(1, voters, None, metadata, Recorder(), FAST)
        await driver.start()
        await wait_for(lambda: driver.role is Role.LEADER, 10, "a leader")
        await driver.append([b"first"])
        append_entries = driver.raft_log.append
        writing = threading.Event()

        def slow_append(entries) -> None:
            writing.set()
            time.sleep(0.3)
            append_entries(entries)

        driver.raft_log.append = slow_append  # type: ignore[method-assign]
        append = asyncio.create_task(driver.append([b"a", b"b"]))
        await wait_for(writing.is_set, 10, "the append's write under way")
        await driver.stop(graceful=True)
        with pytest.raises(NotLeaderError):
            await append

    async def restart() -> list[bytes]:
        recorder = Recorder()
        driver = RaftDriver(1, voters, None, metadata, recorder, FAST)
        await driver.start()
        try:
            await wait_for(lambda: driver.role is Role.LEADER, 10, "a leader again")
            await wait_for(lambda: b"b" in recorder.data, 10, "the records replayed")
            return recorder.data
        finally:
            await driver.stop(graceful=False)

    asyncio.run(write_then_stop())
    assert asyncio.run(restart()) == [b"first", b"a", b"b"]
