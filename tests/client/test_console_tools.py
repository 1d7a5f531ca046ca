"""`strom console-producer` and `strom console-consumer` as a user runs them: lines in,
records out, with keys, Kafka's print properties, groups and one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.client.cluster_helpers import bootstrap, create_topic
from tests.node_integration.node_cluster import ROOT


def strom(*args, stdin=""):
    result = subprocess.run(
        [sys.executable, "-m", "strom.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=90,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_lines_in_records_out(cluster):
    create_topic(cluster, "lines", partitions=1)
    b = ["--bootstrap-server", bootstrap(cluster), "--topic", "lines"]
    sent = strom(
        "console-producer",
        *b,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        "--producer-property",
        "acks=all",
        stdin="k1:hello\nk2:world\nk1:again\n",
    )
    assert sent.returncode == 0, sent.stderr
    read = strom(
        "console-consumer",
        *b,
        "--from-beginning",
        "--max-messages",
        "3",
        "--property",
        "print.key=true",
        "--property",
        "print.offset=true",
        "--property",
        "print.partition=true",
    )
    assert read.returncode == 0
    assert read.stdout.splitlines() == [
        "Partition:0\tOffset:0\tk1\thello",
        "Partition:0\tOffset:1\tk2\tworld",
        "Partition:0\tOffset:2\tk1\tagain",
    ]
    assert read.stderr.strip().endswith("Processed a total of 3 messages")
    plain = strom(
        "console-consumer", *b, "--partition", "0", "--offset", "1", "--max-messages", "2"
    )
    assert plain.stdout.splitlines() == ["world", "again"]


def test_a_group_resumes_where_it_stopped(cluster):
    create_topic(cluster, "resumed", partitions=2)
    b = ["--bootstrap-server", bootstrap(cluster), "--topic", "resumed"]
    assert strom("console-producer", *b, stdin="".join(f"m{i}\n" for i in range(6))).returncode == 0
    first = strom(
        "console-consumer", *b, "--group", "readers", "--from-beginning", "--timeout-ms", "3000"
    )
    assert sorted(first.stdout.split()) == [f"m{i}" for i in range(6)]
    assert strom("console-producer", *b, stdin="m6\nm7\n").returncode == 0
    second = strom("console-consumer", *b, "--group", "readers", "--timeout-ms", "3000")
    assert sorted(second.stdout.split()) == ["m6", "m7"]


def test_errors_are_one_line(cluster):
    b = ["--bootstrap-server", bootstrap(cluster), "--topic", "lines"]
    bad = strom("console-producer", *b, "--producer-property", "acks=7", stdin="x\n")
    assert bad.returncode == 1 and "acks must be" in bad.stderr and bad.stderr.count("\n") == 1
    unknown = strom("console-producer", *b, "--producer-property", "colour=blue", stdin="x\n")
    assert unknown.returncode == 1 and "unknown producer property 'colour'" in unknown.stderr
    nokey = strom("console-producer", *b, "--property", "parse.key=true", stdin="no separator\n")
    assert nokey.returncode == 1 and "No key separator found" in nokey.stderr
