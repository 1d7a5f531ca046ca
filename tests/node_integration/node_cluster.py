"""Real `strom server` processes on loopback, for the node tests (and `make run`'s shape).

Each node gets its own directory with a server.properties, is formatted with
`strom storage format`, and runs as `python -m strom_tools server`; stdout/stderr go to a file
beside its data. The ControllerService of any controller answers descriptions; `call`
follows NOT_CONTROLLER to the active one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

import grpc

from strom.uuids import random_uuid
from strom_api.v1 import common_pb2, controller_pb2, controller_pb2_grpc
from tests.raft_integration.process_cluster import free_ports, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAST = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1500",
    "controller.quorum.request.timeout.ms": "500",
    "controller.quorum.append.linger.ms": "2",
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "1500",
}


class NodeCluster:
    """`nodes` combined nodes (ids 1..nodes); with `brokers` > 0, the first `nodes` are
    controllers only and `brokers` broker-only nodes follow (ids nodes+1..)."""

    def __init__(
        self,
        base: str,
        nodes: int = 3,
        extra: dict[str, str] | None = None,
        brokers: int = 0,
        hosts: dict[int, str] | None = None,
        launcher: dict[int, list[str]] | None = None,
        format_args: Sequence[str] = (),
    ) -> None:
        """`hosts`: each node's address (default 127.0.0.1); `launcher`: a command prefix
        per node (tests/chaos runs each node in its own network namespace this way);
        `format_args`: more options of every node's `strom storage format`."""
        self.base = base
        self.ids = list(range(1, nodes + brokers + 1))
        self.host = {i: (hosts or {}).get(i, "127.0.0.1") for i in self.ids}
        self.launcher = launcher or {}
        self.controller_ids = self.ids[:nodes]
        self.split = brokers > 0
        n = len(self.ids)
        ports = free_ports(3 * n)
        self.broker_port = dict(zip(self.ids, ports[:n], strict=True))
        self.controller_port = dict(zip(self.ids, ports[n : 2 * n], strict=True))
        self.metrics_port = dict(zip(self.ids, ports[2 * n :], strict=True))
        self.voters = ",".join(
            f"{i}@{self.host[i]}:{self.controller_port[i]}" for i in self.controller_ids
        )
        self.extra = {**FAST, **(extra or {})}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        # What `strom storage random-uuid` prints (tests/test_cli.py runs the command itself).
        self.cluster_id = random_uuid()
        for i in self.ids:
            self._write_config(i)
        self._format_all(format_args)

    def _format_all(self, format_args: Sequence[str]) -> None:
        """Every node's `strom storage format`, all at once: each is a Python start-up that
        imports the server (1.3-1.7 s on a 2-core machine), one after another they were
        most of a cluster's construction, and the suite builds about a hundred clusters."""
        runs = {
            i: subprocess.Popen(
                self._tool_argv(
                    "storage",
                    "format",
                    "--config",
                    self.config_path(i),
                    "--cluster-id",
                    self.cluster_id,
                    *format_args,
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                **self._tool_context(),
            )
            for i in self.ids
        }
        for run in runs.values():
            out, err = run.communicate()
            if run.returncode != 0:
                raise subprocess.CalledProcessError(run.returncode, run.args, out, err)

    def config_path(self, node: int) -> str:
        return os.path.join(self.base, f"node{node}", "server.properties")

    def data_dir(self, node: int) -> str:
        return os.path.join(self.base, f"node{node}", "data")

    def _write_config(self, node: int) -> None:
        os.makedirs(os.path.dirname(self.config_path(node)), exist_ok=True)
        host = self.host[node]
        if not self.split:
            roles = "broker,controller"
            listeners = (
                f"PLAINTEXT://{host}:{self.broker_port[node]},"
                f"CONTROLLER://{host}:{self.controller_port[node]}"
            )
        elif node in self.controller_ids:
            roles, listeners = "controller", f"CONTROLLER://{host}:{self.controller_port[node]}"
        else:
            roles, listeners = "broker", f"PLAINTEXT://{host}:{self.broker_port[node]}"
        lines = {
            "process.roles": roles,
            "node.id": str(node),
            "controller.quorum.voters": self.voters,
            "listeners": listeners,
            "controller.listener.names": "CONTROLLER",
            "log.dirs": self.data_dir(node),
            "prometheus.metrics.host": host,
            "prometheus.metrics.port": str(self.metrics_port[node]),
            **self.extra,
        }
        with open(self.config_path(node), "w") as f:
            f.write("# written by tests/node_integration/node_cluster.py\n")
            f.writelines(f"{k}={v}\n" for k, v in lines.items())

    @staticmethod
    def _tool_argv(*args: str) -> list[str]:
        """The `strom` command as this checkout runs it (no install needed)."""
        return [sys.executable, "-m", "strom_tools", *args]

    @staticmethod
    def _tool_context() -> dict[str, Any]:
        """Where and with what environment every node process and tool run starts."""
        return {"cwd": ROOT, "env": dict(os.environ, PYTHONPATH=ROOT)}

    def _strom(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self._tool_argv(*args),
            capture_output=True,
            text=True,
            check=True,
            **self._tool_context(),
        )

    # --- processes -----------------------------------------------------------------------

    def start(self, node: int) -> None:
        log = open(os.path.join(self.base, f"node{node}", "server.log"), "ab")  # noqa: SIM115
        self.procs[node] = subprocess.Popen(
            [*self.launcher.get(node, []), *self._tool_argv("server", self.config_path(node))],
            stdout=log,
            stderr=subprocess.STDOUT,
            **self._tool_context(),
        )
        log.close()

    def start_all(self) -> None:
        for node in self.ids:
            self.start(node)

    def stop(self, node: int, sig: int = signal.SIGTERM, timeout_s: float = 40) -> int:
        proc = self.procs.pop(node)
        proc.send_signal(sig)
        return proc.wait(timeout=timeout_s)

    def stop_all(self) -> None:
        for node in list(self.procs):
            self.stop(node, signal.SIGKILL)

    def assert_running(self, nodes: set[int]) -> None:
        """Fails at once, with the node's last log lines, when one of `nodes` exited: a wait
        for it would only time out and hide why (a port taken, a bad config, a crash)."""
        for node in sorted(nodes):
            proc = self.procs.get(node)
            if proc is not None and proc.poll() is not None:
                tail = "\n".join(self.log_text(node).splitlines()[-20:])
                raise AssertionError(f"node {node} exited with {proc.returncode}:\n{tail}")

    def log_text(self, node: int) -> str:
        with open(os.path.join(self.base, f"node{node}", "server.log"), errors="replace") as f:
            return f.read()

    # --- the controller API --------------------------------------------------------------

    def channel(self, target: str) -> grpc.Channel:
        """A channel to a node's listener (a TLS cluster's tests override it)."""
        return grpc.insecure_channel(target)

    def stub(self, node: int) -> Any:
        channel = self.channel(f"{self.host[node]}:{self.controller_port[node]}")
        return controller_pb2_grpc.ControllerServiceStub(channel)  # type: ignore[no-untyped-call]

    def describe_cluster(self, node: int | None = None) -> Any | None:
        for n in [node] if node else [c for c in self.controller_ids if c in self.procs]:
            try:
                return self.stub(n).DescribeCluster(
                    controller_pb2.DescribeClusterRequest(), timeout=2
                )
            except grpc.RpcError:
                continue
        return None

    def call(self, method: str, request: Any, timeout_s: float = 20) -> Any:
        """Calls the active controller, following NOT_CONTROLLER and retrying while there
        is none."""

        def attempt() -> Any | None:
            for node in [c for c in self.controller_ids if c in self.procs]:
                try:
                    response = getattr(self.stub(node), method)(request, timeout=5)
                except grpc.RpcError:
                    continue
                has_error = "error" in response.DESCRIPTOR.fields_by_name
                if has_error and response.error.error.code == common_pb2.NOT_CONTROLLER:
                    continue
                return response
            return None

        return wait_until(attempt, timeout_s, f"the active controller to answer {method}")

    def wait_for_brokers(self, expected: set[int] | None = None, timeout_s: float = 30) -> Any:
        """Waits until exactly `expected` (default: every broker running) are unfenced."""
        if expected is None:
            brokers = self.ids if not self.split else self.ids[len(self.controller_ids) :]
            expected = {b for b in brokers if b in self.procs}

        def check() -> Any | None:
            self.assert_running(expected)
            described = self.describe_cluster()
            if described is None:
                return None
            live = {b.broker_id for b in described.brokers if not b.fenced}
            return described if live == expected else None

        return wait_until(check, timeout_s, f"brokers {sorted(expected)} unfenced")

    def scrape(self, node: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """The node's /metrics as {(name, sorted labels): value}."""
        from prometheus_client.parser import text_string_to_metric_families

        url = f"http://{self.host[node]}:{self.metrics_port[node]}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return samples

    def active_controller(self) -> int:
        def find() -> int | None:
            for node in [c for c in self.controller_ids if c in self.procs]:
                cluster = self.describe_cluster(node)
                if cluster is not None and cluster.controller_id in self.procs:
                    return int(cluster.controller_id)
            return None

        return wait_until(find, 20, "an active controller")


@contextlib.contextmanager
def running_cluster(base: str, nodes: int = 3, **options: Any) -> Iterator[NodeCluster]:
    """A NodeCluster started, its brokers unfenced, and stopped afterwards (the body of most
    module-scoped cluster fixtures)."""
    cluster = NodeCluster(base, nodes, **options)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        yield cluster
    finally:
        cluster.stop_all()
