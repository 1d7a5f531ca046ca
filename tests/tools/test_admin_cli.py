"""`strom topics`, `strom metadata-quorum` and `strom cluster` in process, against a fake
controller: the requests the options make, what is printed, exit codes (0 success, 1 a
failed operation on one stderr line, 2 a usage error) and never a traceback."""

from __future__ import annotations

from typing import Any

import pytest

import strom.admin
from strom_api.v1 import common_pb2
from strom_api.v1 import controller_pb2 as cpb
from tests.tools.tool_runs import run

BOOT = ["--bootstrap-controller", "127.0.0.1:9093"]
Partition = cpb.DescribeTopicsResponse.Partition


def error(name: str, message: str) -> common_pb2.Error:
    return common_pb2.Error(code=common_pb2.ErrorCode.Value(name), message=message)


class FakeController:
    """A controller's answers from a dict of topics; records every request."""

    def __init__(self) -> None:
        self.topics: dict[str, cpb.DescribeTopicsResponse.Topic] = {}
        self.requests: list[tuple[str, Any]] = []
        self.addresses: list[Any] = []
        self.fail_with: Exception | None = None

    def add_topic(self, name: str, *replicas: list[int]) -> None:
        self.topics[name] = cpb.DescribeTopicsResponse.Topic(
            name=name,
            topic_id=bytes(range(16)),
            partitions=[
                Partition(partition=i, leader=r[0], replicas=r, isr=r)
                for i, r in enumerate(replicas)
            ],
        )

    # the ControllerClient interface the tools and AdminClient use
    def __call__(self, addresses: list[Any], tls: Any = None, **kw: Any) -> FakeController:
        self.addresses = addresses
        return self

    def close(self) -> None:
        pass

    def __enter__(self) -> FakeController:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def call(self, method: str, request: Any, **kw: Any) -> Any:
        self.requests.append((method, request))
        if self.fail_with is not None:
            raise self.fail_with
        if method == "CreateTopics":
            out = cpb.CreateTopicsResponse()
            for t in request.topics:
                result = out.topics.add(name=t.name)
                if t.name in self.topics:
                    result.error.CopyFrom(
                        error("TOPIC_ALREADY_EXISTS", f"Topic '{t.name}' already exists.")
                    )
            return out
        if method == "DeleteTopics":
            for name in request.names:
                del self.topics[name]
            return cpb.DeleteTopicsResponse(topics=[{"name": n} for n in request.names])
        if method == "CreatePartitions":
            return cpb.CreatePartitionsResponse()
        if method == "DescribeQuorum":
            replica = cpb.DescribeQuorumResponse.Replica
            return cpb.DescribeQuorumResponse(
                leader_id=1,
                leader_epoch=4,
                high_watermark=30,
                voters=[replica(replica_id=1, log_end_offset=30, last_caught_up_timestamp=5)],
            )
        raise AssertionError(method)

    def describe(self, method: str, request: Any) -> Any:
        self.requests.append((method, request))
        if method == "DescribeTopics":
            return cpb.DescribeTopicsResponse(topics=list(self.topics.values()))
        if method == "DescribeCluster":
            return cpb.DescribeClusterResponse(cluster_id="cid", controller_id=1)
        raise AssertionError(method)

    def sent(self, method: str) -> list[Any]:
        return [r for m, r in self.requests if m == method]


@pytest.fixture
def controller(monkeypatch: pytest.MonkeyPatch) -> FakeController:
    fake = FakeController()
    # Every command runs on AdminClient, which reaches it through strom.admin.
    monkeypatch.setattr(strom.admin, "ControllerClient", fake)
    return fake


