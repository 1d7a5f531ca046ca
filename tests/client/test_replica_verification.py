"""`strom replica-verification` (kafka-replica-verification.sh) against a real cluster: it
reads every replica through the debugging-consumer fetch, reports the lag in Kafka's words
while replicas agree, and names the partition and replicas when one replica's bytes differ."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from strom import TopicPartition
from strom.admin import AdminClient
from strom.errors import StromError
from strom.producer import Producer
from strom_tools.replica_verification import starting_points
from tests.client.cluster_helpers import bootstrap, create_topic, reader
from tests.node_integration.node_cluster import ROOT

REPORT = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}: max lag is (\d+) for partition (\S+) at offset "
    r"(-?\d+) among (\d+) partitions$"
)


# `python -m strom_tools` with Ctrl-C handled as a user's terminal sends it: a runner started
# in the background (CI's may be) ignores SIGINT, children inherit that, and Python then
# installs no handler of its own. The child restores it itself. A preexec_fn did it before,
# between fork and exec, which Python warns can deadlock in a process with threads (this one
# runs gRPC's): a CI run's tool never printed its first line in 30 s, after gRPC logged
# "Other threads are currently calling into gRPC, skipping fork() handlers".
START_WITH_CTRL_C = (
    "import runpy, signal; "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('strom_tools', run_name='__main__', alter_sys=True)"
)


class Tool:
    """The tool as a user runs it, its output lines read as they come."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", START_WITH_CTRL_C, "replica-verification", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=ROOT),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_line(self, matching: re.Pattern[str], timeout: float = 30) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            found = matching.search(line)
            if found:
                return found
        raise AssertionError(f"no line matching {matching.pattern} within {timeout} s")

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=20)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


def produce(cluster, topic: str, count: int) -> None:
    with Producer(bootstrap(cluster), acks="all", linger_ms=5) as producer:
        for i in range(count):
            producer.send(topic, b"value-%d" % i, key=b"%d" % (i % 7))
        producer.flush()


def test_agreeing_replicas_report_their_lag_and_stop_cleanly(cluster):
    create_topic(cluster, "verified", partitions=2)
    produce(cluster, "verified", 300)
    tool = Tool(
        "--bootstrap-server",
        bootstrap(cluster),
        "--topics-include",
        "verif.*",
        "--time",
        "-2",
        "--report-interval-ms",
        "300",
        "--max-wait-ms",
        "100",
    )
    try:
        tool.next_line(re.compile("verification process is started"))
        # Each partition is verified up to its high watermark: the lag drops to 0.
        deadline = time.monotonic() + 30
        while True:
            report = tool.next_line(REPORT)
            assert report.group(4) == "2"
            if report.group(1) == "0" and int(report.group(3)) > 0:
                break
            assert time.monotonic() < deadline, "the lag never reached 0"
        produce(cluster, "verified", 100)  # still agreeing as new records come
        tool.next_line(re.compile(r"max lag is 0 .* at offset \d+"))
    finally:
        code, stderr = tool.stop()
    assert code == 0, stderr
    assert "Traceback" not in stderr


def test_a_replica_whose_bytes_differ_is_named(cluster):
    create_topic(cluster, "tampered", partitions=1)
    produce(cluster, "tampered", 50)
    leader = reader(cluster).metadata(["tampered"]).topics[0].partitions[0].leader_id
    follower = next(i for i in cluster.ids if i != leader)
    segment = os.path.join(cluster.data_dir(follower), "tampered-0", f"{0:020d}.log")
    with open(segment, "r+b") as f:
        # The first batch's stored CRC (bytes 17-20 of a batch): this replica's copy now
        # differs from the others while the broker serves it as it is.
        f.seek(17)
        crc = f.read(4)
        f.seek(17)
        f.write(bytes(b ^ 0xFF for b in crc))
    tool = Tool(
        "--bootstrap-server",
        bootstrap(cluster),
        "--topics-include",
        "tampered",
        "--time",
        "-2",
        "--max-wait-ms",
        "100",
    )
    try:
        found = tool.next_line(
            re.compile(
                r"^Partition tampered-0: replica (\d+)'s batch .* "
                r"does not match replica (\d+)'s batch"
            )
        )
        assert str(follower) in found.groups()
        assert tool.proc.wait(timeout=20) == 1
    finally:
        tool.stop()


def test_bad_options_are_one_line_errors(cluster):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "strom_tools",
            "replica-verification",
            "--bootstrap-server",
            bootstrap(cluster),
            "--topics-include",
            "no-such-topic-.*",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().startswith("Error: UNKNOWN_TOPIC_OR_PARTITION")
    assert "Traceback" not in result.stderr


def test_where_verifying_starts_comes_from_list_offsets(cluster):
    create_topic(cluster, "started", partitions=1)
    base = int(time.time() * 1000) - 60_000
    with Producer(bootstrap(cluster), acks="all") as producer:
        for i in range(5):
            producer.send("started", b"%d" % i, partition=0, timestamp_ms=base + i * 1000)
        producer.flush()
    tp = TopicPartition("started", 0)
    with AdminClient(bootstrap(cluster)) as admin:
        replicas = tuple(admin.describe_topics(["started"])[0].partitions[0].replicas)

        def start(time_ms: int) -> int:
            points = starting_points(admin, re.compile("start.*"), time_ms)
            assert points.keys() == {tp} and points[tp][0] == replicas
            return points[tp][1]

        assert (start(-2), start(-1)) == (0, 5)
        assert start(base + 2500) == 3  # the first record at or after the time
        assert start(base + 600_000) == 5  # later than every record: the end
        with pytest.raises(StromError, match="INVALID_REQUEST"):
            start(-7)
        with pytest.raises(StromError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            starting_points(admin, re.compile("nothing-like-it"), -1)
