"""TLS and mTLS on every listener (issue 18, first layer), with real node processes and
real TLS on loopback.

One module-scoped cluster of three combined nodes whose every listener is SSL with
ssl.client.auth=required: client listeners, the inter-broker one (replica fetches), and the
controller one (Raft between controllers, broker registration and heartbeats, forwarding).
Node 1's key is encrypted (ssl.key.password). Certificates are made at test time
(tests/tls_certs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from node_cluster import ROOT, wait_until
from tls_cluster import TlsCluster

from strom.admin import AdminClient, NewTopic
from strom.consumer import Consumer
from strom.errors import AuthenticationError, KafkaTimeoutError, StromError
from strom.producer import Producer
from strom_api.v1 import controller_pb2
from tests.raft_integration.process_cluster import free_ports
from tests.tls_certs import Certs, make_certs

TOPIC = "secured"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, certs):
    TlsCluster.certs = certs
    cluster = TlsCluster(str(tmp_path_factory.mktemp("tls")), 3)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        yield cluster
    finally:
        cluster.stop_all()


def bootstrap(cluster: TlsCluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids)


def ssl(certs: Certs, **overrides: object) -> dict[str, object]:
    return {
        "security_protocol": "SSL",
        "ssl_cafile": certs.ca,
        "ssl_certfile": certs.client_keystore,
        **overrides,
    }


def test_an_rf3_topic_replicates_and_serves_clients_over_mtls(cluster, certs):
    with AdminClient(bootstrap(cluster), **ssl(certs)) as admin:  # type: ignore[arg-type]
        admin.create_topics([NewTopic(TOPIC, 3, 3, topic_configs={"min.insync.replicas": "3"})])
    values = [b"v%d" % i for i in range(30)]
    with Producer(bootstrap(cluster), acks="all", **ssl(certs)) as producer:  # type: ignore[arg-type]
        futures = [producer.send(TOPIC, v, partition=i % 3) for i, v in enumerate(values)]
        producer.flush()
        # acks=all with min.insync.replicas=3: every replica fetched it over SSL.
        assert all(f.get(timeout=30).offset >= 0 for f in futures)

    def fully_replicated() -> bool:
        described = cluster.call(
            "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[TOPIC])
        )
        return all(len(p.isr) == 3 for p in described.topics[0].partitions)

    wait_until(fully_replicated, 20, "every replica in sync")
    consumer = Consumer(
        TOPIC,
        bootstrap_servers=bootstrap(cluster),
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **ssl(certs),  # type: ignore[arg-type]
    )
    with consumer:
        seen = []
        for record in consumer:
            seen.append(record.value)
            if len(seen) == len(values):
                break
    assert sorted(seen) == sorted(values)


@pytest.mark.parametrize(
    ("case", "settings", "cause"),
    [
        ("no client certificate", {"ssl_certfile": None}, "client certificate"),
        ("another CA's certificate", {"ssl_certfile": "other"}, "client certificate"),
        ("the wrong CA trusted", {"ssl_cafile": "other"}, "CERTIFICATE_VERIFY_FAILED"),
    ],
)
def test_refused_tls_clients_get_ssl_handshake_failed_at_once(
    cluster, certs, case, settings, cause
):
    config = ssl(certs, **settings)
    if config["ssl_certfile"] == "other":
        config["ssl_certfile"] = certs.other_client_keystore
    if config["ssl_cafile"] == "other":
        config["ssl_cafile"] = certs.other_ca
    started = time.monotonic()
    with (
        Producer(bootstrap(cluster), max_block_ms=20_000, **config) as producer,  # type: ignore[arg-type]
        pytest.raises(AuthenticationError) as raised,
    ):
        producer.send(TOPIC, b"refused")
    assert time.monotonic() - started < 10, f"{case}: not at once"
    assert raised.value.name == "SSL_AUTHENTICATION_FAILED"
    assert raised.value.message.startswith("SSL handshake failed"), raised.value.message
    assert cause in raised.value.message
    with (
        AdminClient(bootstrap(cluster), **config) as admin,  # type: ignore[arg-type]
        pytest.raises(StromError, match="SSL_AUTHENTICATION_FAILED"),
    ):
        admin.create_topics([NewTopic("never-created", 1, 1)])
    consumer = Consumer(TOPIC, bootstrap_servers=bootstrap(cluster), group_id="refused", **config)  # type: ignore[arg-type]
    with consumer, pytest.raises(AuthenticationError, match="SSL handshake failed"):
        consumer.poll(timeout_ms=5000)
    still_serving(cluster, certs)


def test_a_plaintext_client_is_told_the_listener_expects_ssl(cluster, certs):
    with (
        Producer(bootstrap(cluster), max_block_ms=2000) as producer,
        pytest.raises(KafkaTimeoutError, match="probably expects SSL"),
    ):
        producer.send(TOPIC, b"plaintext")
    still_serving(cluster, certs)


def still_serving(cluster: TlsCluster, certs: Certs) -> None:
    cluster.wait_for_brokers()
    with Producer(bootstrap(cluster), **ssl(certs)) as producer:  # type: ignore[arg-type]
        assert producer.send(TOPIC, b"after").get(timeout=30).offset >= 0


def test_a_broker_with_another_cas_certificate_cannot_join(cluster, certs, tmp_path):
    """Issue 18's "register a fake broker": a node whose certificate the cluster's CA did
    not sign is refused at the TLS handshake; it never registers, and says why."""
    (port,) = free_ports(1)
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker\n"
        "node.id=9\n"
        f"controller.quorum.voters={cluster.voters}\n"
        f"listeners=SSL://127.0.0.1:{port}\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=SSL:SSL,CONTROLLER:SSL\n"
        f"ssl.keystore.location={certs.other_node_keystore}\n"
        f"ssl.truststore.location={certs.ca}\n"
        f"log.dirs={tmp_path / 'data'}\n"
        "prometheus.metrics.port=-1\n"
    )
    formatted = strom(
        "storage", "format", "--config", str(path), "--cluster-id", cluster.cluster_id
    )
    assert formatted.returncode == 0, formatted.stderr
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        intruder = subprocess.Popen(
            [sys.executable, "-m", "strom_tools", "server", str(path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        refusals = (
            "Broker 9 not registered yet: SSL handshake failed",  # its registration
            "failed authentication due to: SSL handshake failed",  # its Raft observer
        )
        wait_until(
            lambda: all(r in log_path.read_text() for r in refusals),
            30,
            "the intruder's refusals in its log",
        )
        described = cluster.describe_cluster()
        assert described is not None
        assert sorted(b.broker_id for b in described.brokers) == cluster.ids
    finally:
        intruder.kill()
        intruder.wait()
    still_serving(cluster, certs)


def strom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strom_tools", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_strom_commands_take_a_command_config(cluster, certs, tmp_path):
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.location={certs.ca}\n"
        f"ssl.keystore.location={certs.client_keystore}\n"
        "ssl.endpoint.identification.algorithm=https\n"
    )
    server = f"127.0.0.1:{cluster.broker_port[2]}"
    listed = strom(
        "topics", "--bootstrap-server", server, "--list", "--command-config", str(properties)
    )
    assert listed.returncode == 0, listed.stderr
    assert TOPIC in listed.stdout.split()
    consumed = strom(
        "console-consumer",
        "--bootstrap-server",
        server,
        "--topic",
        TOPIC,
        "--from-beginning",
        "--max-messages",
        "1",
        "--command-config",
        str(properties),
    )
    assert consumed.returncode == 0, consumed.stderr
    assert len(consumed.stdout.splitlines()) == 1
    # The admin tools build their AdminClient from the same client properties.
    groups = strom(
        "consumer-groups", "--bootstrap-server", server, "--list",
        "--command-config", str(properties),
    )  # fmt: skip
    assert groups.returncode == 0, groups.stderr
    moves = strom(
        "reassign-partitions", "--bootstrap-server", server, "--list",
        "--command-config", str(properties),
    )  # fmt: skip
    assert (moves.returncode, moves.stdout) == (0, "No partition reassignments found.\n")
    # replica-verification: AdminClient for where to start, its own fetchers over TLS too.
    verifying = subprocess.Popen(
        [
            sys.executable, "-m", "strom_tools", "replica-verification", "--bootstrap-server",
            server, "--topics-include", TOPIC, "--time", "-2", "--report-interval-ms", "200",
            "--command-config", str(properties),
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    watchdog = threading.Timer(30, verifying.kill)  # replicas never read: no lag 0 line
    watchdog.start()
    try:
        assert verifying.stdout is not None
        for line in verifying.stdout:
            if " max lag is 0 for partition " in line:
                break
            assert "max lag" in line or "verification process is started" in line, line
        else:
            raise AssertionError("replica-verification read no replica over TLS in 30 s")
    finally:
        watchdog.cancel()
        verifying.kill()
        _, stderr = verifying.communicate(timeout=20)
    assert "Error" not in stderr, stderr


def test_a_bad_command_config_is_one_line(cluster, certs, tmp_path):
    encrypted = tmp_path / "encrypted.properties"
    encrypted.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.location={certs.ca}\n"
        f"ssl.keystore.location={certs.encrypted_node_keystore}\n"
        "ssl.key.password=wrong\n"
    )
    server = f"127.0.0.1:{cluster.broker_port[1]}"
    result = strom(
        "topics", "--bootstrap-server", server, "--list", "--command-config", str(encrypted)
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error while executing topic command : INVALID_CONFIG: the private key in "
        f"ssl.keystore.location {certs.encrypted_node_keystore} could not be decrypted with "
        f"ssl.key.password: wrong password, or a key format that cannot be read "
        f"(--command-config {encrypted})"
    ]


def run_server(tmp_path, lines: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = os.path.join(tmp_path, "server.properties")
    config = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:19093",
        "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": os.path.join(tmp_path, "data"),
        "prometheus.metrics.port": "-1",
        **lines,
    }
    with open(path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in config.items())
    return subprocess.run(
        [sys.executable, "-m", "strom_tools", "server", path],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_a_sasl_ssl_listener_without_the_nodes_login_refuses_to_start_with_one_line(
    tmp_path, certs
):
    result = run_server(
        tmp_path,
        {
            "listeners": "SASL_SSL://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
            "ssl.keystore.location": certs.node_keystore,
        },
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "ERROR INVALID_CONFIG: listener SASL_SSL uses SASL between nodes: set "
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config with the username and password "
        "this node logs in with"
    ]


def test_a_wrong_key_password_stops_the_node_with_one_line(tmp_path, certs):
    result = run_server(
        tmp_path,
        {
            "listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:SSL",
            "ssl.keystore.location": certs.encrypted_node_keystore,
            "ssl.key.password": "not-the-password",
            "ssl.truststore.location": certs.ca,
        },
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.strip().splitlines() if "ERROR" in line]
    assert lines == [
        "ERROR INVALID_CONFIG: Invalid SSL configuration of listener PLAINTEXT: the private "
        f"key in ssl.keystore.location {certs.encrypted_node_keystore} could not be decrypted "
        "with ssl.key.password: wrong password, or a key format that cannot be read"
    ], result.stderr
    assert "Traceback" not in result.stderr


def spark_options(cluster: TlsCluster, certs: Certs, **extra: str) -> dict[str, str]:
    """The options a Spark query gives the strom source: Spark's Kafka names."""
    return {
        "kafka.bootstrap.servers": bootstrap(cluster),
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": certs.ca,
        "kafka.ssl.keystore.location": certs.client_keystore,
        **extra,
    }


def test_the_spark_connector_reads_and_writes_over_mtls(cluster, certs):
    """What Spark's driver and tasks run (planning, a task's range read, a task's write),
    without a Spark session, over the secured cluster with Spark's kafka.ssl.* options."""
    import pyarrow as pa

    from pyspark_strom.options import parse_options, parse_write_options
    from pyspark_strom.source import StromBatchReader
    from pyspark_strom.writing import produce

    written = produce(
        parse_write_options(spark_options(cluster, certs, topic="spark-tls")),
        iter([pa.record_batch([pa.array([b"a", b"b", b"c"])], names=["value"])]),
    )
    assert written.records == 3
    reader = StromBatchReader(parse_options(spark_options(cluster, certs, subscribe="spark-tls")))
    values = [
        value
        for part in reader.partitions()
        for batch in reader.read(part)
        for value in batch.column("value").to_pylist()
    ]
    assert sorted(values) == [b"a", b"b", b"c"]
    # Without the client certificate the cluster's mTLS refuses the connector at once.
    refused = spark_options(cluster, certs, subscribe="spark-tls")
    del refused["kafka.ssl.keystore.location"]
    with pytest.raises(AuthenticationError, match="SSL handshake failed"):
        StromBatchReader(parse_options(refused)).partitions()
