"""`make run`'s cluster (deploy/local/cluster.py): three combined nodes come up, "up" means
a replication-factor-3 topic can be created at once (a second run on the same data too), a
node killed with SIGKILL is reported and restarted, a second `make run` over a running one
(or over the nodes a killed one left behind) is refused with one line, Ctrl-C stops the
nodes cleanly, and auto-created topics get three replicas (issue 17). Every node serves a
Kafka protocol listener, whose bootstrap list `make run` prints (issue 20)."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from node_cluster import FAST, ROOT

from strom.admin import AdminClient, NewTopic
from strom.producer import Producer

LOCAL = os.path.join(ROOT, "deploy", "local")
SCRIPT = os.path.join(LOCAL, "cluster.py")
sys.path.insert(0, LOCAL)
from supervisor import NodeSpec, RestartPolicy, Supervisor, how_it_ended  # noqa: E402


def free_range(width: int) -> int:
    """A base port with `width` free ports from it (tried, not guaranteed to stay free)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + width > 65535:
            continue
        sockets = []
        try:
            for port in range(base, base + width):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError("no free port range")


def taken(base: int, metrics: int) -> str:
    """The addresses a running make run's nodes hold, as guard.py lists them."""
    return ", ".join(
        f"127.0.0.1:{port}"
        for i in range(3)
        for port in (base + 2 * i, base + 2 * i + 1, kafka_port(base) + i, metrics + i)
    )


def kafka_port(base: int) -> int:
    """Node 1's Kafka listener: after the node ports and the metrics ports (base + 6...)."""
    return base + 9


class MakeRun:
    """deploy/local/cluster.py as a process, its output read line by line."""

    def __init__(self, directory: str, base: int, metrics: int, *options: str) -> None:
        self.base = base
        self.directory = directory
        self.proc = subprocess.Popen(
            [sys.executable, SCRIPT, "--dir", directory, "--base-port", str(base),
             "--metrics-port", str(metrics), "--kafka-port", str(kafka_port(base)), *options],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=ROOT),
        )  # fmt: skip
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout_s: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            match = re.search(pattern, line)
            if match is not None:
                return match
        raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(self.lines)}")

    def bootstrap(self) -> str:
        return self.wait_for(r"bootstrap servers \(brokers\): (\S+)").group(1)

    def stop(self, sig: int = signal.SIGINT) -> str:
        """Stops the cluster as Ctrl-C does; every node must have stopped cleanly (a node
        the supervisor had to kill fails here, with the end of each node's log)."""
        self.proc.send_signal(sig)
        self.wait_for(r"stopped \(exit codes", 90)
        output = "".join(self.lines)
        assert self.proc.wait(timeout=30) == 0, output + self.node_logs()
        assert "stopped (exit codes [0, 0, 0])" in output, output + self.node_logs()
        return output

    def node_logs(self, lines: int = 60) -> str:
        tails = []
        for node in (1, 2, 3):
            path = os.path.join(self.directory, f"node{node}", "server.log")
            if os.path.exists(path):
                tail = open(path, errors="replace").readlines()[-lines:]
                tails.append(f"\n--- end of {path}:\n{''.join(tail)}")
        return "".join(tails)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGINT)  # the second one kills the nodes
                self.proc.wait(timeout=30)


def create_rf3_topic_at_once(bootstrap: str, name: str) -> None:
    """Right after the "up" line: no retries, as a user types it."""
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(name, 3, 3)])
        [topic] = admin.describe_topics([name])
    assert all(len(p.replicas) == 3 for p in topic.partitions)


def assert_kafka_clients_see(bootstrap: str, topic: str) -> None:
    """Kafka's own clients (librdkafka) read the cluster's metadata on its Kafka listener."""
    from confluent_kafka.admin import AdminClient as KafkaAdminClient

    admin = KafkaAdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(topic=topic, timeout=20)
    assert len(metadata.brokers) == 3 and len(metadata.topics[topic].partitions) == 3


