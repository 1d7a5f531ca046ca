"""What broker-side compression.type costs: a leader's append path when the topic's codec
differs from the producer's (broker/produce_checks.py recompresses every batch, as Kafka's
LogValidator does), against the same batches on a `producer` topic, which stores them as
they come.

    python bench/recompression.py [--quick]

A leader appends producer batches with `Partition.append_as_leader` on real files (a log in
a temp dir under $STROM_BENCH_DIR, default /tmp; page cache, no fsync): 64 KiB batches
(uncompressed size) of 1 KiB values with 8-byte keys, half random and half repeated text,
from a gzip producer and from an uncompressed one, into topics with compression.type
producer, uncompressed, gzip, snappy, lz4 and zstd. The targets are interleaved run by run
so that load on the machine hits them alike; medians. MB/s counts the bytes the producer
sent; the ratio is records/s against `producer` in the same run (1.00 where the codec is the
producer's own: nothing to do but validate). Batches of 16 KiB and more are recompressed in
a worker thread by the broker (replica_manager.RECOMPRESS_OFF_LOOP_BYTES); here everything
runs inline, so the figures are the CPU one batch costs, wherever it runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from broker.partition import Partition
from broker.topic_settings import TopicSettings
from metadata.image import PartitionRegistration
from storage.config import LogConfig
from storage.log import Log
from strom_api import compression
from strom_api.records import Record, encode_batch

BATCH_BYTES = 64 * 1024
VALUE_SIZE = 1024
TARGETS = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def batches(codec: int, count: int, now_ms: int) -> list[bytes]:
    per_batch = BATCH_BYTES // (VALUE_SIZE + 20)
    out = []
    for n in range(count):
        records = [
            Record(
                i,
                now_ms,
                b"key-%04d" % i,
                (os.urandom(VALUE_SIZE // 2) + f"{n}:{i}:".encode()).ljust(VALUE_SIZE, b"-"),
            )
            for i in range(per_batch)
        ]
        out.append(encode_batch(records, compression_codec=codec))
    return out


def leader(directory: str, target: str) -> Partition:
    configs = {**LogConfig(retention_ms=-1).to_properties(), "compression.type": target}
    settings = TopicSettings.from_configs(configs)
    partition = Partition("bench", 0, bytes(16), Log.open(directory, settings.log), 1, settings)
    partition.apply_registration(
        PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=1, partition_epoch=1),
        0,
        settings,
    )
    return partition


def append_all(partition: Partition, data: list[bytes], now_ms: int) -> float:
    start = time.perf_counter()
    for batch in data:
        partition.append_as_leader(batch, -1, now_ms)
    return time.perf_counter() - start


def measure(root: str, source: int, count: int, runs: int) -> None:
    now_ms = int(time.time() * 1000)
    data = batches(source, count, now_ms)
    sent = sum(len(b) for b in data)
    records = count * (BATCH_BYTES // (VALUE_SIZE + 20))
    times: dict[str, list[float]] = {t: [] for t in TARGETS}
    for run in range(runs):
        order = TARGETS if run % 2 == 0 else tuple(reversed(TARGETS))
        for target in order:
            directory = os.path.join(root, f"{source}-{target}-{run}")
            partition = leader(directory, target)
            try:
                times[target].append(append_all(partition, data, now_ms))
            finally:
                partition.log.close()
                shutil.rmtree(directory)
    base = statistics.median(times["producer"])
    name = compression.NAMES[source]
    for target in TARGETS:
        wall = statistics.median(times[target])
        print(
            f"{name:>6} -> {target:<13} {sent / wall / 1e6:8.1f} MB/s "
            f"{records / wall:11,.0f} records/s {base / wall:11.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    count, runs = (40, 3) if args.quick else (200, 5)
    root = tempfile.mkdtemp(prefix="recompression-", dir=os.environ.get("STROM_BENCH_DIR"))
    try:
        print(f"{count} batches of {BATCH_BYTES // 1024} KiB, {runs} runs, medians")
        print(f"{'producer -> topic':<23} {'sent':>13} {'':>21} {'vs producer':>11}")
        for source in (compression.GZIP, compression.NONE):
            measure(root, source, count, runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
