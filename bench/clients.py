"""The client library against the raw RPC: `strom producer-perf-test` and
`strom consumer-perf-test` (each its own process, as a user runs them) against the raw
Produce/Fetch RPC rate of the data-plane benchmark, on the same cluster in the same run.

    python bench/clients.py [--quick]

Three combined `strom server` nodes on loopback, topics of 3 partitions, RF 3,
min.insync.replicas=2.

1. produce, per record size (100 B, 1 KiB), acks (1, all) and compression (none, zstd):
   - client: `strom producer-perf-test --throughput -1` at the producer's default settings
     (Kafka 4's: batch.size 16384, linger.ms 5, idempotent), and again with batch.size=65536;
     its own records/s (from the first send to the end of flush(), as Kafka's tool counts);
   - raw: pre-built batches of the same records (the tool's payload, as many records per batch
     as 65536 bytes hold, compressed once with the same codec) sent as serialized
     ProduceRequests, 4 in flight per partition leader (bench/produce_consume.py's
     produce_run), no per-record work at all: the rate the wire and the brokers allow;
   - raw16: the same with batches of 16384 bytes, 25 in one request and one request in
     flight per leader: the shape the default client sends under load (a partition may have
     25 batches unanswered, as many as its leader remembers of a producer:
     strom_api/idempotence.py), so what the brokers allow at Kafka's default batch.size;
   - NATS JetStream R3 (bench/nats_jetstream.py) when `nats-server` is on the PATH: nats-py's
     async publisher, 1 KiB messages, acknowledged by a file stream of 3 replicas, against
     the default client's 1 KiB acks=all uncompressed row (goal: >= 2x).
2. consume, per record size, from a topic of exactly equal partitions (written raw; CONSUMED
   records, more than produce writes, so that the fetch and not the start-up is timed):
   - client: one `strom consumer-perf-test --group` process, and three of them in one group
     (one partition each), from the group's first assignment to the last record (Kafka's
     fetch.nMsg.sec; three processes: all records over the span from the first assignment
     to the last process's end);
   - raw: three FetchStream sessions (one per leader) reading the topic, 8 MiB per fetch.

Goal (issues 6, 21): the client library at default settings reaches >= 80% of the raw rate.
Benchmarks print, never assert: a missed goal is printed UNMET. The full run takes about 2
minutes; --quick about 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime

import uvloop

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nats_jetstream  # noqa: E402  (bench/ is not a package)
import produce_consume as pc  # noqa: E402

from strom_api import compression  # noqa: E402
from strom_api.idempotence import WINDOW_BATCHES  # noqa: E402
from strom_api.records import Record, encode_batch  # noqa: E402
from strom_tools.perf_commands import record_payload  # noqa: E402

ROOT = pc.ROOT
BATCH_SIZE = 65536
DEFAULT_BATCH_SIZE = 16384  # the producer's (Kafka's) batch.size
DEFAULT_BATCHES_PER_REQUEST = WINDOW_BATCHES  # what the default client packs under load
NATS_GOAL = 2.0
RECORD_OVERHEAD = 24  # what strom.accumulator counts per record on top of its value
BATCH_OVERHEAD = 61
GOAL = 0.8
SIZES = {
    # records per produce run, by record size; consume topics hold the 1-consumer count
    "full": {100: 300_000, 1024: 90_000},
    "quick": {100: 60_000, 1024: 20_000},
}
# Records per consume topic, by record size: enough that the fetch phase, not the consumer's
# start-up, is what the rates compare (20,000 records of 1 KiB are read raw in 0.1 s).
CONSUMED = {
    "full": {100: 1_000_000, 1024: 300_000},
    "quick": {100: 300_000, 1024: 100_000},
}
CODECS = {"none": compression.NONE, "zstd": compression.ZSTD}
PRODUCED = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def payload(size: int) -> bytes:
    """What producer-perf-test sends (strom_tools/perf_commands.py)."""
    return record_payload(size)


def strom_cli(*args: str, timeout: float = 600) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "strom_tools", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"strom {args[0]} failed: {result.stderr.strip()[-500:]}")
    return result.stdout


def client_produce(
    strom: pc.Strom,
    topic: str,
    size: int,
    count: int,
    acks: str,
    codec: str,
    batch_size: int | None = None,
) -> float:
    """producer-perf-test's records/s; `batch_size` None: the producer's defaults."""
    props = [f"bootstrap.servers={','.join(strom.address.values())}", f"acks={acks}"]
    if batch_size is not None:
        props.append(f"batch.size={batch_size}")
    if codec != "none":
        props.append(f"compression.type={codec}")
    out = strom_cli(
        "producer-perf-test",
        "--topic",
        topic,
        "--num-records",
        str(count),
        "--record-size",
        str(size),
        "--throughput",
        "-1",
        "--producer-props",
        *props,
    )
    found = PRODUCED.search(out.strip().splitlines()[-1])
    if found is None:
        raise RuntimeError(f"unexpected producer-perf-test output: {out[-300:]}")
    return float(found.group(2))


def raw_batch(size: int, codec: int, batch_size: int = BATCH_SIZE) -> tuple[bytes, int]:
    records = max((batch_size - BATCH_OVERHEAD) // (size + RECORD_OVERHEAD), 1)
    now = int(time.time() * 1000)
    value = payload(size)
    batch = encode_batch(
        [Record(i, now, None, value) for i in range(records)], compression_codec=codec
    )
    return batch, records


def raw_produce(
    strom: pc.Strom,
    runner: asyncio.Runner,
    topic: str,
    size: int,
    count: int,
    acks: int,
    codec: int,
) -> pc.Run:
    batch, records = raw_batch(size, codec)
    leaders = {p: leader for (_, p), (leader, _) in strom.leaders([topic]).items()}
    run = pc.Run(acks, records, len(batch))
    runner.run(
        pc.produce_run(strom, topic, leaders, batch, acks, count // records * len(batch), run)
    )
    return run


def raw16_produce(
    strom: pc.Strom,
    runner: asyncio.Runner,
    topic: str,
    size: int,
    count: int,
    acks: int,
    codec: int,
) -> float:
    """Records/s of requests of 25 default-sized (16 KiB) batches, one in flight per leader."""
    batch, records = raw_batch(size, codec, DEFAULT_BATCH_SIZE)
    request = batch * DEFAULT_BATCHES_PER_REQUEST
    leaders = {p: leader for (_, p), (leader, _) in strom.leaders([topic]).items()}
    run = pc.Run(acks, records * DEFAULT_BATCHES_PER_REQUEST, len(request))
    in_flight, pc.IN_FLIGHT = pc.IN_FLIGHT, 1
    try:
        volume = count // run.records_per_batch * len(request)
        runner.run(pc.produce_run(strom, topic, leaders, request, acks, volume, run))
    finally:
        pc.IN_FLIGHT = in_flight
    return float(run.records_s)


def consumer_perf_lines(out: str) -> tuple[float, float, int]:
    """(end time, fetch seconds, records) from consumer-perf-test's CSV line."""
    fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
    ended = datetime.strptime(fields[1], "%Y-%m-%d %H:%M:%S:%f").timestamp()
    return ended, int(fields[7]) / 1000, int(fields[4])


