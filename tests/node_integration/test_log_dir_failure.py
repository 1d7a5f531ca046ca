"""A leader's disk fills up under acks=all produces, in three real `strom server` processes.

Each node keeps its partition logs on its own 2 MiB tmpfs (log.dirs) and its metadata log on
the ordinary disk (metadata.log.dir), so filling one node's tmpfs is a real ENOSPC in its
data directory alone. Kafka's behaviour is expected: the produce that hits the full disk is
answered KAFKA_STORAGE_ERROR (never acknowledged, never gRPC UNKNOWN); the broker, its only
log directory gone, halts with one log line; the controller fences it and another replica
of the ISR leads, where producing succeeds; and every record acknowledged before is there,
at the offset it was acknowledged with. Needs root (to mount tmpfs); skipped otherwise.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid

import pytest
from node_cluster import NodeCluster, wait_until

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


def move_log_dirs_to(cluster: NodeCluster, node: int, disk: str) -> None:
    """log.dirs on `disk`, the metadata log where it was; then formats the new directory."""
    path = cluster.config_path(node)
    with open(path) as f:
        lines = [line for line in f if not line.startswith("log.dirs=")]
    lines += [f"log.dirs={disk}\n", f"metadata.log.dir={cluster.data_dir(node)}\n"]
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


def test_a_leader_whose_disk_fills_answers_storage_error_halts_and_hands_over(tmp_path):
    base = str(tmp_path)
    disks = {}
    cluster = NodeCluster(base, 3, extra={"min.insync.replicas": "2"})
    try:
        for node in cluster.ids:
            disks[node] = os.path.join(base, f"node{node}", "disk")
            mount_tmpfs(disks[node], "2m")
            move_log_dirs_to(cluster, node, disks[node])
        cluster.start_all()
        cluster.wait_for_brokers({1, 2, 3})
        response = cluster.call(
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(
                        name=TOPIC, num_partitions=1, replication_factor=3
                    )
                ]
            ),
        )
        assert not response.topics[0].HasField("error"), response
        client = DataClient({i: f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids})
        leader = client.leader(TOPIC, 0)

        acknowledged: dict[int, bytes] = {}

        def produce(broker: int) -> tuple[str, bytes]:
            value = uuid.uuid4().bytes * (VALUE_BYTES // 16)
            answer = client.produce_raw(broker, TOPIC, 0, batch([value]), acks=-1)
            name = error_name(answer.error) if answer.HasField("error") else "NONE"
            if name == "NONE":
                assert answer.base_offset not in acknowledged
                acknowledged[answer.base_offset] = value
            return name, value

        for _ in range(20):
            assert produce(leader)[0] == "NONE"

        fill(disks[leader])
        errors = []
        for _ in range(200):
            name, _ = produce(leader)
            if name != "NONE":
                errors.append(name)
                break
        assert errors == ["KAFKA_STORAGE_ERROR"], errors

        # The only log directory failed: the broker halts, with one line saying why.
        proc = cluster.procs.pop(leader)
        assert proc.wait(timeout=30) == 1
        log_text = cluster.log_text(leader)
        assert "Shutdown broker because all log dirs in" in log_text
        assert "Traceback" not in log_text

        # The controller fences it; another replica of the ISR leads and takes produces.
        new_leader = client.leader(TOPIC, 0, timeout_s=30, not_=leader)
        assert new_leader != leader

        def produced_on_new_leader() -> bool | None:
            name, _ = produce(new_leader)
            return True if name == "NONE" else None

        wait_until(produced_on_new_leader, 30, "a produce acknowledged by the new leader")

        # Every acknowledged record is there, at the offset it was acknowledged with.
        del client.addresses[leader]
        found = {}
        offset = 0
        deadline = time.monotonic() + 30
        while offset <= max(acknowledged) and time.monotonic() < deadline:
            answer = client.fetch_raw(new_leader, TOPIC, 0, offset)
            assert not (answer.HasField("error") and answer.error.code), answer.error
            for _, records in decode_batches(answer.records):
                for record in records:
                    found[record.offset] = record.value
                    offset = record.offset + 1
        for offset, value in acknowledged.items():
            assert found.get(offset) == value, f"acknowledged offset {offset} lost or changed"
    finally:
        cluster.stop_all()
        for disk in disks.values():
            subprocess.run(["umount", "-l", disk], check=False)
