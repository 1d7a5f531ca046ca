"""Starts, kills and queries Raft node processes (node_process.py) on loopback.

Used by the integration tests and by bench/bench_raft.py. Every wait is bounded and says
what it waited for when it gives up.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

NODE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node_process.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(NODE_SCRIPT)))
T = TypeVar("T")


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


_EPHEMERAL = _ephemeral_range()
# Below the ephemeral range when it leaves room (Linux's default does): a port there is never
# taken as the local port of an outgoing connection, as a port from bind(0) can be between
# this call and the node binding it (one node connecting to another while a third starts:
# that node then fails with EADDRINUSE and a cluster never comes up).
_POOL = range(20000, _EPHEMERAL[0]) if _EPHEMERAL[0] - 20000 >= 2000 else range(0)


def _worker_slice(pool: range) -> range:
    """This pytest-xdist worker's own share of `pool`. Workers are separate processes, so
    `_handed_out` cannot stop two of them picking one port: a port probed free can be one
    whose node another worker has just stopped to restart it on that port (CI saw it)."""
    try:
        worker = int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw"))
        count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    except (KeyError, ValueError):
        return pool  # not under xdist: one process has the whole pool
    if count <= 1 or not 0 <= worker < count:
        return pool
    share = len(pool) // count
    return pool[worker * share : (worker + 1) * share]


_POOL = _worker_slice(_POOL)
_handed_out: set[int] = set()  # not handed out twice while the pool lasts (two calls, one cluster)
_random = random.Random()


def free_ports(n: int) -> list[int]:
    """`n` distinct ports nothing on this machine listens on or has bound now."""
    ports: list[int] = []
    tries = 0
    while len(ports) < n and _POOL and tries < 20 * len(_POOL):
        tries += 1
        if len(_handed_out) >= len(_POOL) // 2:
            _handed_out.clear()
        port = _random.choice(_POOL)
        if port in _handed_out or port in ports:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        ports.append(port)
    if len(ports) < n:  # no such pool here: let the kernel pick
        sockets = [socket.socket() for _ in range(n - len(ports))]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        ports += [s.getsockname()[1] for s in sockets]
        for s in sockets:
            s.close()
    return ports


async def wait_for(predicate: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """wait_until for code on an event loop: polls without blocking it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def wait_until(predicate: Callable[[], T | None], timeout_s: float, what: str) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.01)


class ProcessCluster:
    def __init__(
        self, base_dir: str, voters: int = 3, observers: int = 0, config: Sequence[str] = ()
    ) -> None:
        ids = list(range(1, voters + observers + 1))
        ports = free_ports(2 * len(ids))  # one call: the two halves cannot collide
        raft_ports, control_ports = ports[: len(ids)], ports[len(ids) :]
        self.voter_ids = ids[:voters]
        self.observer_ids = ids[voters:]
        self.raft_address = {i: f"127.0.0.1:{p}" for i, p in zip(ids, raft_ports, strict=True)}
        self.control_port = dict(zip(ids, control_ports, strict=True))
        self.voters_arg = ",".join(f"{i}@{self.raft_address[i]}" for i in self.voter_ids)
        self.base_dir = base_dir
        self.config = list(config)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._channels: dict[int, grpc.Channel] = {}

    # --- processes -----------------------------------------------------------------------

    def start(self, node: int) -> None:
        args = [
            sys.executable,
            NODE_SCRIPT,
            "--node-id",
            str(node),
            "--voters",
            self.voters_arg,
            "--dir",
            os.path.join(self.base_dir, f"node{node}"),
            "--control-port",
            str(self.control_port[node]),
        ]
        if node in self.observer_ids:
            args += ["--observer-address", self.raft_address[node]]
        if self.config:
            args += ["--config", *self.config]
        env = dict(os.environ, PYTHONPATH=ROOT)
        # stdin=PIPE: the node exits when its stdin ends, i.e. when this process goes away.
        # stderr goes to a file beside its data (a pipe nobody reads could fill and block it).
        os.makedirs(self.base_dir, exist_ok=True)
        log_path = os.path.join(self.base_dir, f"node{node}.stderr")
        with open(log_path, "ab") as stderr:
            proc = subprocess.Popen(
                args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env
            )
        self.procs[node] = proc
        line = proc.stdout.readline() if proc.stdout else b""
        if line.strip() != b"ready":
            proc.kill()
            proc.wait(timeout=5)
            with open(log_path, "rb") as f:
                tail = f.read()[-2000:].decode(errors="replace")
            raise RuntimeError(f"node {node} did not start (exit {proc.returncode}): {tail}")

    def start_all(self) -> None:
        for node in self.voter_ids + self.observer_ids:
            self.start(node)

    def kill(self, node: int, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(node)
        proc.send_signal(sig)
        proc.wait(timeout=15)
        channel = self._channels.pop(node, None)
        if channel is not None:
            channel.close()

    def stop_all(self) -> None:
        for node in list(self.procs):
            self.kill(node, signal.SIGKILL)

    # --- the control service -------------------------------------------------------------

    def _call(self, node: int, method: str, payload: bytes, timeout_s: float = 5) -> bytes:
        channel = self._channels.get(node)
        if channel is None:
            channel = grpc.insecure_channel(f"127.0.0.1:{self.control_port[node]}")
            self._channels[node] = channel
        stub = channel.unary_unary(f"/strom.test.RaftNode/{method}")
        response: bytes = stub(payload, timeout=timeout_s)
        return response

    def status(self, node: int) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = json.loads(self._call(node, "Status", b"", 2))
            return result
        except grpc.RpcError:
            return None

    def records(self, node: int) -> list[bytes]:
        data = self._call(node, "Records", b"", 10)
        return data.split(b"\n") if data else []

    def snapshot(self, node: int) -> str:
        """Has the node snapshot all it applied; returns the snapshot id, `<end>-<epoch>`."""
        return self._call(node, "Snapshot", b"").decode()

    def leader(self) -> int | None:
        for node in self.procs:
            status = self.status(node)
            if status and status["role"] == "Leader":
                return node
        return None

    def wait_for_leader(self, timeout_s: float = 15, other_than: int | None = None) -> int:
        return wait_until(
            lambda: (lambda n: n if n is not None and n != other_than else None)(self.leader()),
            timeout_s,
            "a leader",
        )

    def append(self, records: Sequence[bytes], node: int | None = None) -> int | None:
        """Appends through `node` (default: the current leader); the offset once committed,
        or None when that node is not the leader."""
        node = node if node is not None else self.leader()
        if node is None:
            return None
        try:
            reply = self._call(node, "Append", b"\n".join(records), 10)
        except grpc.RpcError:
            return None
        return None if reply.startswith(b"ERR") else int(reply)

    def append_until_committed(self, records: Sequence[bytes], timeout_s: float = 20) -> int:
        return wait_until(lambda: self.append(records), timeout_s, "an append to commit")
