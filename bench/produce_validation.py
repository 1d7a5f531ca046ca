"""What record-level validation (broker/log_validator.py) costs: acks=all produce on a
3-node cluster, and the leader's append path alone.

    python bench/produce_validation.py [--quick]

1. acks=all: two 3-node clusters on loopback run side by side (RF 3, min.insync.replicas 2,
   3 partitions), one as shipped, one whose nodes skip the record walk and the decompression
   (the header checks only: the produce path as it was before record validation; the bench
   starts those nodes through itself, `--header-only-node`, so the broker has no switch for
   it). Pre-built batches sent as raw Produce requests, 4 in flight per partition leader
   (bench/produce_consume.py's produce_run), the two clusters in turn run by run; records/s
   and the ratio validated / header-only. Issue 16: validation must not halve it.
2. The leader's append path alone: a leader appends producer batches with
   `Partition.append_as_leader` on real files (a log in a temp dir under $STROM_BENCH_DIR,
   default /tmp; page cache, no fsync), with full validation and on the same code path with
   the header checks only, interleaved run by run so that load on the machine hits both
   alike: the upper bound of what validation costs, since a produce does this and more.

Both use records of 100 B and 1 KiB values with 8-byte keys in 64 KiB batches (uncompressed
size), uncompressed and zstd; MB/s counts the bytes sent (compressed for zstd). Last, the
worst case one produce can cause: a zstd batch of a million minimal records walked in full,
and a decompression bomb refused. The full run takes about 3 minutes; --quick about one.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time

import uvloop

from broker import log_validator
from broker.partition import Partition
from broker.topic_settings import TopicSettings
from metadata.errors import ApiError
from metadata.image import PartitionRegistration
from storage.config import LogConfig
from storage.log import Log
from strom_api import compression
from strom_api.record_batch import BatchHeader
from strom_api.records import Record, encode_batch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import produce_consume as pc  # noqa: E402  (bench/ is not a package)

from tests.node_integration.node_cluster import NodeCluster  # noqa: E402

BATCH_BYTES = 64 * 1024
_serial = itertools.count()


def header_only(
    buf: bytes | bytearray,
    pos: int,
    header: BatchHeader,
    index: int,
    settings: TopicSettings,
    now_ms: int,
) -> int:
    """check_batch without the records: the reference."""
    log_validator.check_header(header, index, settings)
    return header.max_timestamp


def batches(value_size: int, codec: int, count: int, now_ms: int) -> list[bytes]:
    """`count` distinct batches of about BATCH_BYTES of records before compression; values
    half random, half repeated text, so zstd has something to do without doing all of it."""
    per_batch = max(1, BATCH_BYTES // (value_size + 20))
    out = []
    for _ in range(count):
        tag = next(_serial)
        records = [
            Record(
                i,
                now_ms + i // 16,
                b"key-%04d" % i,
                (os.urandom(value_size // 2) + f"{tag}:{i}:".encode()).ljust(value_size, b"-"),
            )
            for i in range(per_batch)
        ]
        out.append(encode_batch(records, compression_codec=codec))
    return out


def leader(directory: str, settings: TopicSettings, now_ms: int) -> Partition:
    log = Log.open(directory, settings.log)
    partition = Partition("bench", 0, bytes(16), log, 1, settings)
    partition.apply_registration(
        PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=1, partition_epoch=1),
        now_ms,
        settings,
    )
    return partition


def append_all(partition: Partition, data: list[bytes], now_ms: int) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) to append every batch."""
    start, cpu = time.perf_counter(), time.process_time()
    for batch in data:
        partition.append_as_leader(batch, -1, now_ms)
    return time.perf_counter() - start, time.process_time() - cpu


