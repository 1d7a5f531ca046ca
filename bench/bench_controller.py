"""The controller at scale: creating 10,000 partitions (RF 3) on 3 brokers, propagating them
to every node's image, controller failover with that image, and image memory per partition.

    python bench/bench_controller.py [--quick]

Three combined `strom server` processes on loopback (tests/node_integration/node_cluster.py,
default timeouts except a 2 ms append linger). Measured, each with the same operation on an
empty cluster as the reference in the same run:
1. create: one CreateTopics of 100 topics x 100 partitions, RF 3: time until the active
   controller answers (committed), and until every node's DescribeTopics stands at or past
   the commit (propagation); reference: one CreateTopics of a single 1-partition topic.
2. failover: kill -9 of the active controller, then CreateTopics of a new topic to each
   survivor until one accepts it; reference: the same on a cluster with no topics (before
   step 1). Default fetch timeout: the floor is controller.quorum.fetch.timeout.ms (2 s).
3. memory: an in-process MetadataImage built by replaying the same records, measured with
   tracemalloc, per partition.
Goals (issue 4): failover <= 2 s at 10k partitions; propagation <= 1 s after commit.
4. operations/s (issue 19; `--ops` runs only this): record-producing controller operations
   (CreateTopics of a 1-partition topic, AlterPartition ISR shrink and expand, a broker
   registration) from 1 and from 64 concurrent callers against a real QuorumController over
   a one-voter RaftDriver in this process (real log and fsync, Kafka's 25 ms append linger);
   reference: the same driver committing one-record appends from 64 callers, the ceiling a
   controller over it can reach.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
import tracemalloc
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from metadata.alter_partition import IsrProposal  # noqa: E402
from metadata.broker_lifecycle import BrokerRegistrationRequest, HeartbeatRequest  # noqa: E402
from metadata.controller import ControllerConfig, QuorumController  # noqa: E402
from metadata.delta import MetadataDelta  # noqa: E402
from metadata.image import EMPTY_IMAGE, Endpoint  # noqa: E402
from metadata.loader import MetadataLoader  # noqa: E402
from metadata.topic_control import NewTopic, create_topics  # noqa: E402
from raft.config import RaftConfig  # noqa: E402
from raft.driver import RaftDriver  # noqa: E402
from raft.roles import Role  # noqa: E402
from strom_api.v1 import controller_pb2  # noqa: E402
from strom_api.v1 import metadata_pb2 as mpb  # noqa: E402
from tests.node_integration.node_cluster import NodeCluster, wait_until  # noqa: E402
from tests.raft_integration.process_cluster import free_ports, wait_for  # noqa: E402

SETTINGS = {  # Kafka's defaults but a short linger, so a test-sized op is not 25 ms of wait
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.append.linger.ms": "2",
    "broker.heartbeat.interval.ms": "2000",
    "broker.session.timeout.ms": "9000",
}


def create_request(prefix: str, topics: int, partitions: int, rf: int) -> object:
    return controller_pb2.CreateTopicsRequest(
        topics=[
            controller_pb2.CreatableTopic(
                name=f"{prefix}{t}", num_partitions=partitions, replication_factor=rf
            )
            for t in range(topics)
        ]
    )


def timed_create(cluster: NodeCluster, request: object) -> tuple[float, float]:
    """(seconds to commit, seconds until every node's image holds it)."""
    start = time.perf_counter()
    response = cluster.call("CreateTopics", request, timeout_s=120)
    committed = time.perf_counter() - start
    errors = [t.error.message for t in response.topics if t.HasField("error")]
    if errors:
        raise RuntimeError(f"CreateTopics failed: {errors[:3]}")
    names = [t.name for t in response.topics]
    last = names[-1]

    def everywhere() -> bool:
        for node in cluster.procs:
            try:
                described = cluster.stub(node).DescribeTopics(
                    controller_pb2.DescribeTopicsRequest(names=[last]), timeout=5
                )
            except Exception:
                return False
            if described.topics[0].HasField("error"):
                return False
        return True

    wait_until(everywhere, 60, "every node's image")
    return committed, time.perf_counter() - start - committed


def caught_up(cluster: NodeCluster) -> bool:
    offsets = set()
    for node in cluster.procs:
        described = cluster.describe_cluster(node)
        if described is None:
            return False
        offsets.add(described.metadata_offset)
    return len(offsets) == 1


def failover(cluster: NodeCluster, name: str) -> float:
    active = cluster.active_controller()
    start = time.perf_counter()
    cluster.stop(active, signal.SIGKILL)
    request = create_request(name, 1, 1, 1)
    cluster.call("CreateTopics", request, timeout_s=60)
    elapsed = time.perf_counter() - start
    cluster.start(active)
    return elapsed


def image_bytes_per_partition(topics: int, partitions: int) -> float:
    records = []
    for b in (1, 2, 3):
        records += [
            mpb.RegisterBrokerRecord(broker_id=b, broker_epoch=b, fenced=True),
            mpb.UnfenceBrokerRecord(broker_id=b, broker_epoch=b),
        ]
    base = MetadataDelta(EMPTY_IMAGE).replay_all(records).apply(len(records), 1)
    new = [NewTopic(f"t{t}", partitions, 3) for t in range(topics)]
    topic_records, _ = create_topics(base, new)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    image = MetadataDelta(base).replay_all(topic_records).apply(len(topic_records), 1)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert len(image.topics.by_name) == topics
    return grown / (topics * partitions)


# --- record-producing operations per second (issue 19) ---------------------------------------

OPS_CALLERS = 64
ISR_BROKERS = (1, 2, 3)


def _raft_config() -> RaftConfig:
    return RaftConfig()  # Kafka's defaults: controller.quorum.append.linger.ms 25


async def _one_voter(data: str, listener: Any) -> RaftDriver:
    (port,) = free_ports(1)
    address = f"127.0.0.1:{port}"
    driver = RaftDriver(1, {1: address}, address, data, listener, _raft_config())
    await driver.start()
    await wait_for(
        lambda: driver.core is not None and driver.core.role is Role.LEADER, 10, "a leader"
    )
    return driver


async def _caller_loop(
    controller: QuorumController, caller: int, epochs: dict[int, int], deadline: float
) -> int:
    """CreateTopics of a 1-partition RF-3 topic, its ISR shrunk and expanded again by its
    leader, and a registration of the caller's own broker: four record-producing operations
    a round, until the deadline. Returns how many completed."""
    done = 0
    round_ = 0
    broker_id = 100 + caller
    previous = -1
    while time.perf_counter() < deadline:
        round_ += 1
        name = f"c{caller}-{round_}"
        [result] = await controller.create_topics([NewTopic(name, 1, 3)])
        assert result.error is None, result.error
        p = controller.loader.image.topics.partition(name, 0)
        for isr in ((p.leader,), p.replicas):
            proposal = IsrProposal(result.topic_id, 0, p.leader_epoch, p.partition_epoch, isr)
            [answer] = await controller.alter_partition(p.leader, epochs[p.leader], [proposal])
            assert answer.error is None and answer.registration is not None, answer.error
            p = answer.registration
        # A clean restart of the caller's own broker (its marker holds the last epoch).
        incarnation = broker_id.to_bytes(8, "big") + round_.to_bytes(8, "big")
        endpoints = [Endpoint("PLAINTEXT", "h", 1)]
        request = BrokerRegistrationRequest(broker_id, incarnation, endpoints, None, previous)
        previous = await controller.register_broker(request)
        done += 4
    return done


async def controller_ops_per_second(callers: int, seconds: float) -> float:
    """A real QuorumController over a one-voter RaftDriver (real log, real fsync), its
    periodic task not started (no broker is fenced for missing heartbeats meanwhile)."""
    with tempfile.TemporaryDirectory(prefix="strom-bench-ops-") as data:
        loader = MetadataLoader()
        driver = await _one_voter(data, loader)
        controller = QuorumController(driver, loader, ControllerConfig())
        try:
            await wait_for(controller.is_active, 10, "an active controller")
            epochs = {}
            for b in ISR_BROKERS:
                epochs[b] = await controller.register_broker(
                    BrokerRegistrationRequest(b, bytes([b]) * 16, [Endpoint("PLAINTEXT", "h", b)])
                )
                await controller.broker_heartbeat(
                    HeartbeatRequest(b, epochs[b], loader.image.offset)
                )
            start = time.perf_counter()
            deadline = start + seconds
            counts = await asyncio.gather(
                *(_caller_loop(controller, c, epochs, deadline) for c in range(callers))
            )
            return sum(counts) / (time.perf_counter() - start)
        finally:
            await driver.stop()


class _NoListener:
    """The reference's state machine: none. It measures the driver alone, so committed
    entries, snapshots and leader changes are not acted on."""

    def handle_commit(self, entries: Any) -> None:
        pass

    def handle_load_snapshot(self, snapshot_id: Any, records: Any) -> None:
        pass

    def handle_leader_change(self, leader: Any) -> None:
        pass


async def raft_appends_per_second(callers: int, seconds: float) -> float:
    """The reference: the same driver taking one 100-byte record per append from the same
    number of callers, each waiting for its commit: the most a controller over it can do."""
    with tempfile.TemporaryDirectory(prefix="strom-bench-ops-") as data:
        driver = await _one_voter(data, _NoListener())
        try:
            start = time.perf_counter()
            deadline = start + seconds

            async def appender() -> int:
                n = 0
                while time.perf_counter() < deadline:
                    await driver.append([b"x" * 100])
                    n += 1
                return n

            counts = await asyncio.gather(*(appender() for _ in range(callers)))
            return sum(counts) / (time.perf_counter() - start)
        finally:
            await driver.stop()


def operations(quick: bool) -> None:
    seconds = 2.0 if quick else 5.0
    reference = asyncio.run(raft_appends_per_second(OPS_CALLERS, seconds))
    rows = [
        (f"{n} caller{'s' if n > 1 else ''}", asyncio.run(controller_ops_per_second(n, seconds)))
        for n in (1, OPS_CALLERS)
    ]
    print(
        f"controller operations/s: one voter in-process, real fsync, linger "
        f"{_raft_config().append_linger_ms} ms; {seconds:.0f} s each; CreateTopics (1 partition, "
        "RF 3), AlterPartition shrink and expand, RegisterBroker"
    )
    print(f"{'measurement':52} {'ops/s':>10} {'reference':>10} {'ratio':>7}")
    for label, value in rows:
        print(
            f"{'controller, ' + label:52} {value:10.0f} {reference:10.0f} {value / reference:7.3f}"
        )
    print(
        f"reference: RaftDriver.append of one record, {OPS_CALLERS} callers, each awaiting"
        " its commit"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 partitions instead")
    parser.add_argument("--ops", action="store_true", help="only the operations/s measurement")
    args = parser.parse_args()
    operations(args.quick)
    if args.ops:
        return 0
    topics, partitions = (10, 100) if args.quick else (100, 100)
    total = topics * partitions
    base = tempfile.mkdtemp(prefix="strom-bench-controller-")
    cluster = NodeCluster(base, 3, extra=SETTINGS)
    try:
        cluster.start_all()
        wait_until(
            lambda: (
                (c := cluster.describe_cluster()) is not None
                and sum(not b.fenced for b in c.brokers) == 3
            ),
            60,
            "three unfenced brokers",
        )
        ref_failover = failover(cluster, "ref-failover")
        wait_until(
            lambda: (
                (c := cluster.describe_cluster()) is not None
                and sum(not b.fenced for b in c.brokers) == 3
            ),
            60,
            "the restarted node's broker back",
        )
        ref_commit, ref_spread = timed_create(cluster, create_request("ref-", 1, 1, 3))
        commit, spread = timed_create(cluster, create_request("t", topics, partitions, 3))
        big_failover = failover(cluster, "after-failover")
        per_partition = image_bytes_per_partition(topics, partitions)
    finally:
        cluster.stop_all()
    print(f"3 combined nodes on loopback; {topics} topics x {partitions} partitions, RF 3")
    rows = [
        (f"CreateTopics of {total:,} partitions: commit", commit, ref_commit, ""),
        ("  then propagation to every node's image", spread, ref_spread, "<= 1.0 s"),
        (f"failover (kill -9) with {total:,} partitions", big_failover, ref_failover, "<= 2.0 s"),
    ]
    print(f"{'measurement':52} {'value':>10} {'reference':>10} {'ratio':>7}  goal")
    for label, value, ref, goal in rows:
        print(f"{label:52} {value:9.3f}s {ref:9.3f}s {value / ref:7.2f}  {goal}")
    print(f"{'image memory per partition (tracemalloc)':52} {per_partition:8.0f} B")
    print("reference: the same operation with one partition (failover: with no topics)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