def client_consume(strom: pc.Strom, topic: str, total: int, processes: int) -> tuple[float, float]:
    """Records/s of `processes` consumer-perf-test processes in one group, and the CPU
    seconds those processes used from start to exit."""
    group = f"{topic}-{processes}"
    cmd = [
        sys.executable,
        "-m",
        "strom_tools",
        "consumer-perf-test",
        "--bootstrap-server",
        ",".join(strom.address.values()),
        "--topic",
        topic,
        "--messages",
        str(total // processes),
        "--group",
        group,
        "--timeout",
        "20000",
    ]
    env = dict(os.environ, PYTHONPATH=ROOT)
    children = _children_cpu()
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(processes)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"consumer-perf-test failed: {err.decode()[-500:]}")
        results.append(consumer_perf_lines(out.decode()))
    cpu = _children_cpu() - children
    first = min(ended - fetch for ended, fetch, _ in results)
    last = max(ended for ended, _, _ in results)
    return sum(n for _, _, n in results) / max(last - first, 1e-9), cpu


def _children_cpu() -> float:
    """CPU seconds of the child processes that exited and were waited for (the cluster's
    nodes run on until the end: only the perf-test processes count)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ratio_cell(client: float, raw: float) -> str:
    r = client / raw if raw else float("nan")
    return f"{r:.2f}{'' if r >= GOAL else ' UNMET'}"


def produce_table(strom: pc.Strom, runner: asyncio.Runner, counts: dict[int, int]) -> float:
    """Prints the produce rows; returns the default client's 1 KiB acks=all uncompressed
    records/s (for the NATS row)."""
    print(
        "\nproduce (records/s; CPU: share of a core during the default client's run, "
        "'other' includes the client process):"
    )
    print(
        f"{'record':>7} {'acks':>4} {'codec':>5} {'default':>8} {'64K':>8} {'raw':>8} "
        f"{'raw16':>8} {'default/raw':>12} {'default/raw16':>14} {'64K/raw':>8}  CPU"
    )
    default_1k = float("nan")
    for size, count in counts.items():
        for acks_name, acks in (("1", 1), ("all", -1)):
            for codec_name, codec in CODECS.items():
                name = f"{size}-{acks_name}-{codec_name}"
                topics = [f"default-{name}", f"tuned-{name}", f"raw-{name}", f"raw16-{name}"]
                strom.create_topics(topics)
                strom.leaders(topics)
                meter = pc.CpuMeter(strom.pids())
                default = client_produce(strom, topics[0], size, count, acks_name, codec_name)
                shares = meter.shares()
                tuned = client_produce(
                    strom, topics[1], size, count, acks_name, codec_name, BATCH_SIZE
                )
                raw = raw_produce(strom, runner, topics[2], size, count, acks, codec).records_s
                raw16 = raw16_produce(strom, runner, topics[3], size, count, acks, codec)
                if (size, acks, codec) == (1024, -1, compression.NONE):
                    default_1k = default
                nodes = sum(v for n, v in shares.items() if n.startswith("node"))
                print(
                    f"{size:>6}B {acks_name:>4} {codec_name:>5} {default:>8,.0f} {tuned:>8,.0f} "
                    f"{raw:>8,.0f} {raw16:>8,.0f} {ratio_cell(default, raw):>12} "
                    f"{ratio_cell(default, raw16):>14} {ratio_cell(tuned, raw):>8}  nodes "
                    f"{nodes:.0%}, other {shares['other']:.0%}",
                    flush=True,
                )
                strom.delete_topics(topics)
    return default_1k


def nats_row(strom_rate: float, count: int) -> None:
    """The default client's 1 KiB acks=all rate against NATS JetStream R3's publisher."""
    print("\nagainst NATS JetStream R3 (1 KiB, acknowledged by 3 replicas on file storage):")
    why = nats_jetstream.available()
    if why is not None:
        print(f"  skipped: {why}")
        return
    before = os.getloadavg()[0]
    nats, _ = nats_jetstream.measure(count)
    ratio = strom_rate / nats
    print(
        f"  strom producer (defaults, acks=all) {strom_rate:,.0f} records/s, nats-py "
        f"publish_async (window {nats_jetstream.WINDOW}) {nats:,.0f} msgs/s: "
        f"{ratio:.2f}x{'' if ratio >= NATS_GOAL else ' UNMET'} (goal >= {NATS_GOAL:g}x; load "
        f"average {before:.1f} before, {os.getloadavg()[0]:.1f} after)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small volumes, about 90 s")
    args = parser.parse_args()
    mode = "quick" if args.quick else "full"
    counts = SIZES[mode]
    root = tempfile.mkdtemp(prefix="strom-bench-clients-", dir=os.environ.get("STROM_BENCH_DIR"))
    print(
        f"{mode} run in {root}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; 3 "
        f"combined nodes, 3 partitions RF 3 (min.insync.replicas=2); client idempotent at its "
        f"defaults and with batch.size={BATCH_SIZE}; raw: {pc.IN_FLIGHT} requests in flight "
        f"per leader"
    )
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    strom = pc.Strom(os.path.join(root, "cluster"))
    wall = time.perf_counter()
    try:
        default_1k = produce_table(strom, runner, counts)
        print(
            "\nconsume (records/s; topics written raw, equal partitions; the consumers' CPU "
            "seconds, start-up and group join included):"
        )
        print(
            f"{'record':>7} {'consumers':>9} {'client':>9} {'raw':>9} {'client/raw':>11} "
            f"{'CPU s':>6}"
        )
        for size, count in CONSUMED[mode].items():
            topic = f"consume-{size}"
            strom.create_topics([topic])
            run = raw_produce(strom, runner, topic, size, count, -1, compression.NONE)
            total = round(run.bytes / run.batch_bytes) * run.records_per_batch
            leaders = {p: leader for (_, p), (leader, _) in strom.leaders([topic]).items()}
            runner.run(pc.consume_run(strom, topic, leaders, run))
            raw = total / run.consume_seconds
            for processes in (1, 3):
                client, cpu = client_consume(strom, topic, total, processes)
                print(
                    f"{size:>6}B {processes:>9} {client:>9,.0f} {raw:>9,.0f} "
                    f"{ratio_cell(client, raw):>11} {cpu:>6.1f}",
                    flush=True,
                )
            # How loaded the machine was: "other" is everything but the nodes and this process.
            print(f"{'':>9}raw read of {total:,} records: {pc.describe_cpu(run.consume_cpu)}")
            strom.delete_topics([topic])
    finally:
        strom.stop()
        runner.close()
    nats_row(default_1k, counts[1024])
    print(f"\ngoal: client >= {GOAL:.0%} of raw; whole run {time.perf_counter() - wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