def measure(root: str, value_size: int, codec: int, count: int, runs: int) -> None:
    now_ms = int(time.time() * 1000)
    settings = TopicSettings(log=LogConfig(retention_ms=-1))
    data = batches(value_size, codec, count, now_ms)
    records = sum(count_records(b) for b in data)
    raw_bytes = sum(len(b) for b in data)
    full = log_validator.check_batch
    times: dict[str, list[tuple[float, float]]] = {"validated": [], "header-only": []}
    for run in range(runs):
        for mode in ("validated", "header-only") if run % 2 == 0 else ("header-only", "validated"):
            directory = os.path.join(root, f"{value_size}-{codec}-{mode}-{run}")
            partition = leader(directory, settings, now_ms)
            log_validator.check_batch = full if mode == "validated" else header_only
            try:
                times[mode].append(append_all(partition, data, now_ms))
            finally:
                log_validator.check_batch = full
                partition.log.close()
                shutil.rmtree(directory)
    wall = {m: statistics.median(t[0] for t in ts) for m, ts in times.items()}
    cpu = {m: statistics.median(t[1] for t in ts) for m, ts in times.items()}
    table_row(
        f"{value_size} B {compression.NAMES[codec]}",
        (raw_bytes / wall["validated"] / 1e6, raw_bytes / wall["header-only"] / 1e6),
        (records / wall["validated"], records / wall["header-only"]),
        (cpu["validated"] / records * 1e6, cpu["header-only"] / records * 1e6),
    )


def count_records(batch: bytes) -> int:
    return int.from_bytes(batch[57:61], "big")


