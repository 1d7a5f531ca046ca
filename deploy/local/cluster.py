"""`make run`: a local cluster of three combined nodes (broker + controller) on loopback.

    python deploy/local/cluster.py [--secure] [--dir .local-cluster] [--base-port 9092]
        [--kafka-port 9192] [--metrics-port 9404] [--restart-backoff-ms 2000]
        [--override key=value ...]

Node i listens for clients on PLAINTEXT 127.0.0.1:(base + 2(i-1)) and for controllers on
CONTROLLER 127.0.0.1:(base + 2(i-1) + 1), for Kafka's own clients on KAFKA 127.0.0.1:
(kafka port + i - 1) (Kafka's binary protocol, kafka.listener.names; default kafka port:
base + 100, so 9192-9194), and serves Prometheus /metrics on 127.0.0.1:(metrics port + i -
1), 9404-9406 by default. On first use the directory gets a cluster id and
each node's server.properties, and its data directories are formatted (`strom storage
format`); later runs reuse them, so data survives restarts. Logs go to <dir>/node<i>/
server.log. Topics get replication factor 3 and min.insync.replicas 2 by default (auto-created
ones too), so one node may be down without refusing acks=all writes.

`make run-secure` is the same with --secure (data in .local-cluster-secure by default):
node i's client listener CLIENT is SASL_SSL (SCRAM-SHA-512) on base + 3(i-1), CONTROLLER
(SSL, mTLS) on the next port, and REPLICATION (SSL, mTLS; inter.broker.listener.name) on
the one after; the authorizer is on; a CA, node certificates and an admin user are made on
first use (deploy/local/secure.py), and the "up" lines also name the admin's client
properties file (`admin client config: <path>`) for the tools' --command-config.

- It refuses, with one line, to start over a running cluster (deploy/local/guard.py).
- It prints the bootstrap servers only once the cluster can take a replication-factor-3
  topic: every node answers readiness (registered under its current process, caught up,
  unfenced) and the controller describes three unfenced brokers.
- It keeps the cluster running: a node that ends is reported and restarted
  (deploy/local/supervisor.py), so `kill -9` of a broker shows a failover, and the restart
  undoes it.
- Ctrl-C (or SIGTERM) stops every node with a controlled shutdown; a second Ctrl-C kills
  those still stopping.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from typing import Any

import secure
from guard import CannotStart, live_nodes, lock_directory, ports_in_use
from supervisor import NodeSpec, RestartPolicy, Supervisor, is_ready

from server.main import format_storage
from strom.admin import AdminClient
from strom.client_properties import client_settings
from strom.errors import StromError

NODES = (1, 2, 3)
STOP_TIMEOUT_S = 60


def strom(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "strom_tools", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def broker_port(base_port: int, node: int, secure: bool = False) -> int:
    """The client listener's port; the controller listener's is the next one, and with
    --secure the REPLICATION listener's the one after."""
    return base_port + (3 if secure else 2) * (node - 1)


def node_ports(base_port: int, node: int, secure: bool, kafka_port: int) -> list[int]:
    """Every port node `node` binds but its metrics one. The secured cluster has no Kafka
    listener: the Kafka listener serves PLAINTEXT only for now."""
    first = broker_port(base_port, node, secure)
    if secure:
        return list(range(first, first + 3))
    return [first, first + 1, kafka_port + node - 1]


def format_node(config: str, cluster_id: str, add_scram: list[str]) -> None:
    """`strom storage format --ignore-formatted`, in this process so that the admin's
    password (--add-scram) never shows in a process list."""
    with contextlib.redirect_stdout(io.StringIO()):
        code = format_storage(config, cluster_id, [], True, add_scram)
    if code != 0:  # format_storage said why on stderr
        raise SystemExit(f"strom storage format --config {config} failed")


