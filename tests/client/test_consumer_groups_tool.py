"""`strom consumer-groups` against a real cluster: list, describe with lag (active and
inactive), state and members, every reset strategy with --dry-run and --execute, delete
and --delete-offsets, with kafka-consumer-groups.sh's output and one-line errors."""

from __future__ import annotations

import concurrent.futures
import time

import grpc

from strom.admin import AdminClient
from strom.consumer import Consumer, TopicPartition
from strom.errors import StromError
from strom.producer import Producer
from strom_api.error_codes import ErrorCode
from strom_api.v1 import client_pb2, client_pb2_grpc
from tests.client.cluster_helpers import FAST, bootstrap, create_topic
from tests.tools.tool_runs import fails, ok, run, strom


def rows(lines):
    """The table's rows after its header, split on whitespace."""
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP"))
    return [line.split() for line in lines[start + 1 :] if line.strip()]


def test_list_describe_reset_and_delete(cluster):
    create_topic(cluster, "audited", partitions=3)
    base = int(time.time() * 1000) - 60_000
    with Producer(bootstrap(cluster)) as producer:
        for i in range(30):
            producer.send("audited", b"%d" % i, partition=i % 3, timestamp_ms=base + i * 1000)
    b = ["consumer-groups", "--bootstrap-server", bootstrap(cluster)]
    consumer = Consumer(
        "audited",
        bootstrap_servers=bootstrap(cluster),
        group_id="auditors",
        client_id="auditor-1",
        **FAST,
    )
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 30 and time.monotonic() < deadline:
        seen += sum(len(r) for r in consumer.poll(timeout_ms=200).values())
    consumer.commit()
    try:
        assert "auditors" in ok(*b, "--list")
        assert ok(*b, "--list", "--state")[0].split() == ["GROUP", "STATE"]
        table = rows(ok(*b, "--describe", "--group", "auditors"))
        assert [r[:6] for r in table] == [
            ["auditors", "audited", str(p), "10", "10", "0"] for p in range(3)
        ]
        assert all(r[6].startswith("auditor-1") and r[8] == "auditor-1" for r in table)
        state = rows(ok(*b, "--describe", "--group", "auditors", "--state"))
        assert state[0][-2:] == ["Stable", "1"] and "range" in state[0]
        # COORDINATOR (ID): the coordinator's host:port, as Kafka's Node prints it.
        coordinator_id = int(state[0][2].strip("()"))
        assert state[0][1] == f"127.0.0.1:{cluster.broker_port[coordinator_id]}"
        members = rows(ok(*b, "--describe", "--group", "auditors", "--members", "--verbose"))
        assert members[0][-2:] == ["3", "audited(0,1,2)"]
        error = fails(
            *b,
            "--reset-offsets",
            "--group",
            "auditors",
            "--topic",
            "audited",
            "--to-earliest",
            "--execute",
        )
        assert "can only be reset if the group 'auditors' is inactive" in error
    finally:
        consumer.close()

    lines = ok(*b, "--describe", "--group", "auditors")
    assert "Consumer group 'auditors' has no active members." in lines
    assert all(r[6:] == ["-", "-", "-"] for r in rows(lines))

    reset = [*b, "--reset-offsets", "--group", "auditors"]
    dry = rows(ok(*reset, "--topic", "audited", "--to-earliest", "--dry-run"))
    assert dry == [["auditors", "audited", str(p), "0"] for p in range(3)]
    assert rows(ok(*b, "--describe", "--group", "auditors"))[0][3] == "10"  # unchanged
    assert rows(ok(*reset, "--topic", "audited:1", "--to-offset", "4", "--execute")) == [
        ["auditors", "audited", "1", "4"]
    ]
    assert rows(ok(*reset, "--topic", "audited:1", "--shift-by", "-3", "--execute"))[0][3] == "1"
    clamped = strom(*reset, "--topic", "audited:2", "--to-offset", "99", "--execute")
    assert clamped.returncode == 0 and rows(clamped.stdout.splitlines())[0][3] == "10"
    assert clamped.stderr.strip() == (
        "WARN New offset (99) is higher than latest offset for topic partition audited-2. "
        "Value will be set to 10"
    )
    # Partition 0 has records at base, base+3 s, ...: the first at base+7.5 s or later is 3.
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime((base + 7500) / 1000))
    when += f".{(base + 7500) % 1000:03d}"
    assert rows(ok(*reset, "--topic", "audited:0", "--to-datetime", when, "--execute"))[0][3] == "3"
    assert (
        rows(ok(*reset, "--topic", "audited:0", "--by-duration", "PT1S", "--dry-run"))[0][3] == "10"
    )
    with Consumer(bootstrap_servers=bootstrap(cluster), group_id="auditors", **FAST) as check:
        assert check.committed(TopicPartition("audited", 1)) == 1
        assert check.committed(TopicPartition("audited", 0)) == 3
    warned = strom(*reset, "--topic", "audited", "--to-latest")
    assert warned.returncode == 0 and "--execute option is missing" in warned.stderr

    # An option the action would not use is refused, as Kafka's tool refuses it: a --delete
    # naming a --topic once deleted the whole group.
    assert "topic-specific offset deletion" in fails(
        *b, "--delete", "--group", "auditors", "--topic", "audited"
    )
    assert "can't be used with option --all-groups" in fails(
        *b, "--delete", "--group", "auditors", "--all-groups"
    )
    assert "auditors" in ok(*b, "--list")
    assert ok(*b, "--delete", "--group", "auditors") == [
        "Deletion of requested consumer groups ('auditors') was successful."
    ]
    assert "auditors" not in ok(*b, "--list")


