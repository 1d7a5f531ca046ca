"""A leader's disk fills up under acks=all produces, in three real `strom server` processes.

Each node keeps its partition logs on its own 2 MiB tmpfs mounts (log.dirs) and its metadata
log on the ordinary disk (metadata.log.dir), so filling one tmpfs is a real ENOSPC in that
data directory alone. Kafka's behaviour is expected: the produce that hits the full disk is
answered KAFKA_STORAGE_ERROR (never acknowledged, never gRPC UNKNOWN), another replica of
the ISR takes the leadership, producing succeeds there, and every record acknowledged
before is there, at the offset it was acknowledged with. With one log directory the broker
halts with one log line (the controller fences it); with two, it stays up, reports the
failed directory's replicas in its heartbeats (the controller moves them away), serves its
other directory, counts the offline one in kafka_log_logmanager_offlinelogdirectorycount
and is not ready. Needs root (to mount tmpfs); skipped otherwise.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from node_cluster import NodeCluster, wait_until

from strom import TopicPartition
from strom.admin import AdminClient
from strom_api.records import decode_batches
from strom_api.v1 import controller_pb2
from tests.data_plane.data_client import DataClient, batch, error_name

TOPIC = "orders"
VALUE_BYTES = 3000  # most appends then need a page the full disk does not have


def mount_tmpfs(path: str, size: str) -> None:
    os.makedirs(path, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")


def move_log_dirs_to(cluster: NodeCluster, node: int, disks: list[str]) -> None:
    """log.dirs on `disks`, the metadata log where it was; then formats the new ones."""
    path = cluster.config_path(node)
    with open(path) as f:
        lines = [line for line in f if not line.startswith("log.dirs=")]
    lines += [f"log.dirs={','.join(disks)}\n", f"metadata.log.dir={cluster.data_dir(node)}\n"]
    with open(path, "w") as f:
        f.writelines(lines)
    cluster._strom(
        "storage",
        "format",
        "--config",
        path,
        "--cluster-id",
        cluster.cluster_id,
        "--ignore-formatted",
    )


def fill(directory: str) -> None:
    with open(os.path.join(directory, "filler"), "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 512)


class DiskCluster:
    """Three combined nodes whose log.dirs are tmpfs mounts, `dirs` per node, with one topic
    of `partitions` partitions replicated on all three; records acknowledged are kept."""

    def __init__(self, base: str, dirs: int, partitions: int) -> None:
        self.disks: dict[int, list[str]] = {}
        self.cluster = NodeCluster(base, 3, extra={"min.insync.replicas": "2"})
        for node in self.cluster.ids:
            self.disks[node] = [os.path.join(base, f"node{node}", f"disk{d}") for d in range(dirs)]
            for disk in self.disks[node]:
                mount_tmpfs(disk, "2m")
            move_log_dirs_to(self.cluster, node, self.disks[node])
        self.cluster.start_all()
        self.cluster.wait_for_brokers({1, 2, 3})
        response = self.cluster.call(
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(
                        name=TOPIC, num_partitions=partitions, replication_factor=3
                    )
                ]
            ),
        )
        assert not response.topics[0].HasField("error"), response
        ports = self.cluster.broker_port
        self.client = DataClient({i: f"127.0.0.1:{ports[i]}" for i in self.cluster.ids})
        self.acknowledged: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> value

    def produce(self, broker: int, partition: int) -> str:
        value = uuid.uuid4().bytes * (VALUE_BYTES // 16)
        answer = self.client.produce_raw(broker, TOPIC, partition, batch([value]), acks=-1)
        name = error_name(answer.error) if answer.HasField("error") else "NONE"
        if name == "NONE":
            key = (partition, answer.base_offset)
            assert key not in self.acknowledged, f"offset {key} acknowledged twice"
            self.acknowledged[key] = value
        return name

    def fill_until_refused(self, leader: int, partition: int, disk: str) -> list[str]:
        """Fills `disk`, then produces to the leader until a produce is refused."""
        for _ in range(20):
            assert self.produce(leader, partition) == "NONE"
        fill(disk)
        for _ in range(200):
            name = self.produce(leader, partition)
            if name != "NONE":
                return [name]
        return []

    def produce_on_new_leader(self, partition: int, old: int) -> int:
        new_leader = self.client.leader(TOPIC, partition, timeout_s=30, not_=old)

        def acknowledged() -> bool | None:
            return True if self.produce(new_leader, partition) == "NONE" else None

        wait_until(acknowledged, 30, "a produce acknowledged by the new leader")
        return new_leader

    def check_acknowledged(self, partition: int, broker: int) -> None:
        """Every acknowledged record of `partition` is on `broker`, at its offset."""
        wanted = {o: v for (p, o), v in self.acknowledged.items() if p == partition}
        found = {}
        offset = 0
        deadline = time.monotonic() + 30
        while offset <= max(wanted) and time.monotonic() < deadline:
            answer = self.client.fetch_raw(broker, TOPIC, partition, offset)
            assert not (answer.HasField("error") and answer.error.code), answer.error
            for _, records in decode_batches(answer.records):
                for record in records:
                    found[record.offset] = record.value
                    offset = record.offset + 1
        for offset, value in wanted.items():
            assert found.get(offset) == value, f"acknowledged offset {offset} lost or changed"

    def close(self) -> None:
        self.cluster.stop_all()
        for disks in self.disks.values():
            for disk in disks:
                subprocess.run(["umount", "-l", disk], check=False)


def test_a_leader_whose_only_disk_fills_answers_storage_error_and_halts(tmp_path):
    setup = DiskCluster(str(tmp_path), dirs=1, partitions=1)
    try:
        cluster = setup.cluster
        leader = setup.client.leader(TOPIC, 0)
        assert setup.fill_until_refused(leader, 0, setup.disks[leader][0]) == [
            "KAFKA_STORAGE_ERROR"
        ]

        # The only log directory failed: the broker halts, with one line saying why.
        proc = cluster.procs.pop(leader)
        assert proc.wait(timeout=30) == 1
        log_text = cluster.log_text(leader)
        assert "Shutdown broker because all log dirs in" in log_text
        assert "Traceback" not in log_text

        # The controller fences it; another replica of the ISR leads and takes produces.
        del setup.client.addresses[leader]
        new_leader = setup.produce_on_new_leader(0, leader)
        setup.check_acknowledged(0, new_leader)
    finally:
        setup.close()


def ready(cluster: NodeCluster, node: int) -> int:
    channel = grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[node]}")
    stub = health_pb2_grpc.HealthStub(channel)
    request = health_pb2.HealthCheckRequest(service="strom.ready")
    return int(stub.Check(request, timeout=5).status)


def test_a_failed_log_dir_among_two_moves_its_partitions_away_and_keeps_the_broker(tmp_path):
    setup = DiskCluster(str(tmp_path), dirs=2, partitions=2)
    try:
        cluster = setup.cluster
        leader = setup.client.leader(TOPIC, 0)
        bad, good = setup.disks[leader]
        if not os.path.isdir(os.path.join(bad, f"{TOPIC}-0")):
            bad, good = good, bad
        assert os.path.isdir(os.path.join(good, f"{TOPIC}-1")), "one partition per directory"
        serving = health_pb2.HealthCheckResponse.SERVING
        wait_until(lambda: ready(cluster, leader) == serving or None, 10, "the leader ready")

        assert setup.fill_until_refused(leader, 0, bad) == ["KAFKA_STORAGE_ERROR"]
        new_leader = setup.produce_on_new_leader(0, leader)
        described = cluster.call(
            "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[TOPIC])
        )
        moved = {p.partition: p for p in described.topics[0].partitions}[0]
        assert leader not in moved.isr and moved.leader == new_leader

        # The broker is up, serves its other directory, and says the first is offline.
        assert cluster.procs[leader].poll() is None
        samples = cluster.scrape(leader)
        assert samples[("kafka_log_logmanager_offlinelogdirectorycount", ())] == 1
        not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
        wait_until(lambda: ready(cluster, leader) == not_serving or None, 10, "not ready")
        other_leader = setup.client.leader(TOPIC, 1)
        assert setup.produce(other_leader, 1) == "NONE"
        setup.check_acknowledged(1, other_leader)
        answer = setup.client.fetch_raw(leader, TOPIC, 1, 0, replica_id=-2)
        assert not answer.HasField("error") or answer.error.code == 0, answer.error
        answer = setup.client.fetch_raw(leader, TOPIC, 0, 0, replica_id=-2)
        assert error_name(answer.error) == "KAFKA_STORAGE_ERROR"
        setup.check_acknowledged(0, new_leader)
        # Kafka's describeLogDirs (kafka-log-dirs.sh) shows the directory offline.
        brokers = ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids)
        with AdminClient(brokers) as admin:
            dirs = admin.describe_log_dirs([leader])[leader]
        offline = dirs[bad]
        assert offline.error is not None and offline.error.name == "KAFKA_STORAGE_ERROR"
        assert offline.replicas == {} and dirs[good].error is None
        assert TopicPartition(TOPIC, 1) in dirs[good].replicas
        assert "Traceback" not in cluster.log_text(leader)
    finally:
        setup.close()
