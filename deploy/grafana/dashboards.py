"""Strom's Grafana dashboards, as code: `python deploy/grafana/dashboards.py` writes
deploy/grafana/dashboards/<uid>.json (committed; tests/deploy checks they are current, that
every expression parses and that every metric they name is emitted by a live cluster).

Metric names are those of server/metrics.py (Strimzi's names for Kafka's metrics, Python's
process and GC collectors instead of the JVM's; Kafka Exporter's for offsets and consumer lag,
kafka_consumergroup_lag being recorded by deploy/prometheus/strom-rules.yml).
`$__rate_interval`, `$topic` and `$consumergroup` are Grafana variables.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from panels import (  # noqa: E402
    dashboard,
    label_variable,
    q,
    stat,
    table,
    timeseries,
    topic_variable,
)

OUT = Path(__file__).resolve().parent / "dashboards"
RATE = "[$__rate_interval]"
ALL_TOPICS = 'topic=""'  # the brokers' all-topics aggregate series


def cluster_overview() -> dict[str, Any]:
    return dashboard(
        "strom-cluster",
        "Strom / Cluster overview",
        "Brokers, the active controller, partition health, throughput, request latency and "
        "the node processes.",
        [
            stat("Brokers unfenced", "max(kafka_controller_kafkacontroller_activebrokercount)"),
            stat("Brokers fenced", "max(kafka_controller_kafkacontroller_fencedbrokercount)"),
            stat(
                "Active controllers",
                "sum(kafka_controller_kafkacontroller_activecontrollercount)",
                description="Exactly 1 in a healthy cluster.",
            ),
            stat(
                "Under-replicated partitions",
                "sum(kafka_server_replicamanager_underreplicatedpartitions)",
            ),
            stat(
                "Under min ISR partitions",
                "sum(kafka_server_replicamanager_underminisrpartitioncount)",
            ),
            stat(
                "Offline partitions", "max(kafka_controller_kafkacontroller_offlinepartitionscount)"
            ),
            stat("Topics", "max(kafka_controller_kafkacontroller_globaltopiccount)"),
            stat("Partitions", "max(kafka_controller_kafkacontroller_globalpartitioncount)"),
            stat(
                "Preferred replica imbalance",
                "max(kafka_controller_kafkacontroller_preferredreplicaimbalancecount)",
            ),
            stat(
                "Unclean leader elections",
                "sum(kafka_controller_controllerstats_uncleanleaderelections_total)",
            ),
            stat("Nodes scraped", 'count(up{job=~".*strom.*"} == 1)'),
            stat("Nodes down", 'count(up{job=~".*strom.*"} == 0) or vector(0)'),
            timeseries(
                "Bytes in per broker",
                q(
                    "sum by (instance) "
                    f"(rate(kafka_server_brokertopicmetrics_bytesin_total{{{ALL_TOPICS}}}{RATE}))",
                    "{{instance}}",
                ),
                unit="Bps",
            ),
            timeseries(
                "Bytes out per broker",
                q(
                    "sum by (instance) "
                    f"(rate(kafka_server_brokertopicmetrics_bytesout_total{{{ALL_TOPICS}}}{RATE}))",
                    "{{instance}}",
                ),
                unit="Bps",
            ),
            timeseries(
                "Records in per broker",
                q(
                    "sum by (instance) (rate("
                    f"kafka_server_brokertopicmetrics_messagesin_total{{{ALL_TOPICS}}}{RATE}))",
                    "{{instance}}",
                ),
                unit="ops",
            ),
            timeseries(
                "Request latency p99 by API",
                q(
                    "histogram_quantile(0.99, sum by (le, api) "
                    f"(rate(strom_request_duration_seconds_bucket{RATE})))",
                    "{{api}}",
                ),
                unit="s",
            ),
            timeseries(
                "Request latency p50 by API",
                q(
                    "histogram_quantile(0.5, sum by (le, api) "
                    f"(rate(strom_request_duration_seconds_bucket{RATE})))",
                    "{{api}}",
                ),
                unit="s",
            ),
            timeseries(
                "Requests per second by API",
                q(f"sum by (api) (rate(strom_request_duration_seconds_count{RATE}))", "{{api}}"),
                unit="reqps",
            ),
            timeseries(
                "Partitions and leaders per broker",
                q("kafka_server_replicamanager_partitioncount", "{{instance}} partitions"),
                q("kafka_server_replicamanager_leadercount", "{{instance}} leaders"),
            ),
            timeseries(
                "ISR shrinks and expands",
                q(
                    f"sum by (instance) (rate(kafka_server_replicamanager_isrshrinks_total{RATE}))",
                    "{{instance}} shrinks",
                ),
                q(
                    f"sum by (instance) (rate(kafka_server_replicamanager_isrexpands_total{RATE}))",
                    "{{instance}} expands",
                ),
                q(
                    "sum by (instance) "
                    f"(rate(kafka_server_replicamanager_failedisrupdates_total{RATE}))",
                    "{{instance}} failed",
                ),
                unit="ops",
            ),
            timeseries(
                "Requests waiting (purgatory)",
                q(
                    "sum by (instance, operation) (strom_purgatory_size)",
                    "{{instance}} {{operation}}",
                ),
            ),
            timeseries(
                "Failed authentications and authorizer denials",
                q(
                    "sum by (instance, listener) "
                    "(rate(kafka_server_socket_server_metrics_failed_authentication_total"
                    f"{RATE}))",
                    "{{instance}} {{listener}} failed authentications",
                ),
                q(
                    "sum by (instance, operation) "
                    f"(rate(kafka_server_authorizer_denied_total{RATE}))",
                    "{{instance}} denied {{operation}}",
                ),
                unit="ops",
                description="Wrong passwords, unknown users, refused certificates (SASL "
                "listeners) and requests the authorizer denied (authorizer.class.name set). "
                "A spike is a misconfigured client or someone probing.",
            ),
            timeseries(
                "Process CPU",
                q(f'rate(process_cpu_seconds_total{{job=~".*strom.*"}}{RATE})', "{{instance}}"),
                unit="percentunit",
            ),
            timeseries(
                "Process resident memory",
                q('process_resident_memory_bytes{job=~".*strom.*"}', "{{instance}}"),
                unit="bytes",
            ),
            timeseries(
                "Open file descriptors",
                q('process_open_fds{job=~".*strom.*"}', "{{instance}} open"),
                q('process_max_fds{job=~".*strom.*"}', "{{instance}} max"),
            ),
            timeseries(
                "Python GC collections",
                q(
                    f"sum by (instance, generation) (rate(python_gc_collections_total{RATE}))",
                    "{{instance}} gen {{generation}}",
                ),
                unit="ops",
            ),
        ],
        [],
    )


def kraft_quorum() -> dict[str, Any]:
    return dashboard(
        "strom-kraft",
        "Strom / KRaft quorum",
        "The metadata quorum: each node's Raft state, the leader and epoch, high watermark "
        "against log end offset, commit latency.",
        [
            stat("Leader", "max(kafka_server_raftmetrics_current_leader)"),
            stat("Epoch", "max(kafka_server_raftmetrics_current_epoch)"),
            stat("High watermark", "max(kafka_server_raftmetrics_high_watermark)"),
            stat(
                "Nodes without a leader",
                "count(kafka_server_raftmetrics_current_leader == -1) or vector(0)",
            ),
            stat(
                "Epoch changes (1 h)",
                "max(changes(kafka_server_raftmetrics_current_epoch[1h]))",
            ),
            stat(
                "Active controllers",
                "sum(kafka_controller_kafkacontroller_activecontrollercount)",
            ),
            table(
                "Raft state per node",
                q(
                    "max by (instance, current_state) "
                    "(kafka_server_raftmetrics_current_state == 1)",
                ),
                width=12,
            ),
            timeseries(
                "Leader seen by each node",
                q("kafka_server_raftmetrics_current_leader", "{{instance}}"),
                width=12,
            ),
            timeseries(
                "Epoch per node",
                q("kafka_server_raftmetrics_current_epoch", "{{instance}}"),
            ),
            timeseries(
                "High watermark and log end offset per node",
                q("kafka_server_raftmetrics_high_watermark", "{{instance}} high watermark"),
                q("kafka_server_raftmetrics_log_end_offset", "{{instance}} log end"),
            ),
            timeseries(
                "Log end offset ahead of the high watermark",
                q(
                    "kafka_server_raftmetrics_log_end_offset "
                    "- kafka_server_raftmetrics_high_watermark",
                    "{{instance}}",
                ),
                description="Records a node has that are not committed yet.",
            ),
            timeseries(
                "Commit latency (average, leader)",
                q("kafka_server_raftmetrics_commit_latency_avg", "{{instance}}"),
                unit="ms",
            ),
            timeseries(
                "Records appended and fetched per second",
                q("kafka_server_raftmetrics_append_records_rate", "{{instance}} appended"),
                q("kafka_server_raftmetrics_fetch_records_rate", "{{instance}} fetched"),
                unit="ops",
            ),
            timeseries(
                "Brokers unfenced and fenced",
                q("max(kafka_controller_kafkacontroller_activebrokercount)", "unfenced"),
                q("max(kafka_controller_kafkacontroller_fencedbrokercount)", "fenced"),
            ),
        ],
        [],
    )


def topics() -> dict[str, Any]:
    selected = 'topic=~"$topic"'
    return dashboard(
        "strom-topics",
        "Strom / Topics and partitions",
        "Log sizes, offsets, records and bytes in and out per topic, follower lag per partition.",
        [
            timeseries(
                "Log size per topic (all replicas)",
                q(f"sum by (topic) (kafka_log_log_size{{{selected}}})", "{{topic}}"),
                unit="bytes",
                width=12,
            ),
            timeseries(
                "Log size per partition replica",
                q(
                    f"kafka_log_log_size{{{selected}}}",
                    "{{topic}}-{{partition}} on {{instance}}",
                ),
                unit="bytes",
                width=12,
            ),
            timeseries(
                "Offsets per partition",
                # Every replica reports its log's offsets; the largest is the leader's.
                q(
                    f"max by (topic, partition) (kafka_log_log_logendoffset{{{selected}}})",
                    "{{topic}}-{{partition}} log end",
                ),
                q(
                    "max by (topic, partition) "
                    f"(kafka_topic_partition_current_offset{{{selected}}})",
                    "{{topic}}-{{partition}} high watermark",
                ),
                q(
                    f"max by (topic, partition) (kafka_log_log_logstartoffset{{{selected}}})",
                    "{{topic}}-{{partition}} log start",
                ),
                width=12,
                description="Log end offset (the next offset appended), high watermark (the "
                "end consumers see: replicated to the ISR) and log start offset (the first "
                "kept).",
            ),
            timeseries(
                "Records committed per partition",
                q(
                    "sum by (topic, partition) "
                    f"(rate(kafka_topic_partition_current_offset{{{selected}}}{RATE}))",
                    "{{topic}}-{{partition}}",
                ),
                unit="ops",
                width=12,
                description="How fast the high watermark advances: records per second that "
                "became visible to consumers.",
            ),
            timeseries(
                "Records in per topic",
                q(
                    "sum by (topic) "
                    f"(rate(kafka_server_brokertopicmetrics_messagesin_total{{{selected}}}{RATE}))",
                    "{{topic}}",
                ),
                unit="ops",
            ),
            timeseries(
                "Bytes in per topic",
                q(
                    "sum by (topic) "
                    f"(rate(kafka_server_brokertopicmetrics_bytesin_total{{{selected}}}{RATE}))",
                    "{{topic}}",
                ),
                unit="Bps",
            ),
            timeseries(
                "Bytes out per topic",
                q(
                    "sum by (topic) "
                    f"(rate(kafka_server_brokertopicmetrics_bytesout_total{{{selected}}}{RATE}))",
                    "{{topic}}",
                ),
                unit="Bps",
            ),
            timeseries(
                "Produce and fetch requests per topic",
                q(
                    "sum by (topic) (rate("
                    f"kafka_server_brokertopicmetrics_totalproducerequests_total{{{selected}}}"
                    f"{RATE}))",
                    "{{topic}} produce",
                ),
                q(
                    "sum by (topic) (rate("
                    f"kafka_server_brokertopicmetrics_totalfetchrequests_total{{{selected}}}"
                    f"{RATE}))",
                    "{{topic}} fetch",
                ),
                unit="reqps",
                width=12,
            ),
            timeseries(
                "Failed produce and fetch requests per topic",
                q(
                    "sum by (topic) (rate("
                    f"kafka_server_brokertopicmetrics_failedproducerequests_total{{{selected}}}"
                    f"{RATE}))",
                    "{{topic}} produce",
                ),
                q(
                    "sum by (topic) (rate("
                    f"kafka_server_brokertopicmetrics_failedfetchrequests_total{{{selected}}}"
                    f"{RATE}))",
                    "{{topic}} fetch",
                ),
                unit="reqps",
                width=12,
            ),
            timeseries(
                "Follower lag (records behind the leader)",
                q(
                    f"max by (topic, partition, replica) (strom_replica_lag_records{{{selected}}})",
                    "{{topic}}-{{partition}} replica {{replica}}",
                ),
                width=24,
            ),
        ],
        [topic_variable("kafka_log_log_size")],
    )


def consumer_groups() -> dict[str, Any]:
    selected = 'consumergroup=~"$consumergroup", topic=~"$topic"'
    lag = f"sum by (consumergroup, topic) (kafka_consumergroup_lag{{{selected}}})"
    # Committed offsets only grow (but for a reset), so rate() reads as records consumed
    # per second; a coordinator move starts a new series, which sum() joins up.
    consumed = (
        "sum by (consumergroup, topic) "
        f"(rate(kafka_consumergroup_current_offset{{{selected}}}[5m]))"
    )
    # Lag over the consumption rate of the last 5 minutes: +Inf for a group that has
    # stopped committing, 0 for one with no lag.
    catch_up = f"{lag} / {consumed} > 0 or {lag} == 0"
    return dashboard(
        "strom-consumer-groups",
        "Strom / Consumer groups",
        "Consumer lag per group, topic and partition (the partition's high watermark minus "
        "the group's committed offset), consumption against production, and the time each "
        "group needs to catch up at its current pace.",
        [
            stat(
                "Consumer groups",
                "count(count by (consumergroup) "
                f"(kafka_consumergroup_current_offset{{{selected}}}))",
                description="Groups with committed offsets.",
            ),
            stat("Total lag", f"sum(kafka_consumergroup_lag{{{selected}}})"),
            stat("Largest partition lag", f"max(kafka_consumergroup_lag{{{selected}}})"),
            stat(
                "Longest time to catch up",
                f"max({catch_up})",
                unit="s",
                width=6,
                description="Infinite when a group with lag has committed nothing for 5 minutes.",
            ),
            stat(
                "Groups lagging more than 10000 records",
                f"count({lag} > 10000) or vector(0)",
                width=6,
                description="The threshold of the StromConsumerGroupLagTooLarge alert (after "
                "15 minutes).",
            ),
            timeseries("Lag per group and topic", q(lag, "{{consumergroup}} {{topic}}"), width=12),
            timeseries(
                "Time to catch up per group and topic",
                q(catch_up, "{{consumergroup}} {{topic}}"),
                unit="s",
                width=12,
                description="Lag divided by the records the group consumed per second over "
                "the last 5 minutes.",
            ),
            timeseries(
                "Consumed and produced per second",
                q(
                    "sum by (consumergroup, topic) "
                    f"(rate(kafka_consumergroup_current_offset{{{selected}}}{RATE}))",
                    "{{consumergroup}} consumed {{topic}}",
                ),
                q(
                    "sum by (topic) "
                    f'(rate(kafka_topic_partition_current_offset{{topic=~"$topic"}}{RATE}))',
                    "produced to {{topic}}",
                ),
                unit="ops",
                width=12,
                description="Consumed: how fast committed offsets advance; produced: how fast "
                "the high watermarks advance. Lag grows while consumption is below production.",
            ),
            timeseries(
                "Committed offset per partition",
                q(
                    "max by (consumergroup, topic, partition) "
                    f"(kafka_consumergroup_current_offset{{{selected}}})",
                    "{{consumergroup}} {{topic}}-{{partition}}",
                ),
                width=12,
            ),
            timeseries(
                "Lag per partition",
                q(
                    f"kafka_consumergroup_lag{{{selected}}}",
                    "{{consumergroup}} {{topic}}-{{partition}}",
                ),
                width=12,
            ),
            table(
                "Lag per partition now",
                q(
                    "max by (consumergroup, topic, partition) "
                    f"(kafka_consumergroup_lag{{{selected}}})"
                ),
                width=12,
            ),
        ],
        [
            label_variable("consumergroup", "Consumer group", "kafka_consumergroup_current_offset"),
            topic_variable("kafka_consumergroup_current_offset"),
        ],
    )


DASHBOARDS = {
    "strom-cluster": cluster_overview,
    "strom-kraft": kraft_quorum,
    "strom-topics": topics,
    "strom-consumer-groups": consumer_groups,
}


def render() -> dict[str, str]:
    """{file name: JSON text} of every dashboard."""
    return {
        f"{uid}.json": json.dumps(build(), indent=2, sort_keys=True) + "\n"
        for uid, build in DASHBOARDS.items()
    }


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for name, text in render().items():
        (OUT / name).write_text(text)
        print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
