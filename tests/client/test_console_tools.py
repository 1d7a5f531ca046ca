"""`strom console-producer` and `strom console-consumer` as a user runs them: lines in,
records out, with keys, Kafka's print properties, groups and one-line errors."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from strom.fetcher import ConsumerRecord
from strom.group_admin import GroupAdmin
from strom_tools.console_commands import _formatter
from tests.client.cluster_helpers import bootstrap, create_topic, reader
from tests.node_integration.node_cluster import ROOT


def strom(*args, stdin=""):
    result = subprocess.run(
        [sys.executable, "-m", "strom_tools", *args],
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
    piped = strom(
        "console-consumer",
        *b,
        "--partition",
        "0",
        "--offset",
        "1",
        "--max-messages",
        "2",
        "--property",
        "line.separator=|",
    )
    assert piped.stdout == "world|again|"


def test_headers_read_from_lines_are_printed_back(cluster):
    create_topic(cluster, "headed", partitions=1)
    b = ["--bootstrap-server", bootstrap(cluster), "--topic", "headed"]
    sent = strom(
        "console-producer",
        *b,
        "--property",
        "parse.headers=true",
        "--property",
        "parse.key=true",
        stdin="trace:abc,tenant:7\tk1\thello\n",
    )
    assert sent.returncode == 0, sent.stderr
    read = strom(
        "console-consumer",
        *b,
        "--from-beginning",
        "--max-messages",
        "1",
        "--property",
        "print.headers=true",
        "--property",
        "print.key=true",
    )
    assert read.stdout.splitlines() == ["trace:abc,tenant:7\tk1\thello"]


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


def test_consumer_properties_are_applied_and_checked_against_the_options(cluster, tmp_path):
    create_topic(cluster, "propped", partitions=1)
    b = ["--bootstrap-server", bootstrap(cluster), "--topic", "propped"]
    assert strom("console-producer", *b, stdin="p0\np1\np2\n").returncode == 0
    prop = "--consumer-property"
    with GroupAdmin(bootstrap(cluster)) as groups:
        # auto.offset.reset=earliest without --from-beginning, group.id without --group.
        read = strom(
            "console-consumer", *b, prop, "auto.offset.reset=earliest", prop,
            "group.id=propped-readers", "--timeout-ms", "3000",
        )  # fmt: skip
        assert read.stdout.split() == ["p0", "p1", "p2"], read.stderr
        assert list(groups.committed_offsets("propped-readers").values()) == [3]
        unsaved = strom(
            "console-consumer", *b, "--group", "propped-peekers", "--from-beginning", prop,
            "enable.auto.commit=false", "--timeout-ms", "3000",
        )  # fmt: skip
        assert unsaved.stdout.split() == ["p0", "p1", "p2"], unsaved.stderr
        assert groups.committed_offsets("propped-peekers") == {}
        # --consumer.config: a file of them; a key no consumer has is warned about.
        config = tmp_path / "consumer.properties"
        config.write_text("auto.offset.reset=earliest\ngroup.id=propped-filed\ncolour=blue\n")
        filed = strom(
            "console-consumer", *b, "--consumer.config", str(config), "--timeout-ms", "3000"
        )
        assert filed.stdout.split() == ["p0", "p1", "p2"], filed.stderr
        assert "The configuration 'colour' was supplied but isn't a known config." in filed.stderr
        assert list(groups.committed_offsets("propped-filed").values()) == [3]
    filed_group = strom("console-consumer", *b, "--group", "a", "--consumer.config", str(config))
    assert filed_group.returncode == 2
    assert "Detected group ids: 'a', 'propped-filed'" in filed_group.stderr
    # What Kafka's ConsoleConsumerOptions refuses, in its words (usage errors, exit 2).
    two_groups = strom("console-consumer", *b, "--group", "a", prop, "group.id=b")
    assert two_groups.returncode == 2
    assert "Detected group ids: 'a', 'b'" in two_groups.stderr
    both = strom("console-consumer", *b, "--from-beginning", prop, "auto.offset.reset=latest")
    assert both.returncode == 2
    assert "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest'" in (
        both.stderr
    )
    bad = strom("console-consumer", *b, prop, "max.poll.records=many")
    assert bad.returncode == 1
    assert "Invalid value many for configuration max.poll.records" in bad.stderr


def test_errors_are_one_line(cluster):
    b = ["--bootstrap-server", bootstrap(cluster), "--topic", "lines"]
    bad = strom("console-producer", *b, "--producer-property", "acks=7", stdin="x\n")
    assert bad.returncode == 1 and "acks must be" in bad.stderr and bad.stderr.count("\n") == 1
    unknown = strom("console-producer", *b, "--producer-property", "colour=blue", stdin="x\n")
    assert unknown.returncode == 1 and "unknown producer property 'colour'" in unknown.stderr
    nokey = strom("console-producer", *b, "--property", "parse.key=true", stdin="no separator\n")
    assert nokey.returncode == 1 and "No key separator found" in nokey.stderr


def started(*args):
    """A console tool left running, stdin open (as a user at a terminal)."""
    return subprocess.Popen(
        [sys.executable, "-m", "strom_tools", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )


def dead_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_timeout_ms_holds_for_a_mistyped_topic(cluster):
    began = time.monotonic()
    read = strom(
        "console-consumer", "--bootstrap-server", bootstrap(cluster), "--topic", "nope",
        "--timeout-ms", "1500",
    )  # fmt: skip
    assert time.monotonic() - began < 15  # not the 30 s request timeout
    assert read.returncode == 0, read.stderr
    assert read.stderr.strip().endswith("Processed a total of 0 messages")
    assert (
        read.stderr.count("Error while fetching metadata: {nope=UNKNOWN_TOPIC_OR_PARTITION}") == 1
    )


def test_offset_and_partition_options_are_checked(cluster):
    create_topic(cluster, "twelve", partitions=12)
    b = ["--bootstrap-server", bootstrap(cluster), "--topic", "twelve"]
    no_partition = strom("console-consumer", *b, "--offset", "5")
    assert no_partition.returncode == 2
    assert "The partition is required when offset is specified." in no_partition.stderr
    both = strom("console-consumer", *b, "--partition", "0", "--offset", "5", "--from-beginning")
    assert both.returncode == 2
    assert "Options from-beginning and offset cannot be specified together." in both.stderr
    bad_offset = strom("console-consumer", *b, "--partition", "0", "--offset", "soon")
    assert bad_offset.returncode == 2 and "The provided offset value 'soon' is incorrect" in (
        bad_offset.stderr
    )
    beyond = strom("console-consumer", *b, "--partition", "44", "--timeout-ms", "1000")
    assert beyond.returncode == 1
    assert beyond.stderr.strip() == (
        "Error while executing console-consumer command : UNKNOWN_TOPIC_OR_PARTITION: "
        "partition 44 of topic 'twelve' does not exist (12 partitions)"
    )


def test_a_cluster_that_is_down_is_said_once_per_cause():
    address = dead_address()
    warning = f"Connection to node -1 ({address}) could not be established."
    read = strom(
        "console-consumer", "--bootstrap-server", address, "--topic", "t", "--timeout-ms", "2000"
    )
    assert read.returncode == 0 and read.stderr.count(warning) == 1, read.stderr
    assert read.stderr.strip().endswith("Processed a total of 0 messages")
    sent = strom(
        "console-producer", "--bootstrap-server", address, "--topic", "t",
        "--producer-property", "max.block.ms=2000", stdin="x\n",
    )  # fmt: skip
    assert sent.returncode == 1 and sent.stderr.count(warning) == 1, sent.stderr
    assert "Topic t not present in metadata after 2000 ms: no broker reachable" in sent.stderr
    assert "UNKNOWN_TOPIC_OR_PARTITION" not in sent.stderr


def test_sigterm_leaves_the_group_as_ctrl_c_does(cluster):
    create_topic(cluster, "terminated", partitions=2)
    servers = bootstrap(cluster)
    tool = started(
        "console-consumer", "--bootstrap-server", servers, "--topic", "terminated",
        "--group", "terminated-readers",
    )  # fmt: skip
    try:
        with GroupAdmin(servers) as admin:
            deadline = time.monotonic() + 30
            while admin.describe_group("terminated-readers").state != "Stable":
                assert time.monotonic() < deadline, "the console consumer never joined"
                time.sleep(0.2)
            tool.send_signal(signal.SIGTERM)
            _, err = tool.communicate(timeout=20)
            assert tool.returncode == 0, err
            assert "Traceback" not in err and err.strip().endswith(
                "Processed a total of 0 messages"
            )
            # Left at once: no member holds the group until its session times out (45 s).
            group = admin.describe_group("terminated-readers")
            assert group.state == "Empty" and not group.members, group
    finally:
        tool.kill()
        tool.wait()


def test_ctrl_c_on_an_idle_producer_exits_without_a_traceback(cluster):
    create_topic(cluster, "interrupted", partitions=1)
    tool = started(
        "console-producer", "--bootstrap-server", bootstrap(cluster), "--topic", "interrupted"
    )
    try:
        tool.stdin.write("first\n")
        tool.stdin.flush()
        client = reader(cluster)
        deadline = time.monotonic() + 30
        while not client.read_all("interrupted", 0):  # sent: it now waits on stdin
            assert time.monotonic() < deadline, "the line was never sent"
            time.sleep(0.2)
        tool.send_signal(signal.SIGINT)
        _, err = tool.communicate(timeout=20)
        assert tool.returncode == 0, err
        assert err == ""
    finally:
        tool.kill()
        tool.wait()


def test_records_print_as_kafkas_default_message_formatter_prints_them():
    # key.separator goes between every two columns, not only key and value; a null header
    # value is null.literal ("null"), as in Kafka's DefaultMessageFormatter.
    record = ConsumerRecord("t", 0, 7, 1000, 0, b"k", b"v", [("a", b"1"), ("b", None)])
    everything = {
        "print.timestamp": "true",
        "print.offset": "true",
        "print.headers": "true",
        "print.key": "true",
    }
    assert _formatter({**everything, "key.separator": ","})(record) == (
        "CreateTime:1000,Offset:7,a:1,b:null,k,v"
    )
    assert _formatter(everything)(record) == "CreateTime:1000\tOffset:7\ta:1,b:null\tk\tv"
    custom = {"print.headers": "true", "headers.separator": "|", "null.literal": "-"}
    assert _formatter(custom)(record._replace(value=None)) == "a:1|b:-\t-"