def prepare(
    directory: str,
    base_port: int,
    metrics_port: int,
    overrides: list[str],
    secured: secure.Secured | None = None,
    kafka_port: int = 9192,
) -> str:
    os.makedirs(directory, exist_ok=True)
    id_file = os.path.join(directory, "cluster.id")
    if not os.path.exists(id_file):
        with open(id_file, "w") as f:
            f.write(strom("storage", "random-uuid") + "\n")
    with open(id_file) as f:
        cluster_id = f.read().strip()
    is_secure = secured is not None
    voters = ",".join(f"{i}@127.0.0.1:{broker_port(base_port, i, is_secure) + 1}" for i in NODES)
    for i in NODES:
        node_dir = os.path.join(directory, f"node{i}")
        os.makedirs(node_dir, exist_ok=True)
        config = os.path.join(node_dir, "server.properties")
        port = broker_port(base_port, i, is_secure)
        if secured is None:
            kafka = kafka_port + i - 1
            listeners = [
                f"listeners=PLAINTEXT://127.0.0.1:{port},KAFKA://127.0.0.1:{kafka},"
                f"CONTROLLER://127.0.0.1:{port + 1}",
                "controller.listener.names=CONTROLLER",
                "# KAFKA speaks Kafka's binary protocol (kcat, confluent-kafka, ...).",
                "kafka.listener.names=KAFKA",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT,"
                "CONTROLLER:PLAINTEXT",
            ]
        else:
            listeners = secure.server_properties(secured, i, (port, port + 2, port + 1), NODES)
        with open(config, "w") as f:
            f.write(
                "# The local cluster of `make run` (deploy/local/cluster.py rewrites this).\n"
                "process.roles=broker,controller\n"
                f"node.id={i}\n"
                f"controller.quorum.voters={voters}\n"
            )
            f.writelines(f"{line}\n" for line in listeners)
            f.write(
                f"log.dirs={os.path.abspath(os.path.join(node_dir, 'data'))}\n"
                "prometheus.metrics.host=127.0.0.1\n"
                f"prometheus.metrics.port={metrics_port + i - 1}\n"
                "# Three replicas of every topic, auto-created ones too; acks=all writes go on\n"
                "# while one node is down.\n"
                "default.replication.factor=3\n"
                "min.insync.replicas=2\n"
            )
            f.writelines(f"{item}\n" for item in overrides)
        format_node(config, cluster_id, [] if secured is None else [secure.add_scram(secured)])
    return cluster_id


def cluster_ready(admin: AdminClient) -> dict[str, Any] | None:
    """The controller's description once it has an active controller and every node as
    an unfenced broker, else None."""
    try:
        cluster = admin.describe_cluster()
    except StromError:
        return None
    unfenced = [b for b in cluster["brokers"] if not b["fenced"]]
    return cluster if cluster["controller_id"] >= 0 and len(unfenced) == len(NODES) else None


