"""The Spark connector's batch read: `spark.read.format("strom")` into Spark's `noop` sink,
against the plain client and Spark's Parquet reader on the same records in the same run.

    python bench/spark_read.py [--quick]

Three combined nodes on loopback (tests/node_integration/node_cluster.py), one topic of 6
partitions (RF 1: only the read is measured, and every node leads two partitions). Records:
1 KiB values with 8-byte keys, uncompressed, produced as 1,000-record batches straight
through Produce (acks=1) until VOLUME of values is in the log (2 GiB; --quick 192 MiB).

1. The plain client in one process (reference 1): strom.consumer.Consumer assigned the six
   partitions from the start, poll() until every record has arrived (it decodes every record
   into a ConsumerRecord, as a user of the client would).
2. Spark reading Parquet (reference 2): the same records, written once by the connector to a
   Parquet directory (snappy, Spark's default; untimed), read into `noop`.
3. The connector: one Spark task per partition (6 tasks on `local[2]`), each fetching from
   its leader and decoding into Arrow, into `noop`. After a small warm-up read that starts
   Spark's Python workers.
4. For context, not a goal: a Python data source yielding the same Arrow batches with nothing
   fetched or decoded, into `noop`: what Spark's Python Data Source path costs by itself,
   the most any Python connector can reach on this machine.

MB/s counts value bytes (10^6); records/s all records. Goals (issue 7): connector >= 1.0x the
single-process client, >= 0.5x Spark's Parquet read. Benchmarks print, never assert: a missed
goal is printed UNMET. The load average before and after is printed, since a machine shared
with other work slows the Spark runs most. Data goes under $STROM_BENCH_DIR (default /tmp)
and is deleted at the end. The full run takes about 3 minutes; --quick about one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

# Strom's nodes and tools run gRPC on its posix endpoints (strom_tools/grpc_engine.py); the
# benchmark's own gRPC, its references included, too: set before grpc is first imported.
import strom_tools  # noqa: E402, F401, I001
import grpc  # noqa: E402

from strom.consumer import Consumer, TopicPartition  # noqa: E402
from strom.range_reader import SyncCluster  # noqa: E402
from strom_api.records import Record, encode_batch  # noqa: E402
from strom_api.v1 import client_pb2, controller_pb2  # noqa: E402
from tests.node_integration.node_cluster import NodeCluster  # noqa: E402

TOPIC = "spark-bench"
PARTITIONS = 6
RECORD = 1024
BATCH = 1000
IN_FLIGHT = 4
MB = 1_000_000
VOLUME = {"full": 2 << 30, "quick": 192 << 20}


def create_topic(cluster: NodeCluster) -> None:
    response = cluster.call(
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(
                    name=TOPIC, num_partitions=PARTITIONS, replication_factor=1
                )
            ]
        ),
    )
    assert response.topics[0].error.code == 0, response


def produce(servers: str, volume: int) -> int:
    """Sends 1,000-record batches round-robin over the partitions, IN_FLIGHT per partition,
    until `volume` bytes of values are in; returns the record count."""
    now = int(time.time() * 1000)
    batches = [
        encode_batch(
            [Record(i, now, b"%08d" % i, os.urandom(RECORD)) for i in range(BATCH)]
        )
        for _ in range(4)
    ]
    per_partition = -(-volume // (RECORD * BATCH * PARTITIONS))
    with SyncCluster(servers) as cluster:
        deadline = time.monotonic() + 30
        while True:
            cluster.refresh([TOPIC])
            info = cluster.topics.get(TOPIC)
            if info and len(info.partitions) == PARTITIONS and all(
                p.leader >= 0 for p in info.partitions.values()
            ):
                break
            assert time.monotonic() < deadline, "the topic has no leaders"
            time.sleep(0.2)
        stubs = {p: cluster.stub(cluster.leader(TopicPartition(TOPIC, p))) for p in range(6)}
        pending: list[grpc.Future] = []
        for n in range(per_partition):
            for p in range(PARTITIONS):
                request = client_pb2.ProduceRequest(
                    acks=1,
                    timeout_ms=30_000,
                    topics=[
                        client_pb2.ProduceRequest.Topic(
                            name=TOPIC,
                            partitions=[
                                client_pb2.ProduceRequest.Partition(
                                    partition=p, records=batches[(n + p) % len(batches)]
                                )
                            ],
                        )
                    ],
                )
                pending.append(stubs[p].Produce.future(request, timeout=60))
            if len(pending) >= IN_FLIGHT * PARTITIONS:
                for future in pending:
                    answer = future.result().topics[0].partitions[0]
                    assert answer.error.code == 0, answer.error
                pending = []
        for future in pending:
            assert future.result().topics[0].partitions[0].error.code == 0
    return per_partition * PARTITIONS * BATCH


def read_with_client(servers: str, total: int) -> tuple[float, int]:
    consumer = Consumer(
        bootstrap_servers=servers,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 << 20,
        fetch_max_bytes=32 << 20,
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        count = size = 0
        start = time.perf_counter()
        while count < total:
            for records in consumer.poll(timeout_ms=1000, max_records=20_000).values():
                count += len(records)
                size += sum(len(r.value) for r in records)
        return time.perf_counter() - start, size
    finally:
        consumer.close()


def spark_session(quick: bool):  # type: ignore[no-untyped-def]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Spark finds pyspark_strom by scanning its workers' sys.path for pyspark_* modules; an
    # editable install does not put the repository there, so the root goes on PYTHONPATH.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.abspath(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("strom-spark-read-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def ceiling_source(total: int):  # type: ignore[no-untyped-def]
    """A Python data source that yields the same Arrow batches as the connector would (same
    schema, 1 KiB values, ~4 MiB each) without fetching or decoding anything: what Spark's
    Python Data Source machinery costs by itself. Defined here, so it is pickled by value."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class CeilingReader(DataSourceReader):
        def partitions(self):  # type: ignore[no-untyped-def]
            return [InputPartition(p) for p in range(PARTITIONS)]

        def read(self, partition):  # type: ignore[no-untyped-def]
            import numpy as np
            import pyarrow as pa

            from pyspark_strom.schema import arrow_schema, read_schema

            n = 4000
            schema = arrow_schema(read_schema(False))
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.array([b"%08d" % i for i in range(n)], pa.binary()),
                    pa.array([os.urandom(RECORD) for _ in range(n)], pa.binary()),
                    pa.array([TOPIC] * n, pa.string()),
                    pa.array(np.full(n, partition.value, np.int32)),
                    pa.array(np.arange(n, dtype=np.int64)),
                    pa.array(np.arange(n, dtype=np.int64), schema.field("timestamp").type),
                    pa.array(np.zeros(n, np.int32)),
                ],
                schema=schema,
            )
            left = total // PARTITIONS
            while left > 0:
                yield batch.slice(0, min(n, left))
                left -= n

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "strom_bench_ceiling"

        def schema(self):  # type: ignore[no-untyped-def]
            from pyspark_strom.schema import read_schema

            return read_schema(False)

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return CeilingReader()

    return CeilingSource


