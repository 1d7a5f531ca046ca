"""A reassignment that really copies data, with and without kafka-reassign-partitions.sh's
--throttle: the copy rate achieved against the throttle and against an unthrottled copy
measured in the same run.

    python bench/reassign_throttle.py [--quick]

Three combined `strom server` nodes on loopback (tests/node_integration/node_cluster.py).
Per run, a fresh topic with one partition on broker 1 is filled with SIZE of incompressible
1 MB batches (acks=1), then moved to broker 2, which has none of it, by the tool's own
--execute code (strom_tools/reassign_command.py, in this process so that no interpreter start-up
is timed), with --throttle RATE or without. The copy time runs from the start of --execute
to the moment the controller lists the reassignment as finished (polled every 10 ms);
--verify then removes the throttle. Ratios: achieved/throttle says how close the brokers
hold to the rate (Kafka lets one fetch overshoot, so a little above 1.0 on short copies);
achieved/unthrottled says how much the throttle slowed the copy.

Full: 64 MiB at 10, 20 and 40 MiB/s (about 20 s of copying); --quick: 24 MiB at 10 MiB/s.
Benchmarks print, never assert.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from strom.controller_client import ControllerClient, parse_bootstrap  # noqa: E402
from strom_api.v1 import controller_pb2  # noqa: E402
from strom_tools import reassign_command  # noqa: E402
from tests.data_plane.data_client import DataClient, batch  # noqa: E402
from tests.node_integration.node_cluster import NodeCluster, running_cluster  # noqa: E402
from tests.raft_integration.process_cluster import wait_until  # noqa: E402

MIB = 1 << 20
RECORDS, RECORD_BYTES = 10, 100_000  # 1 MB batches, under the default max.message.bytes


def create_on_broker_1(client: ControllerClient, topic: str) -> None:
    request = controller_pb2.CreateTopicsRequest(
        topics=[controller_pb2.CreatableTopic(name=topic, num_partitions=-1, replication_factor=-1)]
    )
    request.topics[0].assignments[0].ids.append(1)
    response = client.call("CreateTopics", request)
    assert response.topics[0].error.code == 0, response


def fill(cluster: NodeCluster, topic: str, size: int) -> int:
    data = DataClient({n: f"127.0.0.1:{cluster.broker_port[n]}" for n in cluster.ids})
    leader = data.leader(topic, 0)
    total = 0
    while total < size:
        records = batch([os.urandom(RECORD_BYTES) for _ in range(RECORDS)])
        answer = data.produce_raw(leader, topic, 0, records, acks=1)
        assert answer.error.code == 0, answer
        total += len(records)
    return total


def copy(client: ControllerClient, topic: str, throttle: int | None) -> float:
    """Seconds from --execute until the move to broker 2 is done; --verify clears after."""
    plan = json.dumps(
        {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2]}]}
    )
    args = SimpleNamespace(
        reassignment_json_file=plan, additional=False, throttle=throttle, preserve_throttles=False
    )
    lines: list[str] = []
    start = time.monotonic()
    reassign_command.execute(client, args, lines.append)  # type: ignore[arg-type]

    def done() -> bool:
        listed = client.call(
            "ListPartitionReassignments", controller_pb2.ListPartitionReassignmentsRequest()
        )
        return not any(r.partition.topic == topic for r in listed.reassignments)

    while not done():
        time.sleep(0.01)
    elapsed = time.monotonic() - start
    wait_until(lambda: verify_clears(client, args), 10, "--verify to clear the throttle")
    return elapsed


def verify_clears(client: ControllerClient, args: SimpleNamespace) -> bool:
    lines: list[str] = []
    reassign_command.verify(client, args, lines.append)  # type: ignore[arg-type]
    return any(line.startswith("Clearing broker-level") for line in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    size = (24 if quick else 64) * MIB
    throttles = [10 * MIB] if quick else [10 * MIB, 20 * MIB, 40 * MIB]
    base = tempfile.mkdtemp(prefix="strom-bench-throttle-", dir=os.environ.get("STROM_BENCH_DIR"))
    with running_cluster(base, 3, extra={"auto.leader.rebalance.enable": "false"}) as cluster:
        bootstrap = ",".join(f"127.0.0.1:{cluster.controller_port[n]}" for n in cluster.ids)
        with ControllerClient(parse_bootstrap(bootstrap)) as client:
            results: list[tuple[int | None, int, float]] = []
            for run, throttle in enumerate([None, *throttles]):
                topic = f"copy-{run}"
                create_on_broker_1(client, topic)
                moved = fill(cluster, topic, size)
                results.append((throttle, moved, copy(client, topic, throttle)))
    unthrottled = results[0][1] / results[0][2]
    print(f"reassignment copy of {size // MIB} MiB from broker 1 to broker 2 (loopback)")
    print(
        f"{'throttle':>14} {'seconds':>8} {'MiB/s':>8} {'vs throttle':>12} {'vs unthrottled':>15}"
    )
    for throttle, moved, seconds in results:
        rate = moved / seconds
        label = "none" if throttle is None else f"{throttle / MIB:g} MiB/s"
        against = "" if throttle is None else f"{rate / throttle:.2f}"
        print(
            f"{label:>14} {seconds:8.2f} {rate / MIB:8.1f} {against:>12} {rate / unthrottled:15.3f}"
        )


if __name__ == "__main__":
    main()
