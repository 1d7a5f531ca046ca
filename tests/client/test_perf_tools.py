"""`strom producer-perf-test` and `consumer-perf-test` print Kafka's summaries."""

from __future__ import annotations

import re
import zlib

from strom_tools.perf_commands import record_payload
from tests.client.cluster_helpers import bootstrap, create_topic
from tests.client.test_console_tools import strom


def test_produce_then_consume_the_same_records(cluster):
    create_topic(cluster, "load", partitions=3)
    produced = strom(
        "producer-perf-test",
        "--topic",
        "load",
        "--num-records",
        "5000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={bootstrap(cluster)}",
        "acks=all",
        "linger.ms=5",
    )
    assert produced.returncode == 0, produced.stderr
    final = produced.stdout.splitlines()[-1]
    assert re.match(
        r"^5000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$",
        final,
    ), final
    consumed = strom(
        "consumer-perf-test",
        "--bootstrap-server",
        bootstrap(cluster),
        "--topic",
        "load",
        "--messages",
        "5000",
    )
    assert consumed.returncode == 0, consumed.stderr
    header, values = consumed.stdout.splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB")
    fields = [v.strip() for v in values.split(",")]
    assert fields[4] == "5000" and abs(float(fields[2]) - 5000 * 100 / 2**20) < 1e-3


def test_bad_options_are_one_line(cluster):
    missing = strom(
        "producer-perf-test",
        "--topic",
        "t",
        "--num-records",
        "1",
        "--record-size",
        "1",
        "--throughput",
        "-1",
    )
    assert missing.returncode == 1 and "bootstrap.servers" in missing.stderr


def test_detailed_stats_are_progress_lines_instead_of_the_summary(cluster):
    create_topic(cluster, "detailed", partitions=1)
    produced = strom(
        "producer-perf-test", "--topic", "detailed", "--num-records", "3000", "--record-size",
        "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap(cluster)}",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = strom(
        "consumer-perf-test", "--bootstrap-server", bootstrap(cluster), "--topic", "detailed",
        "--messages", "3000", "--show-detailed-stats", "--reporting-interval", "1",
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    header, *rows = consumed.stdout.splitlines()
    assert header == (
        "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    assert rows and all(len(row.split(", ")) == 10 for row in rows), rows
    counts = [int(row.split(", ")[4]) for row in rows]
    assert counts == sorted(counts) and counts[-1] <= 3000  # totals so far, growing
    assert not any(row.startswith("start.time") for row in rows)  # no summary line


def test_the_perf_records_carry_kafkas_payload_of_random_letters():
    # Kafka's ProducerPerformance: random A-Z from a generator seeded with 0, the same for
    # every record. A repeating pattern compressed to 4% and flattered compressed runs.
    payload = record_payload(1024)
    assert payload == record_payload(1024) and set(payload) <= set(range(65, 91))
    assert len(zlib.compress(payload)) > 600
