"""Prometheus metrics of one node, on an HTTP listener (`prometheus.metrics.port`, default
9404, the port Strimzi's JMX exporter uses; -1 turns it off; server/metrics_listener.py).

Names are the ones Strimzi's JMX exporter rules give Kafka's MBeans (lower case, `-` to
`_`, `PerSec` meters as `_total` counters), so Strimzi's Grafana dashboards and alert rules
work unchanged: kafka_server_replicamanager_*, kafka_controller_kafkacontroller_*,
kafka_server_brokertopicmetrics_*_total (per topic, and without the topic label for all
topics, as Kafka reports both), kafka_log_log_size, kafka_log_log_logendoffset and
kafka_log_log_logstartoffset (per replica, as Kafka's Log MBeans),
kafka_log_logmanager_offlinelogdirectorycount, kafka_server_raftmetrics_*.
Offsets that Kafka's brokers do not export come under Kafka Exporter's names (what Strimzi's
consumer-lag dashboards query; Kafka Exporter speaks Kafka's protocol, so it cannot run
against Strom): the leader's high watermark as kafka_topic_partition_current_offset, and each
group's committed offsets as kafka_consumergroup_current_offset from its coordinator. Lag is
their difference, computed by Prometheus (deploy/prometheus/strom-rules.yml records
kafka_consumergroup_lag): the coordinator of a group rarely leads all its partitions, and a
scrape asks no other node. Strom's own are in base units: strom_request_duration_seconds{api},
strom_replica_lag_records, strom_purgatory_size, strom_raft_messages_refused_total,
strom_event_loop_lag_seconds, strom_gc_pause_seconds{generation} and strom_gc_frozen_objects
(server/loop_health.py);
kafka_server_authorizer_denied_total{operation} counts the requests the authorizer denied
(server/request_authorization.py), by Kafka's operation name (a dozen values at most).
kafka_network_socketserver_memorypool{available,used} for queued.max.request.bytes;
kafka_server_fetchsessioncache_* for the incremental fetch sessions (KIP-227). Requests on
the Kafka protocol listeners count as kafka_network_requestmetrics_requests_total{request,
version} (Kafka's RequestMetrics RequestsPerSec as Strimzi's exporter names it) and take
strom_kafka_request_duration_seconds{request}. The
replication throttles report as Kafka's quota sensors: kafka_server_leaderreplication_byte_rate
and kafka_server_followerreplication_byte_rate (bytes/s of throttled replicas moved, since the
previous scrape).
Python's process and GC collectors replace the JVM ones.

Gauges are computed at scrape time from the node's state: the HTTP server runs in a
thread, so it asks the event loop for a snapshot instead of reading structures the loop
is changing. The collector sees the node only through server/node_status.MetricsSources
(this module never imports the node, which imports it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raft.roles import Role
from server.loop_health import LoopHealth

if TYPE_CHECKING:
    from server.node_status import MetricsSources

# Kafka's KafkaRaftMetrics current-state values.
_RAFT_STATE = {
    Role.LEADER: "leader",
    Role.CANDIDATE: "candidate",
    Role.PROSPECTIVE: "candidate",
    Role.FOLLOWER: "follower",
    Role.UNATTACHED: "unattached",
    Role.RESIGNED: "resigned",
}
REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class NodeMetrics:
    """The node's registry: request latency histograms plus the scrape-time collector."""

    def __init__(self, node: MetricsSources) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.request_duration = Histogram(
            "strom_request_duration_seconds",
            "Time from a request's arrival to its answer, by API (long polls included).",
            ["api"],
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        # The Kafka listener's requests (server/kafka/), by the names Strimzi's JMX exporter
        # gives Kafka's RequestMetrics RequestsPerSec{request,version}; their time in
        # Strom's own histogram, in seconds.
        self.kafka_requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests served on the Kafka protocol listeners, by API and version.",
            ["request", "version"],
            registry=self.registry,
        )
        self.kafka_request_duration = Histogram(
            "strom_kafka_request_duration_seconds",
            "Time from a Kafka protocol request's arrival to its answer being written, by API.",
            ["request"],
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        loop = asyncio.get_running_loop()
        self.registry.register(NodeCollector(node, loop))
        # Event-loop lag and GC pauses (server/loop_health.py).
        self.loop_health = LoopHealth(self.registry, loop)
        self.loop_health.start()

    def close(self) -> None:
        self.loop_health.close()

    def observe(self, api: str, seconds: float) -> None:
        self.request_duration.labels(api).observe(seconds)

    def observe_kafka(self, request: str, version: int, seconds: float) -> None:
        self.kafka_requests.labels(request, str(version)).inc()
        self.kafka_request_duration.labels(request).observe(seconds)


class NodeCollector(Collector):
    def __init__(self, node: MetricsSources, loop: asyncio.AbstractEventLoop) -> None:
        self.node = node
        self.loop = loop
        self._rates: dict[str, tuple[float, int]] = {}

    def collect(self) -> Iterable[Metric]:
        future = asyncio.run_coroutine_threadsafe(self._snapshot(), self.loop)
        return future.result(timeout=10)

    async def _snapshot(self) -> list[Metric]:
        metrics: list[Metric] = []
        metrics += self._raft()
        metrics += self._authorizer()
        if self.node.controller is not None:
            metrics += self._controller()
        if self.node.log_manager is not None:
            metrics += self._log_manager()
        if self.node.replicas is not None:
            metrics += self._replicas()
            metrics += self._offsets()
        if self.node.groups is not None:
            metrics += self._committed_offsets()
        metrics += self._authentication()
        return metrics

    # --- security ----------------------------------------------------------------------------

    def _authentication(self) -> Iterator[Metric]:
        """Kafka's socket-server-metrics successful/failed-authentication-total, per
        listener (server/sasl_exchange.py counts SASL exchanges)."""
        counts = self.node.authentications
        for name, text, per_listener in (
            (
                "kafka_server_socket_server_metrics_successful_authentication",
                "SASL authentications that succeeded, per listener (0 on non-SASL ones).",
                counts.succeeded,
            ),
            (
                "kafka_server_socket_server_metrics_failed_authentication",
                "SASL authentications that failed, per listener (0 on non-SASL ones).",
                counts.failed,
            ),
        ):
            family = CounterMetricFamily(name, text, labels=["listener"])
            # Every listener, 0 where nothing authenticates (PLAINTEXT, SSL), as Kafka's
            # socket-server-metrics has one series per listener.
            for listener in self.node.config.protocols:
                family.add_metric([listener], per_listener.get(listener, 0))
            yield family

    def _authorizer(self) -> Iterator[Metric]:
        if not self.node.authz.enabled:
            return
        denied = CounterMetricFamily(
            "kafka_server_authorizer_denied",
            "Requests (or the resources a request named) the authorizer denied, by operation.",
            labels=["operation"],
        )
        for operation, count in sorted(self.node.authz.denied.items()):
            denied.add_metric([operation], count)
        yield denied

    # --- KRaft --------------------------------------------------------------------------

    def _raft(self) -> Iterator[Metric]:
        driver = self.node.driver
        core = driver.core
        if core is None:
            return
        stats = driver.stats()
        observer = self.node.config.node_id not in self.node.config.voters
        state = "observer" if observer and core.role is not Role.LEADER else _RAFT_STATE[core.role]
        if state == "unattached" and core.voted_for >= 0:
            state = "voted"
        current = GaugeMetricFamily(
            "kafka_server_raftmetrics_current_state",
            "The node's Raft state (leader, candidate, voted, follower, unattached, observer).",
            labels=["current_state"],
        )
        current.add_metric([state], 1)
        yield current
        yield _gauge(
            "kafka_server_raftmetrics_current_leader",
            "The Raft leader's id, -1 none.",
            stats.core.leader_id,
        )
        yield _gauge("kafka_server_raftmetrics_current_epoch", "The Raft epoch.", stats.core.epoch)
        yield _gauge(
            "kafka_server_raftmetrics_current_vote",
            "The voter this node voted for in this epoch, -1 none.",
            stats.core.voted_for,
        )
        yield _gauge(
            "kafka_server_raftmetrics_high_watermark",
            "The metadata log's high watermark.",
            stats.core.high_watermark,
        )
        yield _gauge(
            "kafka_server_raftmetrics_log_end_offset",
            "The metadata log's end offset.",
            stats.core.log_end_offset,
        )
        yield _gauge(
            "kafka_server_raftmetrics_commit_latency_avg",
            "Average time in ms from append to commit of the records this node proposed.",
            stats.commit_latency_avg_ms,
        )
        yield _gauge(
            "kafka_server_raftmetrics_append_records_rate",
            "Records appended per second as leader since the previous scrape.",
            self._rate("append", stats.core.entries_proposed),
        )
        yield _gauge(
            "kafka_server_raftmetrics_fetch_records_rate",
            "Records fetched from the leader per second since the previous scrape.",
            self._rate("fetch", stats.core.entries_replicated),
        )
        yield CounterMetricFamily(
            "strom_raft_messages_refused",
            "Raft messages refused: malformed, from a node that is not a voter, or absurd.",
            value=stats.messages_refused,
        )

    def _rate(self, key: str, count: int) -> float:
        now = time.monotonic()
        last = self._rates.get(key)
        self._rates[key] = (now, count)
        if last is None or now <= last[0]:
            return 0.0
        return (count - last[1]) / (now - last[0])

    # --- the controller -----------------------------------------------------------------

    def _controller(self) -> Iterator[Metric]:
        controller = self.node.controller
        assert controller is not None
        image = controller.image
        active = controller.is_active()
        counts = controller.partition_counts  # moved by each delta: nothing walked here
        brokers = image.cluster.brokers.values()
        prefix = "kafka_controller_kafkacontroller_"
        yield _gauge(prefix + "activecontrollercount", "1 on the active controller.", int(active))
        # Every controller reports the cluster-wide counts from its own metadata image.
        yield _gauge(prefix + "globaltopiccount", "Topics in the cluster.", len(image.topics.by_id))
        yield _gauge(
            prefix + "globalpartitioncount", "Partitions in the cluster.", counts.partitions
        )
        yield _gauge(
            prefix + "offlinepartitionscount", "Partitions without a leader.", counts.offline
        )
        yield _gauge(
            prefix + "preferredreplicaimbalancecount",
            "Partitions not led by their first replica.",
            counts.imbalanced,
        )
        yield _gauge(
            prefix + "fencedbrokercount",
            "Registered brokers fenced.",
            sum(b.fenced for b in brokers),
        )
        yield _gauge(
            prefix + "activebrokercount",
            "Registered brokers unfenced.",
            sum(not b.fenced for b in brokers),
        )
        unclean = CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Leaders this controller elected from outside the ISR.",
        )
        unclean.add_metric([], controller.unclean_elections)
        yield unclean

    # --- the broker's log directories ---------------------------------------------------

    def _log_manager(self) -> Iterator[Metric]:
        manager = self.node.log_manager
        assert manager is not None
        yield _gauge(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "Log directories offline after a disk error (until the broker restarts).",
            manager.offline_dir_count(),
        )

    # --- the broker's replicas ----------------------------------------------------------

    def _replicas(self) -> Iterator[Metric]:
        replicas = self.node.replicas
        assert replicas is not None
        # The aggregates are counts the partitions keep as they change
        # (broker/replica_counts.py): a scrape reads them without walking every replica.
        aggregates = replicas.counts
        prefix = "kafka_server_replicamanager_"
        yield _gauge(
            prefix + "partitioncount", "Partitions on this broker.", len(replicas.partitions)
        )
        yield _gauge(prefix + "leadercount", "Partitions this broker leads.", aggregates.leaders)
        yield _gauge(
            prefix + "underreplicatedpartitions",
            "Led partitions whose ISR is smaller than their replica set.",
            aggregates.under_replicated,
        )
        yield _gauge(
            prefix + "underminisrpartitioncount",
            "Led partitions whose ISR is below min.insync.replicas.",
            aggregates.under_min_isr,
        )
        yield _gauge(
            prefix + "atminisrpartitioncount",
            "Led partitions whose ISR is exactly min.insync.replicas.",
            aggregates.at_min_isr,
        )
        stats = replicas.stats
        isr = replicas.isr_sender.proposals.stats
        yield _counter(prefix + "isrshrinks", "ISR shrinks the controller accepted.", isr.shrinks)
        yield _counter(
            prefix + "isrexpands", "ISR expansions the controller accepted.", isr.expands
        )
        yield _counter(
            prefix + "failedisrupdates", "ISR changes refused or unanswered.", isr.failed
        )
        topic_metrics = (
            ("bytesin", "Bytes produced to the topic.", stats.bytes_in),
            ("bytesout", "Bytes fetched by consumers from the topic.", stats.bytes_out),
            ("messagesin", "Records produced to the topic.", stats.messages_in),
            ("totalproducerequests", "Produce requests (per partition).", stats.produce_requests),
            (
                "failedproducerequests",
                "Produce requests that failed.",
                stats.failed_produce_requests,
            ),
            (
                "totalfetchrequests",
                "Consumer fetch requests (per partition).",
                stats.fetch_requests,
            ),
            (
                "failedfetchrequests",
                "Consumer fetch requests that failed.",
                stats.failed_fetch_requests,
            ),
        )
        for name, text, counts in topic_metrics:
            family = CounterMetricFamily(
                "kafka_server_brokertopicmetrics_" + name, text, labels=["topic"]
            )
            family.add_metric([""], sum(counts.values()))  # all topics, as Kafka's aggregate
            for topic, count in sorted(counts.items()):
                family.add_metric([topic], count)
            yield family
        size = GaugeMetricFamily(
            "kafka_log_log_size",
            "Bytes of the partition's log on disk.",
            labels=["topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "strom_replica_lag_records",
            "How many records a follower is behind its leader (reported by the leader).",
            labels=["topic", "partition", "replica"],
        )
        for p in sorted(replicas.partitions.values(), key=lambda p: (p.topic, p.index)):
            size.add_metric([p.topic, str(p.index)], p.log.size)
            if p.leader is not None:
                end = p.log.log_end_offset
                for replica, follower in sorted(p.leader.followers.items()):
                    behind = max(end - follower.log_end_offset, 0)
                    lag.add_metric([p.topic, str(p.index), str(replica)], behind)
        yield size
        yield lag
        # Kafka's ReplicationQuotaManager sensors (kafka.server:type=LeaderReplication and
        # type=FollowerReplication, byte-rate): bytes/s of the throttled replicas moved.
        quotas = replicas.replication
        for side, quota in (("leader", quotas.leader), ("follower", quotas.follower)):
            yield _gauge(
                f"kafka_server_{side}replication_byte_rate",
                f"Bytes per second of throttled replicas moved as {side}, since the previous "
                "scrape.",
                self._rate(f"{side}-replication", quota.stats.recorded_bytes),
            )
        purgatory = GaugeMetricFamily(
            "strom_purgatory_size",
            "Requests waiting: acks=all produces for replication, fetches for data.",
            labels=["operation"],
        )
        purgatory.add_metric(["produce"], stats.produce_waiting)
        purgatory.add_metric(["fetch"], stats.fetch_waiting)
        yield purgatory
        # Kafka's kafka.network:type=SocketServer,name=MemoryPoolAvailable/MemoryPoolUsed
        # (queued.max.request.bytes; available is -1 when the pool is unbounded).
        memory = replicas.memory
        available = memory.capacity - memory.in_use if memory.capacity >= 0 else -1
        yield _gauge(
            "kafka_network_socketserver_memorypoolavailable",
            "Bytes of queued.max.request.bytes free.",
            available,
        )
        yield _gauge(
            "kafka_network_socketserver_memorypoolused",
            "Bytes of produce requests and fetch responses held.",
            memory.in_use,
        )
        # Kafka's kafka.server:type=FetchSessionCache (KIP-227, broker/fetch_sessions.py).
        sessions = replicas.fetch_sessions.stats
        prefix = "kafka_server_fetchsessioncache_"
        yield _gauge(
            prefix + "numincrementalfetchsessions",
            "Incremental fetch sessions cached.",
            sessions.sessions,
        )
        yield _gauge(
            prefix + "numincrementalfetchpartitionscached",
            "Partitions held by the cached incremental fetch sessions.",
            sessions.partitions_cached,
        )
        yield _counter(
            prefix + "incrementalfetchsessionevictions",
            "Incremental fetch sessions evicted to make room for new ones.",
            sessions.evictions,
        )

    # --- offsets ------------------------------------------------------------------------

    def _offsets(self) -> Iterator[Metric]:
        replicas = self.node.replicas
        assert replicas is not None
        labels = ["topic", "partition"]
        end = GaugeMetricFamily(
            "kafka_log_log_logendoffset",
            "The offset the partition's replica on this broker appends next.",
            labels=labels,
        )
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset",
            "The first offset kept by the partition's replica on this broker.",
            labels=labels,
        )
        high_watermark = GaugeMetricFamily(
            "kafka_topic_partition_current_offset",
            "The high watermark (the end offset consumers see), reported by the leader.",
            labels=labels,
        )
        for p in sorted(replicas.partitions.values(), key=lambda p: (p.topic, p.index)):
            key = [p.topic, str(p.index)]
            end.add_metric(key, p.log.log_end_offset)
            start.add_metric(key, p.log.log_start_offset)
            if p.leader is not None:
                high_watermark.add_metric(key, p.log.high_watermark)
        yield end
        yield start
        yield high_watermark

    def _committed_offsets(self) -> Iterator[Metric]:
        """The offsets committed by the groups this broker coordinates: one series per
        group, topic and partition that has a committed offset (no group, no series)."""
        coordinator = self.node.groups
        assert coordinator is not None
        committed = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "The offset a consumer group committed (reported by the group's coordinator).",
            labels=["consumergroup", "topic", "partition"],
        )
        for group_id, topic, partition, offset in coordinator.committed_offsets():
            committed.add_metric([group_id, topic, str(partition)], offset)
        yield committed


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)


def _counter(name: str, text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, text, value=value)
