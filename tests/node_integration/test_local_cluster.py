"""`make run`'s cluster (deploy/local/cluster.py): three combined nodes come up, the script
prints where they are, Ctrl-C stops them cleanly, and a second run reuses the data."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

from node_cluster import ROOT

SCRIPT = os.path.join(ROOT, "deploy", "local", "cluster.py")


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


def run_once(directory: str, base: int) -> str:
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, "--dir", directory, "--base-port", str(base)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "Ctrl-C stops the cluster" in line or "did not come up" in line:
            break
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=90)
    output = "".join(lines) + rest
    assert proc.returncode == 0, output
    return output


def test_the_local_cluster_starts_stops_and_keeps_its_data(tmp_path):
    directory = str(tmp_path / "cluster")
    base = free_range(6)
    first = run_once(directory, base)
    assert "is up: 3 combined nodes" in first and f"127.0.0.1:{base}" in first
    assert "stopped (exit codes [0, 0, 0])" in first
    cluster_id = open(os.path.join(directory, "cluster.id")).read().strip()
    second = run_once(directory, base)
    assert f"Strom cluster {cluster_id} is up" in second
