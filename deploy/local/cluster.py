"""`make run`: a local cluster of three combined nodes (broker + controller) on loopback.

    python deploy/local/cluster.py [--dir .local-cluster] [--base-port 9092] [--metrics-port 9404]

Node i listens for clients on PLAINTEXT 127.0.0.1:(base + 2(i-1)) and for controllers on
CONTROLLER 127.0.0.1:(base + 2(i-1) + 1), and serves Prometheus /metrics on 127.0.0.1:
(metrics port + i - 1), 9404-9406 by default. On first use the directory gets a cluster id and
each node's server.properties, and its data directories are formatted (`strom storage
format`); later runs reuse them, so data survives restarts. Logs go to <dir>/node<i>/
server.log. Ctrl-C (or SIGTERM) stops the nodes with a controlled shutdown.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

import grpc

from strom_api.v1 import controller_pb2, controller_pb2_grpc

NODES = (1, 2, 3)


def strom(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def prepare(directory: str, base_port: int, metrics_port: int) -> str:
    os.makedirs(directory, exist_ok=True)
    id_file = os.path.join(directory, "cluster.id")
    if not os.path.exists(id_file):
        with open(id_file, "w") as f:
            f.write(strom("storage", "random-uuid") + "\n")
    with open(id_file) as f:
        cluster_id = f.read().strip()
    voters = ",".join(f"{i}@127.0.0.1:{base_port + 2 * (i - 1) + 1}" for i in NODES)
    for i in NODES:
        node_dir = os.path.join(directory, f"node{i}")
        os.makedirs(node_dir, exist_ok=True)
        config = os.path.join(node_dir, "server.properties")
        port = base_port + 2 * (i - 1)
        with open(config, "w") as f:
            f.write(
                "# The local cluster of `make run` (deploy/local/cluster.py rewrites this).\n"
                "process.roles=broker,controller\n"
                f"node.id={i}\n"
                f"controller.quorum.voters={voters}\n"
                f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}\n"
                "controller.listener.names=CONTROLLER\n"
                f"log.dirs={os.path.abspath(os.path.join(node_dir, 'data'))}\n"
                "prometheus.metrics.host=127.0.0.1\n"
                f"prometheus.metrics.port={metrics_port + i - 1}\n"
            )
        strom(
            "storage",
            "format",
            "--config",
            config,
            "--cluster-id",
            cluster_id,
            "--ignore-formatted",
        )
    return cluster_id


def wait_ready(base_port: int, timeout_s: float) -> controller_pb2.DescribeClusterResponse | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for i in NODES:
            address = f"127.0.0.1:{base_port + 2 * (i - 1) + 1}"
            try:
                with grpc.insecure_channel(address) as channel:
                    stub = controller_pb2_grpc.ControllerServiceStub(channel)
                    cluster = stub.DescribeCluster(
                        controller_pb2.DescribeClusterRequest(), timeout=1
                    )
            except grpc.RpcError:
                continue
            live = [b for b in cluster.brokers if not b.fenced]
            if cluster.controller_id > 0 and len(live) == len(NODES):
                return cluster
        time.sleep(0.2)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=".local-cluster")
    parser.add_argument("--base-port", type=int, default=9092)
    parser.add_argument(
        "--metrics-port", type=int, default=9404, help="node i serves /metrics on this + i - 1"
    )
    args = parser.parse_args()
    cluster_id = prepare(args.dir, args.base_port, args.metrics_port)
    procs = []
    for i in NODES:
        log = open(os.path.join(args.dir, f"node{i}", "server.log"), "ab")  # noqa: SIM115
        config = os.path.join(args.dir, f"node{i}", "server.properties")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "strom.cli", "server", config],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        log.close()
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    cluster = wait_ready(args.base_port, 60)
    if cluster is None:
        print(f"the cluster did not come up in 60 s; see {args.dir}/node*/server.log")
        stopping = True
    else:
        brokers = ",".join(f"127.0.0.1:{args.base_port + 2 * (i - 1)}" for i in NODES)
        controllers = ",".join(f"127.0.0.1:{args.base_port + 2 * (i - 1) + 1}" for i in NODES)
        print(f"Strom cluster {cluster_id} is up: 3 combined nodes, data in {args.dir}/")
        print(f"  bootstrap servers (brokers): {brokers}")
        print(f"  controllers: {controllers}; active controller: node {cluster.controller_id}")
        targets = ",".join(f"127.0.0.1:{args.metrics_port + i - 1}" for i in NODES)
        print(f"  Prometheus scrape targets (/metrics): {targets}")
        print("  `make monitor` runs Prometheus on them with the alert rules (deploy/README.md)")
        print("  Ctrl-C stops the cluster (controlled shutdown).", flush=True)
    while not stopping and all(p.poll() is None for p in procs):
        time.sleep(0.2)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    codes = [p.wait(timeout=60) for p in procs]
    print(f"stopped (exit codes {codes})", flush=True)
    return 0 if cluster is not None and all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