def wait_ready(
    supervisor: Supervisor, admin: AdminClient, specs: list[NodeSpec], timeout_s: float,
    stopping: Any,
) -> dict[str, Any] | None:  # fmt: skip
    """Until the cluster can take a replication-factor-3 topic. Readiness of each node
    counts first: after a restart the controller's image still shows the previous
    processes' registrations, unfenced, until the new ones replace them."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not stopping() and not supervisor.given_up():
        supervisor.poll()
        if all(is_ready(s.broker_address, ca=s.ca) for s in specs):
            cluster = cluster_ready(admin)
            if cluster is not None:
                return cluster
        time.sleep(0.2)
    return None


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL clients, mTLS between nodes, the authorizer on (make run-secure)",
    )
    parser.add_argument("--dir", help=".local-cluster, with --secure .local-cluster-secure")
    parser.add_argument("--base-port", type=int, default=9092)
    parser.add_argument(
        "--kafka-port",
        type=int,
        help="node i's Kafka protocol listener on this + i - 1 (default: base port + 100)",
    )
    parser.add_argument(
        "--metrics-port", type=int, default=9404, help="node i serves /metrics on this + i - 1"
    )
    parser.add_argument(
        "--restart-backoff-ms", type=int, default=2000, help="from a node's end to its restart"
    )
    parser.add_argument("--ready-timeout-s", type=float, default=60)
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a line added to every node's server.properties (repeatable)",
    )
    args = parser.parse_args()
    args.dir = args.dir or (".local-cluster-secure" if args.secure else ".local-cluster")
    kafka_port = args.kafka_port if args.kafka_port is not None else args.base_port + 100
    command = "make run-secure" if args.secure else "make run"
    os.makedirs(args.dir, exist_ok=True)
    try:
        lock = lock_directory(args.dir)  # held until this process ends
        addresses = [
            ("127.0.0.1", port)
            for i in NODES
            for port in (
                *node_ports(args.base_port, i, args.secure, kafka_port),
                args.metrics_port + i - 1,
            )
        ]
        taken = ports_in_use(addresses)
        orphans = live_nodes(args.dir)
        if taken and orphans:
            raise CannotStart(
                f"{', '.join(taken)} already in use: nodes of an earlier `{command}` on "
                f"{args.dir} still run (pids {' '.join(map(str, orphans))}; kill them first)"
            )
        if taken:
            raise CannotStart(
                f"{', '.join(taken)} already in use: is a cluster already running there? "
                "(another --base-port / --metrics-port runs a second one)"
            )
    except CannotStart as error:
        print(f"{command}: cannot start: {error}", file=sys.stderr)
        return 1
    secured = secure.prepare(args.dir, NODES) if args.secure else None
    cluster_id = prepare(
        args.dir, args.base_port, args.metrics_port, args.override, secured, kafka_port
    )
    specs = [
        NodeSpec(
            i,
            os.path.join(args.dir, f"node{i}", "server.properties"),
            os.path.join(args.dir, f"node{i}", "server.log"),
            f"127.0.0.1:{broker_port(args.base_port, i, args.secure)}",
            None if secured is None else secured.ca,
        )
        for i in NODES
    ]
    policy = RestartPolicy(backoff_s=args.restart_backoff_ms / 1000)
    supervisor = Supervisor(specs, policy, say)
    signals = 0

    def on_signal(signum: int, frame: object) -> None:
        nonlocal signals
        signals += 1

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    brokers = ",".join(s.broker_address for s in specs)
    client_config = None if secured is None else secured.client_config
    admin = AdminClient(brokers, request_timeout_ms=2000, **client_settings(client_config))
    try:
        supervisor.start_all()
        cluster = wait_ready(supervisor, admin, specs, args.ready_timeout_s, lambda: signals > 0)
    finally:
        admin.close()
    if cluster is None and signals == 0:
        given_up = supervisor.given_up()
        why = (
            f"node(s) {', '.join(map(str, given_up))} kept crashing"
            if given_up
            else f"not ready in {args.ready_timeout_s:g} s"
        )
        say(f"the cluster did not come up ({why}); see {args.dir}/node*/server.log")
    elif cluster is not None:
        controllers = ",".join(
            f"127.0.0.1:{broker_port(args.base_port, i, args.secure) + 1}" for i in NODES
        )
        kind = "3 combined nodes" + (", secured" if secured else "")
        print(f"Strom cluster {cluster_id} is up: {kind}, data in {args.dir}/")
        print(f"  bootstrap servers (brokers): {brokers}")
        if secured is None:
            kafka = ",".join(f"127.0.0.1:{kafka_port + i - 1}" for i in NODES)
            print(
                f"  Kafka protocol (bootstrap.servers): {kafka} (Kafka's clients and tools; "
                f"try: kcat -L -b {kafka})"
            )
        if secured is not None:
            print(
                "  clients: SASL_SSL with SCRAM-SHA-512 (user admin, a super user); nodes: "
                f"mTLS; the authorizer is on. CA: {secured.ca}"
            )
            print(f"  admin client config: {secured.client_config}")
            print(
                f"  try: strom topics --bootstrap-server {brokers} --command-config "
                f"{secured.client_config} --list"
            )
        print(f"  controllers: {controllers}; active controller: node {cluster['controller_id']}")
        targets = ",".join(f"127.0.0.1:{args.metrics_port + i - 1}" for i in NODES)
        print(f"  Prometheus scrape targets (/metrics): {targets}")
        print("  `make monitor` runs Prometheus on them with the alert rules (deploy/README.md)")
        print(
            f"  A node that ends is restarted after {policy.backoff_s:g} s (try kill -9 of "
            f"one: pids {' '.join(str(p) for p in supervisor.pids().values())})."
        )
        print("  Ctrl-C stops the cluster (controlled shutdown).", flush=True)
        while signals == 0:
            supervisor.poll()
            time.sleep(0.2)
    say("stopping the nodes (controlled shutdown; Ctrl-C again kills them)")
    codes = supervisor.stop_all(STOP_TIMEOUT_S, force=lambda: signals > 1)
    print(f"stopped (exit codes {codes})", flush=True)
    lock.close()
    clean = cluster is not None and not supervisor.given_up() and all(c == 0 for c in codes)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