def test_up_means_ready_and_a_restart_on_the_same_data_is_ready_too(tmp_path):
    """Before, a second run printed its bootstrap line 8-11 s before an RF-3 topic could
    be created ("only 0 broker(s) are registered")."""
    directory = str(tmp_path / "cluster")
    base = free_range(12)
    metrics = base + 6  # one range: two could overlap
    first = MakeRun(directory, base, metrics)
    try:
        assert "is up: 3 combined nodes" in first.wait_for("is up").string
        create_rf3_topic_at_once(first.bootstrap(), "first")
        kafka = first.wait_for(r"Kafka protocol \(bootstrap.servers\): (\S+)").group(1)
        assert kafka == ",".join(f"127.0.0.1:{kafka_port(base) + i}" for i in range(3))
        assert_kafka_clients_see(kafka, "first")
        output = first.stop()
    finally:
        first.kill()
    assert "stopped (exit codes [0, 0, 0])" in output
    cluster_id = open(os.path.join(directory, "cluster.id")).read().strip()
    second = MakeRun(directory, base, metrics)
    pids: list[int] = []
    try:
        second.wait_for(f"Strom cluster {cluster_id} is up")
        create_rf3_topic_at_once(second.bootstrap(), "second")
        pids = [int(p) for p in second.wait_for(r"pids ([\d ]+)\)").group(1).split()]
        # A make run killed outright leaves its nodes running: the next one names them.
        second.proc.kill()
        second.proc.wait(timeout=10)
        third = subprocess.run(
            [sys.executable, SCRIPT, "--dir", directory, "--base-port", str(base),
             "--metrics-port", str(metrics), "--kafka-port", str(kafka_port(base))],
            capture_output=True, text=True, cwd=ROOT, timeout=60,
        )  # fmt: skip
        assert third.returncode == 1
        assert third.stderr.splitlines() == [
            f"make run: cannot start: {taken(base, metrics)} already in use: nodes of an "
            f"earlier `make run` on {directory} still run (pids {' '.join(map(str, pids))}; "
            "kill them first)"
        ]
    finally:
        second.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_killed_node_is_reported_and_restarted_and_a_second_run_is_refused(tmp_path):
    directory = str(tmp_path / "cluster")
    base = free_range(12)
    metrics = base + 6  # one range: two could overlap
    fast = [f"--override={k}={v}" for k, v in FAST.items()]
    run = MakeRun(directory, base, metrics, "--restart-backoff-ms", "300", *fast)
    try:
        bootstrap = run.bootstrap()
        pids = [int(p) for p in run.wait_for(r"pids ([\d ]+)\)").group(1).split()]
        run.wait_for("Ctrl-C stops the cluster")

        # A second `make run`: on the same directory, and on the same ports.
        for other_dir, why in [
            (directory, f"another `make run` (pid {run.proc.pid}) is running the cluster in"),
            (str(tmp_path / "other"), f"{taken(base, metrics)} already in use: is a cluster"),
        ]:
            refused = subprocess.run(
                [sys.executable, SCRIPT, "--dir", other_dir, "--base-port", str(base),
                 "--metrics-port", str(metrics), "--kafka-port", str(kafka_port(base))],
                capture_output=True, text=True, cwd=ROOT, timeout=60,
            )  # fmt: skip
            assert refused.returncode == 1 and refused.stdout == ""
            [line] = refused.stderr.splitlines()
            assert line.startswith(f"make run: cannot start: {why}"), line

        # Auto-created topics get three replicas and min.insync.replicas 2.
        with Producer(bootstrap, acks=-1) as producer:
            producer.send("auto", b"v").get(timeout=30)
        with AdminClient(bootstrap) as admin:
            [auto] = admin.describe_topics(["auto"])
        assert [len(p.replicas) for p in auto.partitions] == [3]

        os.kill(pids[1], signal.SIGKILL)
        run.wait_for(r"node 2 ended \(killed by SIGKILL\) after [\d.]+ s; restarting it in 0.3 s")
        run.wait_for(r"node 2 restarted \(pid \d+\)")
        run.wait_for("node 2 is back: registered, caught up and unfenced", 30)
        create_rf3_topic_at_once(bootstrap, "after-the-restart")
        output = run.stop(signal.SIGTERM)  # as a service manager stops it
    finally:
        run.kill()
    assert "stopped (exit codes [0, 0, 0])" in output


def test_a_node_that_keeps_crashing_is_left_stopped(tmp_path):
    """Real processes that end at once (their config cannot be read): restarted twice, then
    no more, saying so."""
    said: list[str] = []
    spec = NodeSpec(7, str(tmp_path / "missing.properties"), str(tmp_path / "7.log"), "x:1")
    supervisor = Supervisor(
        [spec], RestartPolicy(backoff_s=0.05, quick_s=30, max_quick_crashes=3), said.append
    )
    supervisor.start_all()
    deadline = time.monotonic() + 60
    while not supervisor.given_up() and time.monotonic() < deadline:
        supervisor.poll()
        time.sleep(0.05)
    assert supervisor.given_up() == [7]
    assert [s.split(" after")[0] for s in said if "ended" in s] == [
        "node 7 ended (exit code 1)"
    ] * 3
    assert sum("restarted" in s for s in said) == 2
    assert "it ended 3 times in a row within 30 s of starting; not restarting it" in said[-1]
    assert "cannot read" in open(spec.log).read()


@pytest.mark.parametrize(
    "code, words", [(1, "exit code 1"), (-9, "killed by SIGKILL"), (-15, "killed by SIGTERM")]
)
def test_how_a_node_ended_is_said_in_words(code, words):
    assert how_it_ended(code) == words
