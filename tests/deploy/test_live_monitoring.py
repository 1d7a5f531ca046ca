"""The rules and dashboards against a live 3-node cluster (real `strom server` processes on
loopback): every metric name they reference is emitted (or recorded by the rules), the
partitions' offsets and a consumer group's committed offsets have the right values, and
Debian's Prometheus, scraping the cluster with the rules loaded, records the group's lag
(high watermark minus committed offset), sees a series per broker and turns the
under-replicated-partitions rule's expression true (its alert pending) once a broker is
killed."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from strom.consumer import Consumer, TopicPartition
from tests.client.cluster_helpers import FAST, GROUP_SETTINGS, bootstrap, create_topic
from tests.data_plane.data_client import DataClient, batch
from tests.deploy.deploy_files import (
    RULES,
    dashboard_expressions,
    dashboard_variable_metrics,
    metric_names,
    recording_rules,
    rule_expressions,
    tool,
)
from tests.node_integration.node_cluster import NodeCluster
from tests.raft_integration.process_cluster import free_ports, wait_until

# Made by Prometheus itself for every target, not by the nodes.
SYNTHETIC = {"up"}
# Emitted only by a node with an authorizer (authorizer.class.name); its series are checked
# on such a cluster in tests/node_integration/test_authorization.py.
SECURED_ONLY = {"kafka_server_authorizer_denied_total"}
# Dashboard queries with no data in a healthy cluster: per-topic failure rates (no request
# failed, so no topic has a failure series yet).
MAY_BE_EMPTY = {
    "strom-topics/Failed produce and fetch requests per topic/A",
    "strom-topics/Failed produce and fetch requests per topic/B",
    # No authorizer on this cluster: no denial series.
    "strom-cluster/Failed authentications and authorizer denials/B",
}


# The consumer group of the fixture: its committed offsets of watched-0, 1, 2 (each holds
# 4 records), so its lag is 3, 1 and 0.
GROUP = "watchers"
COMMITTED = {0: 1, 1: 3, 2: 4}
RECORDS = 4


def referenced_metrics() -> set[str]:
    names = dashboard_variable_metrics()
    rules = [*rule_expressions().values(), *recording_rules().values()]
    for expr in [*rules, *dashboard_expressions().values()]:
        names |= metric_names(expr)
    return names


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """3 combined nodes with a topic of 3 partitions (replication factor 3) that records
    were produced to and fetched from, and a consumer group that committed offsets below
    and at their end, so that per-topic, per-partition, per-group and per-request series
    exist; `cluster.emitted` holds every sample name scraped from the nodes then."""
    cluster = NodeCluster(str(tmp_path_factory.mktemp("monitored")), 3, extra=GROUP_SETTINGS)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        create_topic(cluster, "watched", partitions=3)  # RF 3, min.insync.replicas 2
        client = DataClient({i: f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids})
        for partition in range(3):
            leader = client.leader("watched", partition)
            records = batch([b"m" * 100] * RECORDS)
            answer = client.produce_raw(leader, "watched", partition, records)
            assert answer.error.code == 0
            assert len(client.read_all("watched", partition)) == RECORDS
        with Consumer(bootstrap_servers=bootstrap(cluster), group_id=GROUP, **FAST) as consumer:
            offsets = {TopicPartition("watched", p): o for p, o in COMMITTED.items()}
            consumer.assign(list(offsets))
            consumer.commit(offsets)
        cluster.emitted = {name for node in cluster.ids for name, _ in cluster.scrape(node)}
        yield cluster
    finally:
        cluster.stop_all()


def test_every_referenced_metric_is_emitted(cluster):
    referenced = referenced_metrics()
    assert len(referenced) > 30
    missing = sorted(
        referenced - SYNTHETIC - SECURED_ONLY - set(recording_rules()) - cluster.emitted
    )
    assert not missing, f"dashboards or rules reference metrics no node emits: {missing}"


def samples_of(cluster, name, **labels):
    """{node: value} of the nodes with a `name` series of exactly these labels."""
    key = (name, tuple(sorted(labels.items())))
    found = {}
    for node in cluster.ids:
        samples = cluster.scrape(node)
        if key in samples:
            found[node] = samples[key]
    return found


def test_partition_offsets_and_committed_offsets(cluster):
    for p in range(3):
        watched = {"topic": "watched", "partition": str(p)}
        # The leader reports the high watermark; every replica its log's offsets.
        leader = DataClient({i: f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids}).leader(
            "watched", p
        )
        assert samples_of(cluster, "kafka_topic_partition_current_offset", **watched) == {
            leader: RECORDS
        }
        assert samples_of(cluster, "kafka_log_log_logstartoffset", **watched) == dict.fromkeys(
            cluster.ids, 0
        )
        wait_until(
            lambda w=watched: (
                samples_of(cluster, "kafka_log_log_logendoffset", **w)
                == dict.fromkeys(cluster.ids, RECORDS)
            ),
            10,
            "every replica's log end offset",
        )
        # The group's coordinator alone reports its committed offset.
        committed = samples_of(
            cluster, "kafka_consumergroup_current_offset", consumergroup=GROUP, **watched
        )
        assert list(committed.values()) == [COMMITTED[p]]
    # Only groups with committed offsets have series: none of another name.
    groups = {
        dict(labels)["consumergroup"]
        for node in cluster.ids
        for (name, labels) in cluster.scrape(node)
        if name == "kafka_consumergroup_current_offset"
    }
    assert groups == {GROUP}


class Prometheus:
    """Debian's prometheus binary (not its service) on a loopback port, with a temporary
    config and storage directory."""

    def __init__(self, directory: Path, targets: list[str]) -> None:
        self.port = free_ports(1)[0]
        config = directory / "prometheus.yml"
        config.write_text(
            json.dumps(  # JSON is YAML
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(RULES)],
                    "scrape_configs": [
                        {"job_name": "strom", "static_configs": [{"targets": targets}]}
                    ],
                }
            )
        )
        self.log = directory / "prometheus.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    tool("prometheus"),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def poll(self, check: Any, timeout_s: float, what: str) -> Any:
        def attempt() -> Any:
            try:
                found = check()
            except OSError:  # not listening yet
                found = None
            if not found:
                time.sleep(0.25)
            return found

        try:
            return wait_until(attempt, timeout_s, what)
        except TimeoutError:
            raise AssertionError(
                f"{what}; prometheus log:\n{self.log.read_text()[-3000:]}"
            ) from None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_prometheus_scrapes_the_cluster_and_the_alert_expression_turns_true(cluster, tmp_path):
    targets = [f"127.0.0.1:{cluster.metrics_port[n]}" for n in cluster.ids]
    prometheus = Prometheus(tmp_path, targets)
    try:

        def per_broker() -> list[dict[str, Any]] | None:
            found = prometheus.query("kafka_server_replicamanager_underreplicatedpartitions")
            return found if len(found) == 3 else None

        series = prometheus.poll(per_broker, 30, "a series per broker in Prometheus")
        assert {s["metric"]["instance"] for s in series} == set(targets)
        assert all(s["metric"]["job"] == "strom" for s in series)

        # The recorded lag: the leader's high watermark minus the coordinator's commit.
        def group_lag() -> dict[str, float] | None:
            found = prometheus.query(f'kafka_consumergroup_lag{{consumergroup="{GROUP}"}}')
            lag = {s["metric"]["partition"]: float(s["value"][1]) for s in found}
            return lag if len(lag) == len(COMMITTED) else None

        lag = prometheus.poll(group_lag, 30, "the group's lag recorded for every partition")
        assert lag == {str(p): RECORDS - o for p, o in COMMITTED.items()}
        assert {
            tuple(sorted(s["metric"])) for s in prometheus.query("kafka_consumergroup_lag")
        } == {("__name__", "consumergroup", "partition", "topic")}
        # Every metric the dashboards and rules name has data in Prometheus, `up` included.
        names = {s["metric"]["__name__"] for s in prometheus.query('{__name__=~".+"}')}
        expected = referenced_metrics() - SECURED_ONLY
        assert expected <= names, sorted(expected - names)
        # Every dashboard query returns data from the live cluster (so label names and values
        # in its selectors are right too), but those that only count failures.
        prometheus.poll(
            lambda: prometheus.query("count(rate(process_cpu_seconds_total[1m])) == 3"),
            20,
            "two scrapes of every node (for rates)",
        )
        empty = {k for k, e in dashboard_expressions().items() if not prometheus.query(e)}
        assert empty == MAY_BE_EMPTY, empty
        expr = rule_expressions()["StromUnderReplicatedPartitions"]
        prometheus.poll(lambda: not prometheus.query(expr), 30, "no under-replicated partition")
        assert prometheus.query(rule_expressions()["StromAbnormalControllerState"]) == []

        victim = next(n for n in cluster.ids if n != cluster.active_controller())
        cluster.stop(victim, signal.SIGKILL)
        firing = prometheus.poll(
            lambda: prometheus.query(expr), 30, "the alert expression true after a broker died"
        )
        victim_target = f"127.0.0.1:{cluster.metrics_port[victim]}"
        assert {s["metric"]["instance"] for s in firing} <= set(targets) - {victim_target}
        alerts = prometheus.poll(
            lambda: [
                a
                for a in prometheus.api("alerts")["alerts"]
                if a["labels"]["alertname"] == "StromUnderReplicatedPartitions"
            ],
            10,
            "the alert pending in Prometheus",
        )
        assert {a["state"] for a in alerts} == {"pending"}  # `for: 10m` has not passed
        # The dead node's scrape fails, and the scrape-down rule's job matcher finds it.
        down = prometheus.poll(
            lambda: prometheus.query(rule_expressions()["StromScrapeDown"]),
            10,
            "the scrape-down expression true for the dead node",
        )
        assert [s["metric"]["instance"] for s in down] == [victim_target]
    finally:
        prometheus.stop()
