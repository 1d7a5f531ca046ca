"""One chaos run: a cluster, the workload, a seeded fault schedule, healing, a liveness check,
the final read, and the checker's report. Every run prints its seed and fault schedule.
`secured=True` runs it all against a secured cluster (secured.py): SASL_SSL clients, mTLS
between nodes, the authorizer on. `clients="confluent"` runs the producers, group readers and
final read through confluent-kafka against the nodes' Kafka protocol listeners
(kafka_clients.py); the nemeses, the admin churn, the replicas' reads and the checker are the
same."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from tests.chaos import netns
from tests.chaos.checker import Report, check
from tests.chaos.clients import ClientError, Clients, StromClients
from tests.chaos.nemesis import NETWORK_KINDS, Nemesis, schedule
from tests.chaos.node_faults import NodeFaults, missing_tools
from tests.chaos.secured import ADMIN, SecuredCluster
from tests.chaos.workload import (
    GROUP_PREFIX,
    AdminChurn,
    ControllerWatch,
    GroupReaders,
    Producers,
    Recorder,
    read_replicas,
    read_topics,
)
from tests.client.cluster_helpers import GROUP_SETTINGS, create_topic
from tests.data_plane.data_client import DataClient
from tests.kafka_listener.kafka_cluster import KafkaCluster
from tests.node_integration.node_cluster import FAST, NodeCluster

TOPIC = "chaos"
PARTITIONS = 6
LIVENESS_BOUND_S = 30.0  # after healing, produce and consume must work again within this
CLIENTS = ("strom", "confluent")  # whose producers and consumers the workload runs


@dataclass
class RunResult:
    seed: int
    topology: str
    kinds: tuple[str, ...]
    secured: bool
    clients: str  # strom or confluent
    report: Report
    schedule: list[str]
    recovered_s: float  # from healing until a produce to every partition was acknowledged
    seconds: float


def run_once(
    base: str,
    seed: int,
    kinds: tuple[str, ...],
    duration_s: float = 30.0,
    topology: str = "combined",
    echo: bool = True,
    secured: bool = False,
    clients: str = "strom",
    settings: dict[str, str] | None = None,
) -> RunResult:
    """One run; `settings`: node configs on top of the run's own."""
    started = time.monotonic()
    if clients not in CLIENTS:
        raise ValueError(f"clients must be one of {', '.join(CLIENTS)}, not {clients!r}")
    if secured and clients != "strom":
        raise RuntimeError("the secured cluster's runs use Strom's client only")
    brokers = 3 if topology == "split" else 0
    network = None
    if any(kind in NETWORK_KINDS for kind in kinds):
        if secured:  # the certificates name 127.0.0.1, not the namespaces' addresses
            raise RuntimeError("network partitions are not run against a secured cluster")
        why = netns.available()
        if why is not None:
            raise RuntimeError(f"network partitions need a private network: {why}")
        network = netns.Network(range(1, 3 + brokers + 1))
    try:
        ids = list(range(1, 3 + brokers + 1))
        slow_disk, clock = "slow-disk" in kinds, "clock-jump" in kinds
        disk_errors = "disk-error" in kinds
        missing = missing_tools(slow_disk, clock, disk_errors)
        if missing is not None:
            shimmed = ("slow-disk", "disk-error", "clock-jump")
            raise RuntimeError(f"{'/'.join(k for k in kinds if k in shimmed)} needs {missing}")
        node_faults = NodeFaults(base, ids, slow_disk, clock, disk_errors)
        cluster_type = KafkaCluster if clients == "confluent" else NodeCluster
        cluster = (SecuredCluster if secured else cluster_type)(
            base,
            3,
            extra={**GROUP_SETTINGS, **(settings or {})},
            brokers=brokers,
            hosts=network.address if network else None,
            launcher={
                i: [*(network.launcher(i) if network else []), *node_faults.env_prefix(i)]
                for i in ids
            },
        )
    except BaseException:
        if network is not None:
            network.close()
        raise
    cluster.start_all()
    try:
        cluster.wait_for_brokers(timeout_s=60)
        create_topic(cluster, TOPIC, partitions=PARTITIONS)
        brokers_ids = [
            b for b in cluster.ids if not cluster.split or b not in cluster.controller_ids
        ]
        addresses = {b: f"{cluster.host[b]}:{cluster.broker_port[b]}" for b in brokers_ids}
        bootstrap = ",".join(addresses.values())
        # The workload's users: none on a plaintext cluster; on a secured one the producers
        # and readers log in as a user holding only its ACLs, the admin churn as the admin.
        security: dict[str, Any] = {}
        admin: dict[str, Any] = {}
        if isinstance(cluster, SecuredCluster):
            cluster.grant_workload(addresses, TOPIC, GROUP_PREFIX)
            security, admin = cluster.client_settings(), cluster.client_settings(ADMIN)
            client = DataClient(addresses, cluster.broker_security())
        else:
            client = DataClient(addresses)
        workload: Clients = StromClients(bootstrap, security)
        if isinstance(cluster, KafkaCluster):
            from tests.chaos.kafka_clients import KafkaClients  # confluent-kafka only here

            workload = KafkaClients(cluster.kafka_bootstrap())
        rec = Recorder()
        producers = Producers(workload, TOPIC, count=2, rate=150, rec=rec)
        readers = GroupReaders(workload, TOPIC, count=2, rec=rec)
        metrics = {n: f"{cluster.host[n]}:{cluster.metrics_port[n]}" for n in cluster.ids}
        watch = ControllerWatch(metrics, lambda: list(cluster.procs), rec)
        churn = AdminChurn(bootstrap, TOPIC, PARTITIONS, rec, security=admin)
        session_s = int(FAST["broker.session.timeout.ms"]) / 1000
        steps = schedule(seed, kinds, duration_s, session_s)
        nemesis = Nemesis(
            cluster,
            TOPIC,
            PARTITIONS,
            _leader_lookup(client),
            network,
            node_faults,
            random.Random(seed),
            _fully_replicated_check(client),
        )
        stop = threading.Event()
        for part in (producers, readers, watch, churn):
            part.start()
        t0 = time.monotonic()
        faults = threading.Thread(target=nemesis.run, args=(steps, stop), daemon=True)
        faults.start()
        stop.wait(duration_s)
        stop.set()
        faults.join(30)
        nemesis.heal()
        healed = time.monotonic()
        cluster.wait_for_brokers(timeout_s=60)
        recovered = _produce_everywhere(workload) - healed
        producers.close()
        churn.close()
        time.sleep(1.0)  # the readers catch up on the last records
        readers.close()
        watch.close()
        final = workload.read_all(TOPIC, PARTITIONS, GROUP_PREFIX + "final-read")
        replicas = read_replicas(client, TOPIC, PARTITIONS)
        churned = read_topics(bootstrap, churn.created, admin)
        report = check(rec, final, nemesis.faults, replicas, churned)
        described = [f.describe(t0) for f in nemesis.faults]
        result = RunResult(
            seed,
            topology,
            kinds,
            secured,
            clients,
            report,
            described,
            recovered,
            time.monotonic() - started,
        )
        if echo:
            print(format_result(result), flush=True)
        return result
    finally:
        try:
            cluster.stop_all()
        finally:  # a bridge left behind takes its subnet from later runs (netns.py)
            if network is not None:
                network.close()


