"""`strom producer-perf-test` and `strom consumer-perf-test`, after Kafka's
kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh, with their options and output.

    strom producer-perf-test --topic T --num-records N --record-size S --throughput -1
        --producer-props bootstrap.servers=H:P acks=all [linger.ms=5 batch.size=65536 ...]
    strom consumer-perf-test --bootstrap-server H:P --topic T --messages N [--group G]
"""

from __future__ import annotations

import argparse
import operator
import random
import sys
import time
from datetime import datetime
from typing import Any

from strom import client_properties
from strom.consumer import Consumer
from strom.errors import StromError
from strom.producer import FutureRecordMetadata, Producer
from strom_api.error_codes import ErrorCode
from strom_tools import command_config

REPORT_INTERVAL_S = 5.0


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    producer = commands.add_parser(
        "producer-perf-test", help="produce load, print throughput and latency"
    )
    producer.add_argument("--topic", required=True, help="the topic to produce to")
    producer.add_argument("--num-records", type=int, required=True, help="how many records to send")
    producer.add_argument(
        "--record-size", type=int, required=True, help="the size of each record's value, bytes"
    )
    producer.add_argument(
        "--throughput",
        type=float,
        required=True,
        help="records/s to aim for; -1 for as fast as possible",
    )
    producer.add_argument(
        "--producer-props",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="bootstrap.servers=... and producer configs (acks, linger.ms, ...)",
    )
    producer.add_argument(
        "--bootstrap-server", help="instead of bootstrap.servers in --producer-props"
    )
    command_config.add_option(producer)
    producer.set_defaults(handler=producer_perf)

    consumer = commands.add_parser("consumer-perf-test", help="consume load, print throughput")
    command_config.add_connection_options(consumer)
    consumer.add_argument("--topic", required=True, help="the topic to consume from")
    consumer.add_argument("--messages", type=int, required=True, help="how many records to consume")
    consumer.add_argument("--group", help="a consumer group (default: none, every partition)")
    consumer.add_argument(
        "--timeout", type=int, default=10_000, help="ms without records before giving up"
    )
    consumer.add_argument(
        "--show-detailed-stats",
        action="store_true",
        help="a progress line every --reporting-interval instead of one summary at the end",
    )
    consumer.add_argument(
        "--reporting-interval",
        type=int,
        default=5000,
        metavar="MS",
        help="with --show-detailed-stats: ms between progress lines (default 5000)",
    )
    consumer.set_defaults(handler=consumer_perf)


class _Stats:
    """Kafka's ProducerPerformance.Stats: latencies of every record, windowed reports."""

    def __init__(self, record_size: int) -> None:
        self.record_size = record_size
        self.start = time.monotonic()
        self.latencies: list[float] = []
        self.window_start = self.start
        self.window: list[float] = []
        self.errors: list[BaseException] = []

    def completed(self, future: FutureRecordMetadata) -> None:
        """Every record's callback, on the producer's I/O thread. One bound method serves
        every record, and the latency is measured from the record's own timestamp (in ms,
        as Kafka's tool measures): a closure per record kept five objects alive until its
        answer, and the garbage collector's full passes over them cost about half the
        tool's own CPU per record (docs/architecture.md §9)."""
        error = future.exception()
        if error is not None:
            self.errors.append(error)
        else:
            self.record(time.time() * 1000 - future.timestamp_ms)

    def record(self, latency_ms: float) -> None:
        self.latencies.append(latency_ms)
        self.window.append(latency_ms)

    def maybe_report(self) -> None:
        now = time.monotonic()
        if now - self.window_start >= REPORT_INTERVAL_S and self.window:
            print(self._line(self.window, now - self.window_start) + ".", flush=True)
            self.window_start, self.window = now, []

    def _line(self, latencies: list[float], seconds: float) -> str:
        n = len(latencies)
        rate = n / seconds if seconds > 0 else 0.0
        mb = rate * self.record_size / (1024 * 1024)
        return (
            f"{n} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
            f"{sum(latencies) / max(n, 1):.1f} ms avg latency, "
            f"{max(latencies, default=0):.1f} ms max latency"
        )

    def final(self) -> str:
        elapsed = time.monotonic() - self.start
        ordered = sorted(self.latencies)

        def pct(p: float) -> int:
            return int(ordered[min(int(p * len(ordered)), len(ordered) - 1)]) if ordered else 0

        return (
            f"{self._line(self.latencies, elapsed)}, {pct(0.5)} ms 50th, {pct(0.95)} ms 95th, "
            f"{pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th."
        )


def producer_perf(args: argparse.Namespace) -> int:
    try:
        props: dict[str, str] = {}
        for item in args.producer_props:
            key, sep, value = item.partition("=")
            if not sep:
                raise StromError(
                    ErrorCode.INVALID_CONFIG, f"producer property '{item}' is not KEY=VALUE"
                )
            props[key] = value
        servers = props.pop("bootstrap.servers", None) or args.bootstrap_server
        if not servers:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "give bootstrap.servers in --producer-props (or --bootstrap-server)",
            )
        config = client_properties.producer_settings(props)
        if args.num_records < 1 or args.record_size < 1:
            raise StromError(
                ErrorCode.INVALID_CONFIG, "--num-records and --record-size must be positive"
            )
        payload = record_payload(args.record_size)
        stats = _Stats(args.record_size)
        interval = 1.0 / args.throughput if args.throughput > 0 else 0.0
        config.update(client_properties.client_settings(args.command_config))
        completed = stats.completed
        with Producer(servers, **config) as producer:
            start = time.monotonic()
            for i in range(args.num_records):
                producer.send(args.topic, payload).add_done_callback(completed)
                if interval:
                    ahead = start + (i + 1) * interval - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
                if i % 1000 == 0:
                    stats.maybe_report()
            producer.flush()
        if stats.errors:
            first = stats.errors[0]
            raise (
                first
                if isinstance(first, StromError)
                else StromError(ErrorCode.UNKNOWN_SERVER_ERROR, str(first))
            )
        print(stats.final(), flush=True)
        return 0
    except StromError as exc:
        print(
            f"Error while executing producer-perf-test command : {exc.name}: {exc.message}",
            file=sys.stderr,
        )
        return 1


