"""Keeps `make run`'s node processes running, as a process supervisor (systemd, Kubernetes)
keeps a Kafka broker's: a node that ends while the cluster is meant to run is reported
(which node, how it ended, where its log is) and started again after a short backoff, so a
failover can be watched (`kill -9` a broker) and undone. A node that keeps crashing soon
after it starts (a port taken, a broken data directory) is left stopped, and the supervisor
says so, instead of being restarted in a loop.

RestartPolicy is the decision alone (no processes, no clock); Supervisor applies it to real
processes, each started in a session of its own so that a Ctrl-C in the terminal reaches the
supervisor only, which then stops every node with SIGTERM (a controlled shutdown). Nodes
outlive a supervisor that is killed (kill -9); each node's pid is in <node dir>/server.pid,
and the next `make run` names them (deploy/local/guard.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

READY_SERVICE = "strom.ready"  # server/health.py


@dataclass(frozen=True)
class RestartPolicy:
    backoff_s: float = 2.0  # from a node's end to its restart
    quick_s: float = 10.0  # an end this soon after the start is a quick crash
    max_quick_crashes: int = 3  # in a row: the node is left stopped

    def after_exit(self, uptime_s: float, quick_crashes: int) -> int:
        """The count of quick crashes in a row once a node ended after `uptime_s`; the
        node is restarted while it stays below max_quick_crashes."""
        return quick_crashes + 1 if uptime_s < self.quick_s else 0

    def gives_up(self, quick_crashes: int) -> bool:
        return quick_crashes >= self.max_quick_crashes


def how_it_ended(returncode: int) -> str:
    """'exit code 1', or 'killed by SIGKILL' for a negative return code."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


@dataclass(frozen=True)
class NodeSpec:
    node_id: int
    config: str  # its server.properties
    log: str  # stdout and stderr go here
    broker_address: str  # host:port where grpc.health.v1 answers
    ca: str | None = None  # a TLS listener's: the CA certificate to check it with


def pid_file(spec: NodeSpec) -> str:
    return os.path.join(os.path.dirname(spec.config), "server.pid")


@dataclass
class _Node:
    spec: NodeSpec
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    quick_crashes: int = 0
    restart_at: float | None = None  # a restart is due then
    awaiting_ready: bool = False  # restarted: say so once it is ready again
    given_up: bool = False
    exit_codes: list[int] = field(default_factory=list)


def _channel(address: str, ca: str | None) -> grpc.Channel:
    if ca is None:
        return grpc.insecure_channel(address)
    with open(ca, "rb") as f:
        return grpc.secure_channel(address, grpc.ssl_channel_credentials(f.read()))


def is_ready(address: str, timeout_s: float = 1.0, ca: str | None = None) -> bool:
    """Whether the node at `address` answers strom.ready SERVING: registered under this
    process, caught up and unfenced (server/health.py). On a TLS listener (`ca` given) over
    TLS only: health needs no SASL login and no client certificate on a SASL_SSL one."""
    with _channel(address, ca) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service=READY_SERVICE)
        try:
            answer = stub.Check(request, timeout=timeout_s)
        except grpc.RpcError:
            return False
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


class Supervisor:
    def __init__(
        self,
        specs: list[NodeSpec],
        policy: RestartPolicy,
        say: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.nodes = {s.node_id: _Node(s) for s in specs}
        self.policy = policy
        self.say = say
        self.clock = clock

    def start_all(self) -> None:
        for node in self.nodes.values():
            self._start(node)

    def _start(self, node: _Node) -> None:
        with open(node.spec.log, "ab") as log:
            node.proc = subprocess.Popen(
                [sys.executable, "-m", "strom_tools", "server", node.spec.config],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C reaches the supervisor only
            )
        node.started_at = self.clock()
        node.restart_at = None
        # For guard.py: nodes outlive a supervisor that was killed (sessions of their own).
        with open(pid_file(node.spec), "w") as f:
            f.write(f"{node.proc.pid}\n")

    def given_up(self) -> list[int]:
        return [n for n, node in self.nodes.items() if node.given_up]

    def poll(self) -> None:
        """Notices nodes that ended, restarts those whose backoff is over, and reports
        restarted nodes once they are ready again. Call it a few times a second."""
        now = self.clock()
        for node_id, node in self.nodes.items():
            if node.proc is not None and node.proc.poll() is not None:
                self._ended(node_id, node, node.proc.returncode, now)
            elif node.restart_at is not None and now >= node.restart_at:
                self._start(node)
                assert node.proc is not None
                node.awaiting_ready = True
                self.say(f"node {node_id} restarted (pid {node.proc.pid})")
            elif node.awaiting_ready and is_ready(
                node.spec.broker_address, timeout_s=0.2, ca=node.spec.ca
            ):
                node.awaiting_ready = False
                self.say(f"node {node_id} is back: registered, caught up and unfenced")

    def _ended(self, node_id: int, node: _Node, code: int, now: float) -> None:
        node.proc = None
        node.awaiting_ready = False
        node.exit_codes.append(code)
        uptime = now - node.started_at
        node.quick_crashes = self.policy.after_exit(uptime, node.quick_crashes)
        ended = f"node {node_id} ended ({how_it_ended(code)}) after {uptime:.1f} s"
        if self.policy.gives_up(node.quick_crashes):
            node.given_up = True
            self.say(
                f"{ended}: it ended {node.quick_crashes} times in a row within "
                f"{self.policy.quick_s:g} s of starting; not restarting it (see {node.spec.log})"
            )
            return
        node.restart_at = now + self.policy.backoff_s
        self.say(f"{ended}; restarting it in {self.policy.backoff_s:g} s (log: {node.spec.log})")

    def stop_all(self, timeout_s: float, force: Callable[[], bool] = lambda: False) -> list[int]:
        """SIGTERM to every running node (a controlled shutdown), then waits for them; past
        `timeout_s`, or once `force()` says so (a second Ctrl-C), SIGKILL. Returns each
        node's exit code; for a node that was down, how it last ended."""
        running = {n: node.proc for n, node in self.nodes.items() if node.proc is not None}
        for proc in running.values():
            proc.send_signal(signal.SIGTERM)
        deadline = self.clock() + timeout_s
        while any(p.poll() is None for p in running.values()):
            if force() or self.clock() > deadline:
                for proc in running.values():
                    if proc.poll() is None:
                        proc.kill()
            time.sleep(0.1)
        codes = []
        for node_id, node in sorted(self.nodes.items()):
            proc = running.get(node_id)
            codes.append(proc.returncode if proc is not None else node.exit_codes[-1])
            node.proc = None
        return codes

    def pids(self) -> dict[int, int]:
        return {n: node.proc.pid for n, node in self.nodes.items() if node.proc is not None}