def timed_noop(df) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def line(name: str, seconds: float, size: int, records: int) -> str:
    return (
        f"{name:<34} {seconds:7.2f} s  {size / MB / seconds:8.1f} MB/s  "
        f"{records / seconds:11,.0f} records/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="192 MiB instead of 2 GiB")
    args = parser.parse_args()
    mode = "quick" if args.quick else "full"
    volume = VOLUME[mode]
    base = tempfile.mkdtemp(prefix="spark-read-", dir=os.environ.get("STROM_BENCH_DIR", "/tmp"))
    print(f"spark_read ({mode}): {volume >> 20} MiB of {RECORD}-byte values, {PARTITIONS} "
          f"partitions; load average before {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    cluster = NodeCluster(os.path.join(base, "cluster"), 3)
    cluster.start_all()
    spark = None
    try:
        cluster.wait_for_brokers()
        create_topic(cluster)
        servers = ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids)
        start = time.perf_counter()
        total = produce(servers, volume)
        size = total * RECORD
        print(f"produced {total:,} records in {time.perf_counter() - start:.1f} s")

        client_s, client_size = read_with_client(servers, total)
        assert client_size == size, (client_size, size)

        spark = spark_session(args.quick)
        def reader():  # type: ignore[no-untyped-def]
            # A new DataFrameReader each time: option() changes the reader it is called on.
            return (
                spark.read.format("strom")
                .option("strom.bootstrap.servers", servers)
                .option("subscribe", TOPIC)
            )

        first_batches = json.dumps({TOPIC: {str(p): BATCH for p in range(PARTITIONS)}})
        warm = reader().option("endingOffsets", first_batches).load()
        assert warm.count() == BATCH * PARTITIONS
        connector = reader().load()
        connector_s = timed_noop(connector)

        parquet_dir = os.path.join(base, "parquet")
        connector.write.parquet(parquet_dir)
        parquet = spark.read.parquet(parquet_dir)
        found = parquet.count()
        assert found == total, (found, total)
        parquet_s = timed_noop(parquet)
        connector_again_s = timed_noop(reader().load())
        connector_s = min(connector_s, connector_again_s)
        spark.dataSource.register(ceiling_source(total))
        ceiling = spark.read.format("strom_bench_ceiling").load()
        assert ceiling.count() == total
        ceiling_s = timed_noop(ceiling)

        print(line("plain client, one process", client_s, size, total))
        print(line("Spark, Parquet -> noop", parquet_s, size, total))
        print(line("connector -> noop (best of 2)", connector_s, size, total))
        print(line("Python source, no fetch/decode", ceiling_s, size, total))
        vs_client = client_s / connector_s
        vs_parquet = parquet_s / connector_s
        print(f"connector / plain client: {vs_client:.2f}x (goal >= 1.0x: "
              f"{'met' if vs_client >= 1.0 else 'UNMET'})")
        print(f"connector / Spark Parquet: {vs_parquet:.2f}x (goal >= 0.5x: "
              f"{'met' if vs_parquet >= 0.5 else 'UNMET'})")
        print(f"(Spark's Python Data Source path alone, same Arrow batches with nothing fetched "
              f"or decoded: {parquet_s / ceiling_s:.2f}x Spark Parquet)")
        print(f"load average after {os.getloadavg()[0]:.2f}")
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop_all()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