def record_payload(size: int) -> bytes:
    """What every record carries: random upper-case letters drawn once from a generator seeded
    with 0, as Kafka's ProducerPerformance fills its payload (every record the same, as
    there). The repeating A-Z pattern used before made one 1 KiB record 44 bytes under zstd
    where Kafka's payload takes 645."""
    draw = random.Random(0)
    return bytes(draw.randrange(65, 91) for _ in range(size))


_KEY, _VALUE = operator.attrgetter("key"), operator.attrgetter("value")


def consumer_perf(args: argparse.Namespace) -> int:
    try:
        started = time.time()
        consumer = Consumer(
            bootstrap_servers=args.bootstrap_server,
            group_id=args.group,
            auto_offset_reset="earliest",
            max_poll_records=5000,
            enable_auto_commit=args.group is not None,
            **client_properties.client_settings(args.command_config),
        )
        if args.reporting_interval < 1:
            raise StromError(ErrorCode.INVALID_CONFIG, "--reporting-interval must be positive")
        progress = _Progress(started, args.reporting_interval) if args.show_detailed_stats else None
        with consumer:
            joined = _JoinTime()
            consumer.subscribe([args.topic], listener=joined)
            count = size = 0
            last_data = time.monotonic()
            while count < args.messages:
                batches = consumer.poll(timeout_ms=200)
                for records in batches.values():
                    # Counted in C (map, filter, sum): a Python loop per record here would
                    # weigh on the rate this tool measures as much as the client does.
                    count += len(records)
                    size += sum(map(len, filter(None, map(_VALUE, records))))
                    size += sum(map(len, filter(None, map(_KEY, records))))
                if progress is not None:
                    progress.maybe_report(count, size, joined.at)
                if batches:
                    last_data = time.monotonic()
                elif (time.monotonic() - last_data) * 1000 > args.timeout:
                    print(
                        f"WARNING: Exiting before consuming the expected number of messages: "
                        f"timeout ({args.timeout} ms) exceeded.",
                        file=sys.stderr,
                    )
                    break
            ended = time.time()
        if progress is not None:
            return 0  # Kafka's tool prints no summary line with --show-detailed-stats
        mb = size / (1024 * 1024)
        total = max(ended - started, 1e-9)
        # As Kafka's tool: the fetch time starts when the group first assigned partitions.
        joined_at = joined.at if joined.at is not None else started
        fetch = max(ended - joined_at, 1e-9)
        print(
            "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
            "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
        )
        print(
            f"{_stamp(started)}, {_stamp(ended)}, {mb:.4f}, {mb / total:.4f}, {count}, "
            f"{count / total:.4f}, {int((joined_at - started) * 1000)}, {int(fetch * 1000)}, "
            f"{mb / fetch:.4f}, {count / fetch:.4f}"
        )
        return 0
    except StromError as exc:
        print(
            f"Error while executing consumer-perf-test command : {exc.name}: {exc.message}",
            file=sys.stderr,
        )
        return 1


class _Progress:
    """Kafka's ConsumerPerformance --show-detailed-stats: a header, then every reporting
    interval the totals so far and the interval's rates (thread id 0: one consumer)."""

    def __init__(self, started: float, interval_ms: int) -> None:
        self.interval_s = interval_ms / 1000
        self.last = started
        self.last_count = self.last_size = 0
        self.joined_seen = False
        print(
            "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
            "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec",
            flush=True,
        )

    def maybe_report(self, count: int, size: int, joined_at: float | None) -> None:
        now = time.time()
        elapsed = now - self.last
        if elapsed < self.interval_s:
            return
        # The time spent joining the group in this interval is not fetch time.
        join_s = 0.0
        if joined_at is not None and not self.joined_seen:
            join_s, self.joined_seen = max(joined_at - self.last, 0.0), True
        fetch_s = max(elapsed - join_s, 1e-9)
        mb, interval_mb = size / 2**20, (size - self.last_size) / 2**20
        interval_n = count - self.last_count
        print(
            f"{_stamp(now)}, 0, {mb:.4f}, {interval_mb / elapsed:.4f}, {count}, "
            f"{interval_n / elapsed:.4f}, {int(join_s * 1000)}, {int(fetch_s * 1000)}, "
            f"{interval_mb / fetch_s:.4f}, {interval_n / fetch_s:.4f}",
            flush=True,
        )
        self.last, self.last_count, self.last_size = now, count, size


class _JoinTime:
    """A rebalance listener noting when partitions were first assigned (Kafka's tool marks
    its join time the same way, so rebalance.time.ms is not counted as fetch time)."""

    def __init__(self) -> None:
        self.at: float | None = None

    def on_partitions_revoked(self, partitions: list[Any]) -> None:
        pass

    def on_partitions_assigned(self, partitions: list[Any]) -> None:
        if self.at is None:
            self.at = time.time()


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S:%f")[:-3]