def _leader_lookup(client: DataClient):  # type: ignore[no-untyped-def]
    def leader(topic: str, partition: int) -> int:
        try:
            return int(client.leader(topic, partition, timeout_s=2))
        except Exception:  # a broker down: no target this time
            return -1

    return leader


def _fully_replicated_check(client: DataClient):  # type: ignore[no-untyped-def]
    def fully_replicated() -> bool:
        try:
            meta = client.metadata()
        except AssertionError:
            return False
        return all(
            set(p.isr) == set(p.replicas) and p.leader_id >= 0
            for t in meta.topics
            for p in t.partitions
        )

    return fully_replicated


def _produce_everywhere(clients: Clients) -> float:
    """Liveness: an acks=all record acknowledged on every partition; when that happened."""
    deadline = time.monotonic() + LIVENESS_BOUND_S
    acked: dict[int, threading.Event] = {i: threading.Event() for i in range(PARTITIONS)}
    errors: list[ClientError] = []

    def on_done(partition: int, offset: int, error: ClientError | None) -> None:
        if error is not None:
            errors.append(error)
        else:
            acked[partition].set()

    producer = clients.producer(delivery_timeout_ms=int(LIVENESS_BOUND_S * 1000))
    try:
        for i in range(PARTITIONS):
            producer.send(TOPIC, b"liveness:%d" % i, on_done, partition=i)
    finally:
        producer.close(timeout_s=max(deadline - time.monotonic(), 0.1))
    if errors:
        raise errors[0]
    missing = [i for i, event in acked.items() if not event.is_set()]
    if missing:
        raise TimeoutError(f"no acknowledgement within {LIVENESS_BOUND_S} s in {missing}")
    return time.monotonic()


def format_result(result: RunResult) -> str:
    secured, flag = (" secured", " --secured") if result.secured else ("", "")
    if result.clients != "strom":
        secured, flag = f"{secured} clients={result.clients}", f"{flag} --clients {result.clients}"
    head = (
        f"chaos run seed={result.seed} topology={result.topology} "
        f"nemeses={','.join(result.kinds)}{secured} ({result.seconds:.0f} s); replay: python "
        f"-m tests.chaos --seed {result.seed} --topology {result.topology} --nemesis "
        f"{','.join(result.kinds)}{flag}"
    )
    return "\n".join(
        [
            head,
            "schedule:",
            *(f"  {line}" for line in result.schedule),
            result.report.summary(),
            f"recovered {result.recovered_s:.2f} s after healing",
        ]
    )