def test_usage_errors_are_one_line(cluster):
    b = ["consumer-groups", "--bootstrap-server", bootstrap(cluster)]
    assert "--group or --all-groups" in fails(*b, "--describe")
    assert "One of the reset scopes" in fails(*b, "--reset-offsets", "--group", "x", "--topic", "t")
    assert "PnDTnHnMnS" in fails(
        *b, "--reset-offsets", "--group", "nobody", "--topic", "nothing", "--by-duration", "10m"
    )
    result = strom("consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--list")
    warning, error = result.stderr.splitlines()  # the cause while it waits, then the error
    assert result.returncode == 1 and error.startswith("Error while executing")
    assert "Connection to node -1 (127.0.0.1:1) could not be established." in warning


class _SilentBroker(client_pb2_grpc.ClientServiceServicer):
    """Takes every Metadata request and answers none while its caller waits."""

    def Metadata(self, request, context):  # noqa: N802
        while context.is_active():
            time.sleep(0.05)
        return client_pb2.MetadataResponse()


def test_timeout_bounds_the_wait_for_a_broker_that_never_answers():
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(4))
    client_pb2_grpc.add_ClientServiceServicer_to_server(_SilentBroker(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        began = time.monotonic()
        result = strom(
            "consumer-groups", "--bootstrap-server", f"127.0.0.1:{port}", "--list",
            "--timeout", "1000",
        )  # fmt: skip
        waited = time.monotonic() - began
    finally:
        server.stop(0)
    assert result.returncode == 1 and "DEADLINE_EXCEEDED" in result.stderr, result.stderr
    assert waited < 20, waited  # not the 30 s default


def test_options_an_action_would_not_use_are_refused_before_it_runs(capsys):
    b = ["consumer-groups", "--bootstrap-server", "127.0.0.1:1"]  # never reached

    def fails(*args):  # in this process: each refusal comes before any connection
        code, out, err = run(capsys, *args)
        assert code == 1 and out == "" and err.count("\n") == 1, (args, out, err)
        return err.strip()

    for args, said in (
        (["--describe", "--group", "g", "--members", "--state"], "at most one of"),
        (["--describe", "--group", "g", "--offsets", "--members"], "at most one of"),
        (["--list", "--group", "g"], "--group can't be used with option --list"),
        (["--describe", "--group", "g", "--topic", "t"], "can't be used with option --describe"),
        (["--list", "--topic", "t"], "--topic can't be used with option --list"),
        (["--delete-offsets", "--group", "g"], "--delete-offsets takes the following options"),
        (["--delete-offsets", "--topic", "t"], "--delete-offsets takes the following options"),
        (
            ["--delete-offsets", "--group", "g", "--group", "h", "--topic", "t"],
            "--delete-offsets takes the following options",
        ),
        (
            ["--delete-offsets", "--all-groups", "--topic", "t"],
            "--delete-offsets takes the following options",
        ),
        (
            ["--delete-offsets", "--group", "g", "--topic", "t", "--all-topics"],
            "--all-topics can't be used with option --delete-offsets",
        ),
        (["--describe", "--group", "g", "--export"], "--export can't be used with option"),
        (
            ["--reset-offsets", "--group", "g", "--from-file", "plan.csv", "--topic", "t"],
            "--from-file can't be used with option --topic",
        ),
        (
            ["--reset-offsets", "--group", "g", "--to-earliest"],
            "--reset-offsets takes one of these options: --topic, --all-topics",
        ),
    ):
        assert said in fails(*b, *args), args


def test_resets_of_partitions_without_a_committed_offset_are_kafkas(cluster):
    """--to-current takes the log end where the group committed nothing, --shift-by is
    refused there, and --all-topics takes only the partitions the group committed."""
    create_topic(cluster, "half-read", partitions=2)
    with Producer(bootstrap(cluster)) as producer:
        for i in range(6):
            producer.send("half-read", b"%d" % i, partition=i % 2)
    b = ["consumer-groups", "--bootstrap-server", bootstrap(cluster)]
    reset = [*b, "--reset-offsets", "--group", "half"]
    created = strom(*reset, "--topic", "half-read:0", "--to-offset", "1", "--execute")
    assert created.returncode == 0 and "it is created with these offsets" in created.stderr
    assert rows(ok(*reset, "--topic", "half-read", "--to-current", "--dry-run")) == [
        ["half", "half-read", "0", "1"],
        ["half", "half-read", "1", "3"],
    ]
    error = fails(*reset, "--topic", "half-read", "--shift-by", "1", "--dry-run")
    assert "Cannot shift offset for partition half-read-1" in error
    assert rows(ok(*reset, "--all-topics", "--to-earliest", "--dry-run")) == [
        ["half", "half-read", "0", "0"]
    ]


def test_a_missing_group_is_an_error_to_describe_and_a_said_creation_to_reset(cluster):
    create_topic(cluster, "seeded", partitions=2)
    b = ["consumer-groups", "--bootstrap-server", bootstrap(cluster)]
    described = strom(*b, "--describe", "--group", "nope")
    assert described.returncode == 1
    assert described.stderr.strip() == "Error: Consumer group 'nope' does not exist."
    for extra in ([], ["--members"], ["--state"]):
        assert strom(*b, "--describe", "--group", "nope", *extra).returncode == 1

    # Kafka 4 lets --reset-offsets pre-seed a group that does not exist; Strom too, saying so.
    reset = [*b, "--reset-offsets", "--group", "seeded-readers", "--topic", "seeded"]
    dry = strom(*reset, "--to-earliest", "--dry-run")
    assert dry.returncode == 0
    assert "Consumer group 'seeded-readers' does not exist: --execute would create it" in dry.stderr
    assert "seeded-readers" not in ok(*b, "--list")
    done = strom(*reset, "--to-earliest", "--execute")
    assert done.returncode == 0
    assert "Consumer group 'seeded-readers' does not exist: it is created" in done.stderr
    assert "seeded-readers" in ok(*b, "--list")
    again = strom(*reset, "--to-latest", "--execute")  # it exists now: nothing to say
    assert again.returncode == 0 and "does not exist" not in again.stderr


def test_the_offsets_of_a_deleted_topic_show_no_log_end(cluster):
    # Committed offsets outlive their topic; Kafka's tool shows "-" for what it cannot list.
    create_topic(cluster, "fleeting", partitions=1)
    create_topic(cluster, "lasting", partitions=1)
    with AdminClient(bootstrap(cluster)) as admin:
        deadline = time.monotonic() + 15
        while True:  # the coordinator's broker may learn of the new topics a moment later
            try:
                admin.alter_consumer_group_offsets(
                    "survivors", {("fleeting", 0): 0, ("lasting", 0): 0}
                )
                break
            except StromError as exc:
                if exc.name != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        admin.delete_topics(["fleeting"])
    b = ["consumer-groups", "--bootstrap-server", bootstrap(cluster)]
    assert rows(ok(*b, "--describe", "--group", "survivors")) == [
        ["survivors", "fleeting", "0", "0", "-", "-", "-", "-", "-"],
        ["survivors", "lasting", "0", "0", "0", "0", "-", "-", "-"],
    ]


def test_an_offset_the_coordinator_refuses_is_not_reported_set(cluster):
    # Kafka's alterConsumerGroupOffsets fails the partition whose commit was refused.
    with AdminClient(bootstrap(cluster)) as admin:
        try:
            admin.alter_consumer_group_offsets("hopeful", {("never-created", 0): 5})
        except StromError as exc:
            assert exc.name == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert "never-created-0" in exc.message
        else:
            raise AssertionError("a refused offset was reported set")


def _seed_offsets(admin, group, offsets):
    deadline = time.monotonic() + 15
    while True:  # the coordinator's broker may learn of a new topic a moment later
        try:
            admin.alter_consumer_group_offsets(group, offsets)
            return
        except StromError as exc:
            if exc.name != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_delete_offsets_deletes_what_no_member_reads_and_lists_each_partition(cluster):
    create_topic(cluster, "pruned", partitions=2)
    create_topic(cluster, "followed", partitions=1)
    with AdminClient(bootstrap(cluster)) as admin:
        _seed_offsets(admin, "pruners", {("pruned", 0): 1, ("pruned", 1): 2, ("followed", 0): 3})
    b = ["consumer-groups", "--bootstrap-server", bootstrap(cluster)]
    delete = [*b, "--delete-offsets", "--group", "pruners"]

    assert ok(*delete, "--topic", "pruned:0") == [
        "Request succeed for deleting offsets from group pruners.",
        "",
        "TOPIC                          PARTITION       STATUS",
        "pruned                         0               Successful",
    ]
    described = rows(ok(*b, "--describe", "--group", "pruners"))
    assert [(r[1], r[2], r[3]) for r in described] == [("followed", "0", "3"), ("pruned", "1", "2")]

    # A topic named alone stands for its partitions; one that does not exist is listed with
    # its error and no partition, and the exit says something was not deleted.
    mixed = strom(*delete, "--topic", "pruned", "--topic", "no-such-topic")
    assert mixed.returncode == 1
    assert "partition level error" in mixed.stderr
    table = mixed.stdout.splitlines()[1:]
    assert table[1].split()[:3] == ["no-such-topic", "Not", "Provided"]
    assert "Error:" in table[1]
    assert [line.split() for line in table[2:]] == [
        ["pruned", "0", "Successful"],
        ["pruned", "1", "Successful"],
    ]
    assert [r[1] for r in rows(ok(*b, "--describe", "--group", "pruners"))] == ["followed"]

    # The offsets of a topic a member subscribes to stay: GROUP_SUBSCRIBED_TO_TOPIC.
    with Consumer(
        "followed",
        bootstrap_servers=bootstrap(cluster),
        group_id="pruners",
        enable_auto_commit=False,  # the offset stays the one seeded
        **FAST,
    ) as member:
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(timeout_ms=100)
        assert member.assignment()
        kept = strom(*delete, "--topic", "followed")
        assert kept.returncode == 1
        [row] = [line for line in kept.stdout.splitlines() if line.startswith("followed")]
        assert row.split()[:3] == ["followed", "0", "Error:"]
        assert "subscribed" in row
    with AdminClient(bootstrap(cluster)) as admin:
        assert admin.list_consumer_group_offsets("pruners") == {TopicPartition("followed", 0): 3}
        # The group's own error is raised, nothing listed as deleted.
        try:
            admin.delete_consumer_group_offsets("never-was", [("pruned", 0)])
        except StromError as exc:
            assert exc.name == ErrorCode.GROUP_ID_NOT_FOUND
        else:
            raise AssertionError("the offsets of a group that does not exist were deleted")
    missing = strom(*delete[:-1], "never-was", "--topic", "pruned:0")
    assert missing.returncode == 1 and "GROUP_ID_NOT_FOUND" in missing.stderr


def _committed(cluster, group):
    with AdminClient(bootstrap(cluster)) as admin:
        return {tuple(tp): o for tp, o in admin.list_consumer_group_offsets(group).items()}


def test_a_reset_plan_exported_is_read_back_and_several_groups_reset_at_once(cluster, tmp_path):
    create_topic(cluster, "planned", partitions=2)
    with Producer(bootstrap(cluster)) as producer:
        for i in range(10):
            producer.send("planned", b"%d" % i, partition=i % 2)
    with AdminClient(bootstrap(cluster)) as admin:
        for group in ("plan-a", "plan-b"):
            _seed_offsets(admin, group, {("planned", 0): 1, ("planned", 1): 1})
    reset = ["consumer-groups", "--bootstrap-server", bootstrap(cluster), "--reset-offsets"]

    # One group: Kafka's topic,partition,offset lines; --from-file takes them back.
    exported = ok(
        *reset, "--group", "plan-a", "--topic", "planned", "--to-latest", "--dry-run", "--export"
    )
    assert exported == ["planned,0,5", "planned,1,5"]
    plan = tmp_path / "plan.csv"
    plan.write_text("planned,0,2\nplanned,1,3\n")
    assert rows(ok(*reset, "--group", "plan-a", "--from-file", str(plan), "--execute")) == [
        ["plan-a", "planned", "0", "2"],
        ["plan-a", "planned", "1", "3"],
    ]
    assert _committed(cluster, "plan-a") == {("planned", 0): 2, ("planned", 1): 3}

    # Several groups at once, and the group,topic,partition,offset layout.
    both = ["--group", "plan-a", "--group", "plan-b"]
    assert ok(*reset, *both, "--topic", "planned:1", "--to-earliest", "--execute", "--export") == [
        "plan-a,planned,1,0",
        "plan-b,planned,1,0",
    ]
    plan.write_text("plan-b,planned,0,4\nplan-a,planned,1,4\n")
    assert rows(ok(*reset, *both, "--from-file", str(plan), "--execute")) == [
        ["plan-a", "planned", "1", "4"],
        ["plan-b", "planned", "0", "4"],
    ]
    assert _committed(cluster, "plan-b") == {("planned", 0): 4, ("planned", 1): 0}
    # A group the plan does not name is said and the others are reset; the exit says so.
    partial = strom(*reset, "--group", "plan-a", "--group", "plan-c", "--from-file", str(plan),
                    "--dry-run")  # fmt: skip
    assert partial.returncode == 1
    assert partial.stderr.strip() == "Error: No reset plan for group plan-c found"
    assert rows(partial.stdout.splitlines()) == [["plan-a", "planned", "1", "4"]]

    plan.write_text("planned,zero,1\n")
    assert "line 1: expected topic,partition,offset, not 'planned,zero,1'" in fails(
        *reset, "--group", "plan-a", "--from-file", str(plan), "--dry-run"
    )
