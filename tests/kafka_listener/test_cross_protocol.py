"""One log, two protocols (issue 20): records written through Kafka's protocol are read
through Strom's gRPC client, `strom console-consumer` and the Spark connector, and records
written by Strom's producer and the Spark connector's writer are read by confluent-kafka,
with the same offsets, keys, headers and timestamps; a consumer group's commits made
through one protocol are where a member on the other goes on from. (Offsets committed and
read by the admin clients of both sides: test_group_apis.py; records of Strom's producer read
by assign(): test_consume.py.)"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from strom import Consumer as StromConsumer
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.client_flows import (
    as_written,
    committed,
    confluent_member,
    confluent_produce,
)
from tests.kafka_listener.conftest import QUICK_GROUPS, started
from tests.kafka_listener.data_helpers import (
    BASE_TS,
    kafka_topic,
    strom_produced,
    strom_records,
)
from tests.kafka_listener.kafka_cluster import KafkaCluster
from tests.node_integration.node_cluster import wait_until
from tests.spark_session import local_spark_session

TIMEOUT = 30
Row = tuple[int, int, bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KafkaCluster]:
    base = str(tmp_path_factory.mktemp("cross_protocol"))
    yield from started(KafkaCluster(base, 3, dict(QUICK_GROUPS)))


def confluent_read(cluster: KafkaCluster, topic: str, partitions: int, count: int) -> list[Row]:
    """The first `count` records of `topic` read by confluent-kafka by assign(), sorted by
    partition and offset."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "group.id": "unused-by-assign",
            "enable.auto.commit": False,
        }
    )
    out: list[Row] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + TIMEOUT
        while len(out) < count and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            headers = m.headers() or []
            out.append((m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1], headers))
    finally:
        consumer.close()
    assert len(out) == count, (len(out), count)
    return sorted(out)