class TestUsage:
    @pytest.mark.parametrize(
        "args, message",
        [
            (["topics", *BOOT, "--create"], "--create needs --topic"),
            (["topics", "--create", "--topic", "t"], "one of the arguments --bootstrap"),
            (
                ["topics", *BOOT, "--bootstrap-server", "h:1", "--list"],
                "not allowed with argument",
            ),
            (["topics", "--bootstrap-controller", "h", "--list"], "'h' is not host:port"),
            (["topics", *BOOT], "one of the arguments --create --list"),
            (["topics", *BOOT, "--list", "--describe"], "not allowed with argument"),
            (["topics", *BOOT, "--alter", "--topic", "t"], "--alter needs --partitions"),
            (
                [
                    "topics",
                    *BOOT,
                    "--create",
                    "--topic",
                    "t",
                    "--partitions",
                    "2",
                    "--replica-assignment",
                    "1,2",
                ],
                "can't be used with --partitions",
            ),
            (
                ["topics", *BOOT, "--list", "--replication-factor", "2"],
                "--replication-factor can only be used with --create",
            ),
            (["metadata-quorum", *BOOT, "describe"], "one of the arguments --status"),
            (
                ["metadata-quorum", *BOOT, "describe", "--status", "--human-readable"],
                "--human-readable is only supported along with --replication",
            ),
            (["cluster", "describe"], "one of the arguments --bootstrap"),
        ],
    )
    def test_usage_errors_exit_2_naming_the_problem(
        self, capsys: pytest.CaptureFixture[str], args: list[str], message: str
    ) -> None:
        code, out, err = run(capsys, *args)
        assert code == 2 and out == ""
        assert message in err

    def test_a_group_without_its_subcommand_prints_its_help(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, _, err = run(capsys, "metadata-quorum", *BOOT)
        assert code == 2 and "usage: strom metadata-quorum" in err


class TestTopics:
    def test_create_with_the_cluster_defaults(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        assert run(capsys, "topics", *BOOT, "--create", "--topic", "orders") == (
            0,
            "Created topic orders.\n",
            "",
        )
        [request] = controller.sent("CreateTopics")
        [topic] = request.topics
        assert (topic.name, topic.num_partitions, topic.replication_factor) == ("orders", -1, -1)
        assert [(a.host, a.port) for a in controller.addresses] == [("127.0.0.1", 9093)]

    def test_create_with_counts_configs_and_a_collision_warning(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        create = ["--create", "--topic", "my.events", "--partitions", "6"]
        configs = ["--config", "retention.ms=1000", "--config", "cleanup.policy=compact"]
        code, out, _ = run(
            capsys,
            "topics",
            "--bootstrap-server",
            "h:1",
            *create,
            "--replication-factor",
            "3",
            *configs,
        )
        assert code == 0
        assert out.startswith("WARNING: Due to limitations in metric names")
        assert out.endswith("Created topic my.events.\n")
        [topic] = controller.sent("CreateTopics")[0].topics
        assert (topic.num_partitions, topic.replication_factor) == (6, 3)
        assert dict(topic.configs) == {"retention.ms": "1000", "cleanup.policy": "compact"}

    def test_create_with_a_replica_assignment(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        args = ["--create", "--topic", "t", "--replica-assignment", "1:2,2:3,3:1"]
        assert run(capsys, "topics", *BOOT, *args)[0] == 0
        [topic] = controller.sent("CreateTopics")[0].topics
        assert (topic.num_partitions, topic.replication_factor) == (-1, -1)
        assert {p: list(r.ids) for p, r in topic.assignments.items()} == {
            0: [1, 2],
            1: [2, 3],
            2: [3, 1],
        }

    def test_an_existing_topic_is_kafkas_error_line_unless_if_not_exists(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        controller.add_topic("orders", [1])
        assert run(capsys, "topics", *BOOT, "--create", "--topic", "orders") == (
            1,
            "",
            "Error while executing topic command : TOPIC_ALREADY_EXISTS: "
            "Topic 'orders' already exists.\n",
        )
        args = ["--create", "--topic", "orders", "--if-not-exists"]
        assert run(capsys, "topics", *BOOT, *args) == (0, "", "")

    def test_bad_values_fail_before_asking_the_controller(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        code, _, err = run(
            capsys, "topics", *BOOT, "--create", "--topic", "t", "--replication-factor", "0"
        )
        assert code == 1
        assert err == (
            "Error while executing topic command : INVALID_REPLICATION_FACTOR: "
            "The replication factor must be between 1 and 32767 inclusive\n"
        )
        code, _, err = run(
            capsys, "topics", *BOOT, "--create", "--topic", "t", "--replica-assignment", "1:1"
        )
        assert code == 1 and "INVALID_REPLICA_ASSIGNMENT" in err
        assert controller.sent("CreateTopics") == []

    def test_list_and_describe(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        controller.add_topic("payments", [2, 3])
        controller.add_topic("orders", [1, 2], [2, 3])
        assert run(capsys, "topics", *BOOT, "--list") == (0, "orders\npayments\n", "")
        assert run(capsys, "topics", *BOOT, "--list", "--topic", "pay.*") == (0, "payments\n", "")
        code, out, _ = run(capsys, "topics", *BOOT, "--describe", "--topic", "orders")
        assert code == 0
        assert out.splitlines() == [
            "Topic: orders\tTopicId: AAECAwQFBgcICQoLDA0ODw\tPartitionCount: 2\t"
            "ReplicationFactor: 2\tConfigs: ",
            "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
            "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2,3",
        ]

    def test_unknown_topics_fail_unless_if_exists(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        for action in (["--describe"], ["--delete"], ["--alter", "--partitions", "3"]):
            assert run(capsys, "topics", *BOOT, *action, "--topic", "nope") == (
                1,
                "",
                "Error while executing topic command : UNKNOWN_TOPIC_OR_PARTITION: "
                "Topic 'nope' does not exist as expected\n",
            )
            args = [*action, "--topic", "nope", "--if-exists"]
            assert run(capsys, "topics", *BOOT, *args) == (0, "", "")
        assert controller.sent("DeleteTopics") == controller.sent("CreatePartitions") == []

    def test_alter_adds_partitions_with_the_new_part_of_an_assignment(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        controller.add_topic("orders", [1, 2], [2, 3])
        args = ["--alter", "--topic", "orders", "--partitions", "4"]
        assert run(capsys, "topics", *BOOT, *args, "--replica-assignment", "1:2,2:3,3:1,1:3") == (
            0,
            "",
            "",
        )
        [request] = controller.sent("CreatePartitions")
        assert (request.name, request.count) == ("orders", 4)
        assert [list(a.ids) for a in request.assignments] == [[3, 1], [1, 3]]

    def test_delete_every_matching_topic_silently(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        for name in ("orders", "orders-eu", "payments"):
            controller.add_topic(name, [1])
        assert run(capsys, "topics", *BOOT, "--delete", "--topic", "orders.*") == (0, "", "")
        assert list(controller.sent("DeleteTopics")[0].names) == ["orders", "orders-eu"]
        assert list(controller.topics) == ["payments"]


class TestQuorumAndCluster:
    def test_metadata_quorum_status(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        code, out, _ = run(capsys, "metadata-quorum", *BOOT, "describe", "--status")
        assert code == 0
        assert out.splitlines()[:3] == [
            "ClusterId:              cid",
            "LeaderId:               1",
            "LeaderEpoch:            4",
        ]

    def test_cluster_id(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        assert run(capsys, "cluster", "cluster-id", *BOOT) == (0, "Cluster ID: cid\n", "")

    def test_a_bug_in_a_tool_is_still_one_line(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        controller.fail_with = KeyError("boom")
        code, out, err = run(capsys, "metadata-quorum", *BOOT, "describe", "--replication")
        assert code == 1 and out == ""
        assert err == "Error while executing metadata-quorum command : KeyError: 'boom'\n"