def worst_case(root: str) -> None:
    """The longest one produce can keep a leader busy here: a zstd batch of about a million
    minimal records (within max.message.bytes compressed, within the decompression limit
    decompressed), walked in full; and a bomb (zeros decompressing past the limit), refused."""
    now_ms = int(time.time() * 1000)
    settings = TopicSettings(log=LogConfig(retention_ms=-1))
    limit = log_validator.decompression_limit(settings)
    many = [Record(i, now_ms, None, None) for i in range(1_000_000)]
    zeros = [Record(i, now_ms, None, bytes(1 << 20)) for i in range(limit // (1 << 20) + 1)]
    cases = {
        "1,000,000 minimal records": encode_batch(many, compression_codec=compression.ZSTD),
        "a decompression bomb": encode_batch(zeros, compression_codec=compression.ZSTD),
    }
    for name, batch in cases.items():
        partition = leader(os.path.join(root, f"worst-{len(batch)}"), settings, now_ms)
        start = time.perf_counter()
        try:
            partition.append_as_leader(batch, -1, now_ms)
            answer = "appended"
        except ApiError as exc:
            answer = exc.error_name
        took = time.perf_counter() - start
        partition.log.close()
        print(
            f"worst case, {name}: {len(batch):,} B of zstd -> {answer} in {took * 1000:.0f} ms "
            f"(decompression limit {limit:,} B)"
        )


class HeaderOnlyStrom(pc.Strom):
    """pc.Strom whose nodes run with header-only checks (see header_only_node)."""

    def __init__(self, base: str) -> None:
        me = [sys.executable, os.path.abspath(__file__), "--header-only-node"]
        super().__init__(base, NodeCluster(base, 3, launcher={i: me for i in (1, 2, 3)}))


def header_only_node(argv: list[str]) -> int:
    """Runs `python -m strom_tools server ...` (the rest of argv) with header-only checks."""
    from strom_tools import cli

    log_validator.check_batch = header_only
    return cli.main(argv[argv.index("strom_tools") + 1 :])


def table_head(title: str, third: str) -> None:
    print(f"{'':14} {'validated':>32} {'header-only':>32}")
    columns = f"{'MB/s':>7} {'records/s':>11} {third:>12}"
    print(f"{title:14} {columns} {columns} {'ratio':>6} {'CPU ratio':>9}")


def table_row(
    name: str, mb_s: tuple[float, float], rec_s: tuple[float, float], cpu_us: tuple[float, float]
) -> None:
    print(
        f"{name:14} {mb_s[0]:7.1f} {rec_s[0]:11,.0f} {cpu_us[0]:12.2f} "
        f"{mb_s[1]:7.1f} {rec_s[1]:11,.0f} {cpu_us[1]:12.2f} "
        f"{rec_s[0] / rec_s[1]:6.2f} {cpu_us[1] / cpu_us[0]:9.2f}"
    )


def node_cpu_us_per_record(run: pc.Run) -> float:
    """CPU the three nodes spent per record produced (less sensitive than records/s to
    other work on the machine)."""
    nodes = sum(v for n, v in run.cpu.items() if n.startswith("node")) * run.cpu_seconds
    records = run.bytes / run.batch_bytes * run.records_per_batch
    return nodes / records * 1e6


def cluster_throughput(
    clusters: dict[str, pc.Strom], runner: asyncio.Runner, volume: int, runs: int
) -> None:
    now_ms = int(time.time() * 1000)
    table_head("acks=all", "node CPU us/r")
    for value_size in (100, 1024):
        for codec in (compression.NONE, compression.ZSTD):
            batch = batches(value_size, codec, 1, now_ms)[0]
            topic = f"validation-{value_size}-{compression.NAMES[codec]}"
            leaders = {}
            for name, strom in clusters.items():
                strom.create_topics([topic])
                leaders[name] = {p: b for (_, p), (b, _) in strom.leaders([topic]).items()}
            rates: dict[str, list[pc.Run]] = {name: [] for name in clusters}
            for run in range(runs):
                order = list(clusters) if run % 2 == 0 else list(reversed(clusters))
                for name in order:
                    result = pc.Run(-1, count_records(batch), len(batch))
                    runner.run(
                        pc.produce_run(
                            clusters[name], topic, leaders[name], batch, -1, volume, result
                        )
                    )
                    rates[name].append(result)
            med = {
                name: (
                    statistics.median(r.bytes / r.seconds / 1e6 for r in runs_),
                    statistics.median(r.records_s for r in runs_),
                    statistics.median(node_cpu_us_per_record(r) for r in runs_),
                )
                for name, runs_ in rates.items()
            }
            v, h = med["validated"], med["header-only"]
            table_row(
                f"{value_size} B {compression.NAMES[codec]}",
                (v[0], h[0]),
                (v[1], h[1]),
                (v[2], h[2]),
            )
            for strom in clusters.values():
                strom.delete_topics([topic])


def main() -> None:
    if sys.argv[1:2] == ["--header-only-node"]:
        sys.exit(header_only_node(sys.argv))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches and runs")
    quick = parser.parse_args().quick
    count, runs = (60, 3) if quick else (300, 7)
    volume = (16 if quick else 64) << 20
    root = tempfile.mkdtemp(prefix="strom-bench-", dir=os.environ.get("STROM_BENCH_DIR", "/tmp"))
    print(
        f"{'quick' if quick else 'full'} run in {root}, Python {sys.version.split()[0]}; "
        f"acks=all: {volume >> 20} MiB per run; append path: {count} batches of "
        f"{BATCH_BYTES // 1024} KiB (uncompressed) per run; medians of {runs} runs; load "
        f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    clusters: dict[str, pc.Strom] = {}
    try:
        clusters["validated"] = pc.Strom(os.path.join(root, "validated"))
        clusters["header-only"] = HeaderOnlyStrom(os.path.join(root, "header-only"))
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            cluster_throughput(clusters, runner, volume, runs)
        for strom in clusters.values():
            strom.stop()
        clusters.clear()
        print()
        table_head("append path", "CPU us/r")
        for value_size in (100, 1024):
            for codec in (compression.NONE, compression.ZSTD):
                measure(root, value_size, codec, count, runs)
        print()
        worst_case(root)
    finally:
        for strom in clusters.values():
            strom.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(
        "ratio = validated records/s / header-only records/s; CPU ratio = header-only CPU per "
        "record / validated CPU per record (the throughput ratio when CPU-bound); 1.00: free"
    )
    print(f"load average after {os.getloadavg()[0]:.1f} (other work on the machine adds noise)")


if __name__ == "__main__":
    main()