def test_kafka_written_records_read_through_grpc_and_the_console_consumer(cluster):
    topic = "kafka-to-grpc"
    kafka_topic(cluster, topic, partitions=2)
    written = sorted(as_written(confluent_produce(cluster, topic, 12, 2)))
    through_grpc = [
        (r.partition, r.offset, r.key, r.value, r.timestamp, r.headers)
        for r in strom_records(cluster, topic, 2, 12)
    ]
    assert through_grpc == written
    tool = subprocess.run(
        [sys.executable, "-m", "strom_tools", "console-consumer"]
        + ["--bootstrap-server", bootstrap(cluster), "--topic", topic, "--partition", "1"]
        + ["--offset", "0", "--max-messages", "6", "--timeout-ms", "20000"]
        + ["--property", "print.timestamp=true", "--property", "print.offset=true"]
        + ["--property", "print.headers=true", "--property", "print.key=true"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert tool.returncode == 0, tool.stderr
    assert tool.stdout.splitlines() == [
        f"CreateTime:{ts}\tOffset:{offset}\tn:{key.decode()[4:]},source:confluent"
        f"\t{key.decode()}\t{value.decode()}"
        for partition, offset, key, value, ts, _ in written
        if partition == 1 and key is not None and value is not None
    ]


def test_strom_written_records_read_by_a_confluent_kafka_group(cluster):
    """The reverse through a group: Strom's producer (gRPC) writes, a librdkafka consumer
    subscribed with a group reads them as written (a header with no value included)."""
    topic, group = "grpc-to-kafka", f"reverse-{uuid.uuid4().hex[:8]}"
    kafka_topic(cluster, topic)
    metadata = strom_produced(cluster, topic, 8)
    consumer = confluent_member(cluster, group, "reader")
    consumer.subscribe([topic])
    read: list[Row] = []
    try:

        def all_read() -> bool:
            m = consumer.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                read.append(
                    (m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers())
                )
            return len(read) >= 8

        wait_until(all_read, TIMEOUT, "the group member to read the 8 records")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert [r[1] for r in read] == [m.offset for m in metadata]
    assert read == [
        (
            0,
            i,
            f"key-{i}".encode(),
            f"value-{i}".encode(),
            BASE_TS + i,
            [("n", str(i).encode()), ("none", None)],
        )
        for i in range(8)
    ]
    assert committed(cluster, group) == {(topic, 0): 8}


def test_a_group_goes_on_across_protocols_from_each_others_commits(cluster):
    """One group, its members one after the other: librdkafka (Kafka listener) reads and
    commits, Strom's consumer (gRPC) goes on from that commit and commits, and librdkafka
    goes on from Strom's; each reads exactly the records after the last commit."""
    topic, group = "group-handover", f"handover-{uuid.uuid4().hex[:8]}"
    kafka_topic(cluster, topic, partitions=2)

    def confluent_turn(count: int) -> list[tuple[int, int]]:
        consumer = confluent_member(cluster, group, "librdkafka")
        consumer.subscribe([topic])
        read: list[tuple[int, int]] = []
        try:

            def done() -> bool:
                m = consumer.poll(0.2)
                if m is not None:
                    assert m.error() is None, m.error()
                    read.append((m.partition(), m.offset()))
                return len(read) >= count

            wait_until(done, TIMEOUT, f"librdkafka to read {count} records")
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        return sorted(read)

    def strom_turn(count: int) -> list[tuple[int, int]]:
        read: list[tuple[int, int]] = []
        with StromConsumer(
            topic,
            bootstrap_servers=bootstrap(cluster),
            group_id=group,
            client_id="strom",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        ) as consumer:
            deadline = time.monotonic() + TIMEOUT
            while len(read) < count and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    read.extend((r.partition, r.offset) for r in records)
            consumer.commit()
        return sorted(read)

    confluent_produce(cluster, topic, 6, 2)
    assert confluent_turn(6) == [(p, o) for p in range(2) for o in range(3)]
    assert committed(cluster, group) == {(topic, 0): 3, (topic, 1): 3}
    confluent_produce(cluster, topic, 4, 2)
    assert strom_turn(4) == [(p, o) for p in range(2) for o in range(3, 5)]
    assert committed(cluster, group) == {(topic, 0): 5, (topic, 1): 5}
    confluent_produce(cluster, topic, 4, 2)
    assert confluent_turn(4) == [(p, o) for p in range(2) for o in range(5, 7)]
    assert committed(cluster, group) == {(topic, 0): 7, (topic, 1): 7}


# --- the Spark connector ----------------------------------------------------------------------


def spark_session() -> tuple[Any, bool]:
    """The tests' SparkSession, and whether this call made it (then the caller stops it)."""
    from pyspark import sql as pyspark_sql

    existing = pyspark_sql.SparkSession.getActiveSession()
    return local_spark_session(), existing is None


@pytest.mark.spark
def test_spark_reads_kafka_written_records_and_writes_records_confluent_kafka_reads(cluster):
    """One Spark job both ways: the connector reads what confluent-kafka wrote (topic
    `spark-in`) and its writer writes each row to `spark-out`, same partition, key, value
    and headers, with the offset and timestamp Spark read added as two headers. So
    confluent-kafka, reading `spark-out`, sees that Spark read each record with the offset
    and timestamp Kafka's protocol gave it, and Strom's gRPC client reads `spark-out` with
    the offsets and timestamps confluent-kafka reads."""
    kafka_topic(cluster, "spark-in", partitions=2)
    kafka_topic(cluster, "spark-out", partitions=2)
    written = sorted(as_written(confluent_produce(cluster, "spark-in", 10, 2)))
    spark, made = spark_session()
    try:
        from pyspark.sql import functions as F

        rows = (
            spark.read.format("strom")
            .option("kafka.bootstrap.servers", bootstrap(cluster))
            .option("subscribe", "spark-in")
            .option("includeHeaders", "true")
            .load()
        )
        read_as = F.array(
            F.struct(
                F.lit("spark.offset").alias("key"),
                F.col("offset").cast("string").cast("binary").alias("value"),
            ),
            F.struct(
                F.lit("spark.timestamp").alias("key"),
                F.unix_millis(F.col("timestamp")).cast("string").cast("binary").alias("value"),
            ),
        )
        (
            rows.select(
                "key",
                "value",
                "partition",
                F.concat(F.col("headers"), read_as).alias("headers"),
            )
            .write.format("strom")
            .option("kafka.bootstrap.servers", bootstrap(cluster))
            .option("topic", "spark-out")
            .mode("append")
            .save()
        )
    finally:
        if made:
            spark.stop()
    out = confluent_read(cluster, "spark-out", 2, 10)
    # Each record of spark-in, as Spark read it: same partition and order, so same offset.
    assert [(p, o, k, v, h[:-2]) for p, o, k, v, _, h in out] == [
        (p, o, k, v, h) for p, o, k, v, _, h in written
    ]
    assert [(h[-2], h[-1]) for *_, h in out] == [
        (("spark.offset", str(o).encode()), ("spark.timestamp", str(ts).encode()))
        for _, o, _, _, ts, _ in written
    ]
    through_grpc = [
        (r.partition, r.offset, r.key, r.value, r.timestamp, r.headers)
        for r in strom_records(cluster, "spark-out", 2, 10)
    ]
    assert through_grpc == out
