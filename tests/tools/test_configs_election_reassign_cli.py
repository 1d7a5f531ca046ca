"""`strom configs`, `strom leader-election` and `strom reassign-partitions` in process, against
a fake controller: the requests the options make, what is printed, exit codes (0 success,
1 a failed operation on one stderr line, 2 a usage error) and never a traceback; and
--generate's proposal, Kafka's placement (rack-aware or not) with a fixed start; the configs
--throttle sets and --verify and --cancel clear."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import strom.admin
from strom.errors import StromError
from strom_api.v1 import common_pb2
from strom_api.v1 import controller_pb2 as cpb
from strom_api.v1 import metadata_pb2 as mpb
from strom_tools.reassign_command import propose_assignment
from tests.tools.tool_runs import run

BOOT = ["--bootstrap-controller", "127.0.0.1:9093"]
Entry = cpb.DescribeConfigsResponse.Entry
Synonym = cpb.DescribeConfigsResponse.Synonym
Ongoing = cpb.ListPartitionReassignmentsResponse.Ongoing


def error(name: str, message: str) -> common_pb2.Error:
    return common_pb2.Error(code=common_pb2.ErrorCode.Value(name), message=message)


def tp(topic: str, partition: int) -> cpb.TopicPartition:
    return cpb.TopicPartition(topic=topic, partition=partition)


class FakeController:
    """Answers from dicts; records every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.topics: dict[str, list[list[int]]] = {}  # name -> each partition's replicas
        self.brokers = [1, 2, 3]
        self.racks: dict[int, str] = {}
        self.configs: dict[tuple[int, str], list[Entry]] = {}
        self.config_errors: dict[tuple[int, str], common_pb2.Error] = {}
        self.alter_errors: dict[tuple[int, str], common_pb2.Error] = {}
        self.election_errors: dict[tuple[str, int], common_pb2.Error] = {}
        self.ongoing: dict[tuple[str, int], Ongoing] = {}
        self.reassign_errors: dict[tuple[str, int], common_pb2.Error] = {}

    # the ControllerClient interface AdminClient uses
    def __call__(self, addresses: list[Any], tls: Any = None, **kw: Any) -> FakeController:
        return self

    def close(self) -> None:
        pass

    def __enter__(self) -> FakeController:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def sent(self, method: str) -> list[Any]:
        return [r for m, r in self.requests if m == method]

    def describe(self, method: str, request: Any) -> Any:
        self.requests.append((method, request))
        if method == "DescribeTopics":
            out = cpb.DescribeTopicsResponse()
            for name in request.names or sorted(self.topics):
                topic = out.topics.add(name=name)
                if name not in self.topics:
                    topic.error.CopyFrom(error("UNKNOWN_TOPIC_OR_PARTITION", "no"))
                    continue
                for i, replicas in enumerate(self.topics[name]):
                    topic.partitions.add(partition=i, leader=replicas[0], replicas=replicas)
            return out
        if method == "DescribeCluster":
            return cpb.DescribeClusterResponse(
                brokers=[
                    cpb.DescribeClusterResponse.Broker(broker_id=b, rack=self.racks.get(b, ""))
                    for b in self.brokers
                ]
            )
        if method == "DescribeConfigs":
            out = cpb.DescribeConfigsResponse()
            for resource in request.resources:
                key = (resource.type, resource.name)
                item = out.results.add(resource=resource)
                if key in self.config_errors:
                    item.error.CopyFrom(self.config_errors[key])
                else:
                    item.entries.extend(self.configs.get(key, []))
            return out
        raise AssertionError(method)

    def call(self, method: str, request: Any, **kw: Any) -> Any:
        self.requests.append((method, request))
        if method == "IncrementalAlterConfigs":
            out = cpb.IncrementalAlterConfigsResponse()
            for r in request.resources:
                item = out.results.add(resource=r.resource)
                key = (r.resource.type, r.resource.name)
                if key in self.alter_errors:
                    item.error.CopyFrom(self.alter_errors[key])
            return out
        if method == "ElectLeaders":
            out = cpb.ElectLeadersResponse()
            for p in request.partitions:
                item = out.results.add(partition=p)
                key = (p.topic, p.partition)
                if key in self.election_errors:
                    item.error.CopyFrom(self.election_errors[key])
            return out
        if method == "ListPartitionReassignments":
            wanted = {(p.topic, p.partition) for p in request.partitions}
            return cpb.ListPartitionReassignmentsResponse(
                reassignments=[o for k, o in self.ongoing.items() if not wanted or k in wanted]
            )
        if method == "AlterPartitionReassignments":
            out = cpb.AlterPartitionReassignmentsResponse()
            for r in request.reassignments:
                item = out.results.add(partition=r.partition)
                key = (r.partition.topic, r.partition.partition)
                if key in self.reassign_errors:
                    item.error.CopyFrom(self.reassign_errors[key])
            return out
        raise AssertionError(method)


@pytest.fixture
def controller(monkeypatch: pytest.MonkeyPatch) -> FakeController:
    fake = FakeController()
    # Every command runs on AdminClient, which reaches it through strom.admin.
    monkeypatch.setattr(strom.admin, "ControllerClient", fake)
    return fake


def write(tmp_path: Path, document: object, name: str = "f.json") -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


TOPIC = ["--entity-type", "topics", "--entity-name", "orders"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["configs", *BOOT, "--describe"], "At least one entity type must be specified"),
        (
            ["configs", *BOOT, "--describe", "--entity-type", "topics", "--entity-default"],
            "--entity-default must not be specified with --describe of topics",
        ),
        (
            ["configs", *BOOT, "--alter", "--entity-type", "topics", "--add-config", "a=1"],
            "An entity name must be specified with --alter of topics",
        ),
        (
            ["configs", *BOOT, "--alter", "--entity-type", "brokers", "--add-config", "a=1"],
            "An entity-name or default entity must be specified with --alter of brokers",
        ),
        (["configs", *BOOT, "--alter", *TOPIC], "At least one of --add-config"),
        (
            ["configs", *BOOT, "--describe", *TOPIC, "--add-config", "a=1"],
            "option --add-config can only be used with --alter",
        ),
        (
            ["configs", *BOOT, "--alter", *TOPIC, "--all", "--add-config", "a=1"],
            "option --all can only be used with --describe",
        ),
        (
            ["configs", *BOOT, "--describe", "--entity-type", "brokers", "--entity-name", "x"],
            "The entity name for brokers must be a valid integer broker id, but it is: x",
        ),
        (
            ["configs", *BOOT, "--describe", "--entity-type", "topics", "--topic", "t"],
            "--entity-{type,name,default} should not be used in conjunction with specific",
        ),
        (
            ["configs", *BOOT, "--describe", "--entity-type", "clients"],
            "invalid choice: 'clients'",
        ),
        (
            ["configs", *BOOT, "--describe", "--entity-type", "users", "--entity-default"],
            "--entity-default is not supported for users",
        ),
        (
            ["configs", *BOOT, "--describe", "--entity-type", "users", "--all"],
            "option --all can only be used with --describe of topics or brokers",
        ),
        (
            ["leader-election", *BOOT, "--election-type", "preferred"],
            "One and only one of the following options is required: --topic, "
            "--all-topic-partitions, --path-to-json-file",
        ),
        (
            ["leader-election", *BOOT, "--election-type", "preferred", "--topic", "t"],
            "Missing required option(s): --partition",
        ),
        (
            [
                "leader-election",
                *BOOT,
                "--election-type",
                "preferred",
                "--all-topic-partitions",
                "--partition",
                "0",
            ],
            "Option --partition is only allowed if --topic is used",
        ),
        (
            ["leader-election", *BOOT, "--election-type", "x", "--all-topic-partitions"],
            "invalid election type 'x' (choose preferred or unclean)",
        ),
        (
            ["leader-election", *BOOT, "--all-topic-partitions"],
            "the following arguments are required: --election-type",
        ),
        (["reassign-partitions", *BOOT], "one of the arguments --generate --execute"),
        (
            ["reassign-partitions", *BOOT, "--execute"],
            "--execute needs --reassignment-json-file",
        ),
        (
            ["reassign-partitions", *BOOT, "--list", "--broker-list", "1,2"],
            "option --broker-list can only be used with --generate",
        ),
        (
            ["reassign-partitions", *BOOT, "--verify", "--additional"],
            "--verify needs --reassignment-json-file",
        ),
        (
            ["reassign-partitions", *BOOT, "--execute", "--reassignment-json-file", "/no/such"],
            "argument --reassignment-json-file: can't read '/no/such': No such file or directory",
        ),
        (
            ["reassign-partitions", *BOOT, "--list", "--throttle", "1000"],
            "option --throttle can only be used with --execute",
        ),
        (
            ["reassign-partitions", *BOOT, "--verify", "--throttle", "x"],
            "argument --throttle: invalid int value: 'x'",
        ),
        (
            ["reassign-partitions", *BOOT, "--list", "--replica-alter-log-dirs-throttle", "9"],
            "--replica-alter-log-dirs-throttle is not supported: Strom moves no replica "
            "between log directories",
        ),
    ],
)
def test_usage_errors_exit_2_naming_the_problem(
    capsys: pytest.CaptureFixture[str], controller: FakeController, args: list[str], message: str
) -> None:
    code, out, err = run(capsys, *args)
    assert (code, out) == (2, "")
    assert message in err
    assert controller.requests == []


class TestConfigs:
    def test_describe_shows_the_topics_own_configs(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        controller.topics["orders"] = [[1]]
        own = Synonym(name="retention.ms", value="1000", source="DYNAMIC_TOPIC_CONFIG")
        controller.configs[mpb.TOPIC, "orders"] = [
            Entry(name="segment.ms", value="604800000", source="DEFAULT_CONFIG"),
            Entry(name="retention.ms", value="1000", source="DYNAMIC_TOPIC_CONFIG", synonyms=[own]),
        ]
        assert run(capsys, "configs", *BOOT, "--describe", *TOPIC) == (
            0,
            "Dynamic configs for topic orders are:\n"
            "  retention.ms=1000 sensitive=false "
            "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}\n",
            "",
        )
        [request] = controller.sent("DescribeConfigs")
        assert [(r.type, r.name) for r in request.resources] == [(mpb.TOPIC, "orders")]
        code, out, _ = run(capsys, "configs", *BOOT, "--describe", "--topic", "orders", "--all")
        assert code == 0
        assert out.splitlines() == [
            "All configs for topic orders are:",
            "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}",
            "  segment.ms=604800000 sensitive=false synonyms={}",
        ]

    def test_a_missing_entity_is_an_error_in_kafkas_words(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        assert run(capsys, "configs", *BOOT, "--describe", "--topic", "nope") == (
            1,
            "",
            "Error while executing config command : UNKNOWN_TOPIC_OR_PARTITION: "
            "The topic 'nope' doesn't exist and doesn't have dynamic config.\n",
        )
        assert run(capsys, "configs", *BOOT, "--describe", "--broker", "9") == (
            1,
            "",
            "Error while executing config command : BROKER_NOT_AVAILABLE: "
            "The broker '9' doesn't exist and doesn't have dynamic config.\n",
        )
        assert controller.sent("DescribeConfigs") == []

    def test_with_all_a_missing_topic_is_the_controllers_error(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        controller.config_errors[mpb.TOPIC, "nope"] = error(
            "UNKNOWN_TOPIC_OR_PARTITION", "The topic 'nope' does not exist."
        )
        assert run(capsys, "configs", *BOOT, "--describe", "--topic", "nope", "--all") == (
            1,
            "",
            "Error while executing config command : UNKNOWN_TOPIC_OR_PARTITION: "
            "The topic 'nope' does not exist.\n",
        )

    def test_describe_every_broker_then_the_default(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        controller.brokers = [2, 1]
        controller.configs[mpb.BROKER, "1"] = [
            Entry(name="num.replica.fetchers", value="2", source="DYNAMIC_BROKER_CONFIG"),
            Entry(name="log.retention.ms", value="5", source="DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ]
        controller.configs[mpb.BROKER, ""] = [
            Entry(name="log.retention.ms", value="5", source="DYNAMIC_DEFAULT_BROKER_CONFIG")
        ]
        code, out, _ = run(capsys, "configs", *BOOT, "--describe", "--entity-type", "brokers")
        assert code == 0
        assert out.splitlines() == [
            "Dynamic configs for broker 1 are:",
            "  num.replica.fetchers=2 sensitive=false synonyms={}",
            "Dynamic configs for broker 2 are:",
            "Default configs for brokers in the cluster are:",
            "  log.retention.ms=5 sensitive=false synonyms={}",
        ]

    def test_alter_deletes_then_sets(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        controller.configs[mpb.TOPIC, "orders"] = [
            Entry(name="segment.ms", value="1", source="DYNAMIC_TOPIC_CONFIG")
        ]
        args = ["--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]"]
        assert run(
            capsys, "configs", *BOOT, "--alter", *TOPIC, *args, "--delete-config", "segment.ms"
        ) == (0, "Completed updating config for topic orders.\n", "")
        [request] = controller.sent("IncrementalAlterConfigs")
        [resource] = request.resources
        assert (resource.resource.type, resource.resource.name) == (mpb.TOPIC, "orders")
        assert [(o.name, o.op, o.value if o.HasField("value") else None) for o in resource.ops] == [
            ("retention.ms", cpb.SET, "1000"),
            ("cleanup.policy", cpb.SET, "compact,delete"),
            ("segment.ms", cpb.DELETE, None),
        ]
        assert not request.validate_only

    def test_alter_the_broker_default_from_a_properties_file(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        path = write(tmp_path, "# defaults\nlog.retention.ms=5000\n", "b.properties")
        args = ["--alter", "--broker-defaults", "--add-config-file", path]
        assert run(capsys, "configs", *BOOT, *args) == (
            0,
            "Completed updating default config for brokers in the cluster.\n",
            "",
        )
        [resource] = controller.sent("IncrementalAlterConfigs")[0].resources
        assert (resource.resource.type, resource.resource.name) == (mpb.BROKER, "")
        assert [(o.name, o.value) for o in resource.ops] == [("log.retention.ms", "5000")]

    def test_deleting_a_config_that_is_not_set_fails_before_altering(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        args = ["--alter", *TOPIC, "--delete-config", "retention.ms,x"]
        assert run(capsys, "configs", *BOOT, *args) == (
            1,
            "",
            "Error while executing config command : INVALID_CONFIG: "
            "Invalid config(s): retention.ms,x\n",
        )
        assert controller.sent("IncrementalAlterConfigs") == []

    def test_bad_values_and_refusals_are_one_line(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        code, _, err = run(capsys, "configs", *BOOT, "--alter", *TOPIC, "--add-config", "a=b=c")
        assert code == 1
        assert err.startswith("Error while executing config command : INVALID_CONFIG: Invalid ")
        controller.alter_errors[mpb.BROKER, "1"] = error(
            "INVALID_CONFIG", "Unknown broker config 'x'"
        )
        args = ["--alter", "--broker", "1", "--add-config", "x=1"]
        assert run(capsys, "configs", *BOOT, *args) == (
            1,
            "",
            "Error while executing config command : INVALID_CONFIG: Unknown broker config 'x'\n",
        )


class TestLeaderElection:
    def test_one_partition_not_needed(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        controller.election_errors["orders", 0] = error("ELECTION_NOT_NEEDED", "not needed")
        args = ["--election-type", "PREFERRED", "--topic", "orders", "--partition", "0"]
        assert run(capsys, "leader-election", *BOOT, *args) == (
            0,
            "Valid replica already elected for partitions orders-0\n",
            "",
        )
        [request] = controller.sent("ElectLeaders")
        assert request.election_type == cpb.PREFERRED and not request.all_partitions
        assert [(p.topic, p.partition) for p in request.partitions] == [("orders", 0)]

    def test_a_json_file_with_a_failure_exits_1(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        path = write(
            tmp_path,
            {"partitions": [{"topic": "a", "partition": 1}, {"topic": "a", "partition": 0}]},
        )
        controller.election_errors["a", 1] = error(
            "ELIGIBLE_LEADERS_NOT_AVAILABLE", "Eligible topic partition leaders are not available."
        )
        args = ["--election-type", "unclean", "--path-to-json-file", path]
        assert run(capsys, "leader-election", *BOOT, *args) == (
            1,
            "Successfully completed leader election (UNCLEAN) for partitions a-0\n"
            "Error completing leader election (UNCLEAN) for partition: a-1: "
            "ELIGIBLE_LEADERS_NOT_AVAILABLE: Eligible topic partition leaders are not available.\n",
            "Error while executing leader-election command : ELIGIBLE_LEADERS_NOT_AVAILABLE: "
            "1 replica(s) could not be elected\n",
        )
        assert controller.sent("ElectLeaders")[0].election_type == cpb.UNCLEAN

    def test_all_partitions(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController
    ) -> None:
        args = ["--election-type", "preferred", "--all-topic-partitions"]
        assert run(capsys, "leader-election", *BOOT, *args) == (0, "", "")
        [request] = controller.sent("ElectLeaders")
        assert request.all_partitions and not request.partitions

    def test_an_empty_partition_list_elects_nothing(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        # Not every partition: AdminClient reads an empty list so, the tool does not.
        path = write(tmp_path, {"partitions": []})
        args = ["--election-type", "preferred", "--path-to-json-file", path]
        assert run(capsys, "leader-election", *BOOT, *args) == (0, "", "")
        assert controller.sent("ElectLeaders") == []

    def test_a_bad_json_file_is_one_line(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        path = write(tmp_path, "{}")
        args = ["--election-type", "preferred", "--path-to-json-file", path]
        assert run(capsys, "leader-election", *BOOT, *args) == (
            1,
            "",
            "Error while executing leader-election command : INVALID_REQUEST: "
            "Replica election data is empty\n",
        )


class TestReassignPartitions:
    def test_generate_prints_the_current_and_a_proposed_assignment(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        controller.topics = {"moves": [[1, 2], [2, 1]], "other": [[3]]}
        path = write(tmp_path, {"topics": [{"topic": "moves"}], "version": 1})
        args = ["--generate", "--topics-to-move-json-file", path, "--broker-list", "3,2"]
        code, out, err = run(capsys, "reassign-partitions", *BOOT, *args)
        assert (code, err) == (0, "")
        current, proposed = out.splitlines()[1], out.splitlines()[4]
        assert json.loads(current)["partitions"] == [
            {"topic": "moves", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
            {"topic": "moves", "partition": 1, "replicas": [2, 1], "log_dirs": ["any", "any"]},
        ]
        assert [p["replicas"] for p in json.loads(proposed)["partitions"]] == [[2, 3], [3, 2]]

    def test_generate_refuses_a_broker_that_is_not_registered(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        # Kafka would leave broker 7 out and spread the partitions over 1 and 2 alone.
        controller.topics = {"moves": [[1, 2], [2, 3]]}
        path = write(tmp_path, {"topics": [{"topic": "moves"}], "version": 1})
        for brokers, unknown in (("1,2,7", "id 7"), ("9,1,2,8", "ids 9,8")):
            args = ["--generate", "--topics-to-move-json-file", path, "--broker-list", brokers]
            assert run(capsys, "reassign-partitions", *BOOT, *args) == (
                1,
                "",
                "Error while executing reassign-partitions command : INVALID_REPLICA_ASSIGNMENT: "
                f"Unknown broker {unknown} in --broker-list: the registered brokers are 1,2,3.\n",
            )

    def test_generate_is_rack_aware_unless_disabled(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        controller.brokers = [1, 2, 3, 4]
        controller.racks = {1: "a", 2: "a", 3: "b", 4: "b"}
        controller.topics = {"moves": [[1, 2]] * 4}
        path = write(tmp_path, {"topics": [{"topic": "moves"}], "version": 1})
        args = ["--generate", "--topics-to-move-json-file", path, "--broker-list", "1,2,3,4"]

        def proposed(*extra: str) -> list[list[int]]:
            code, out, err = run(capsys, "reassign-partitions", *BOOT, *args, *extra)
            assert (code, err) == (0, "")
            return [p["replicas"] for p in json.loads(out.splitlines()[4])["partitions"]]

        # Every partition on both racks; without racks, [1, 2] and [3, 4] share one each.
        assert proposed() == [[1, 3], [3, 2], [2, 4], [4, 1]]
        assert proposed("--disable-rack-aware") == [[1, 2], [2, 3], [3, 4], [4, 1]]
        controller.racks = {1: "a", 3: "b", 4: "b"}
        assert run(capsys, "reassign-partitions", *BOOT, *args) == (
            1,
            "",
            "Error while executing reassign-partitions command : INVALID_REPLICA_ASSIGNMENT: Not "
            "all brokers have rack information. Add --disable-rack-aware in command line to make "
            "replica assignment without rack information.\n",
        )
        assert proposed("--disable-rack-aware") == [[1, 2], [2, 3], [3, 4], [4, 1]]

    def test_generate_for_a_missing_topic(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        path = write(tmp_path, {"topics": [{"topic": "nope"}]})
        args = ["--generate", "--topics-to-move-json-file", path, "--broker-list", "1"]
        assert run(capsys, "reassign-partitions", *BOOT, *args) == (
            1,
            "",
            "Error while executing reassign-partitions command : UNKNOWN_TOPIC_OR_PARTITION: "
            "Topic nope not found.\n",
        )

    def test_execute_prints_the_rollback_then_starts(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        controller.topics = {"moves": [[1, 2], [2, 1]]}
        target = {
            "version": 1,
            "partitions": [
                {"topic": "moves", "partition": 1, "replicas": [1, 2]},
                {"topic": "moves", "partition": 0, "replicas": [3, 2], "log_dirs": ["any", "any"]},
            ],
        }
        path = write(tmp_path, target)
        code, out, err = run(
            capsys, "reassign-partitions", *BOOT, "--execute", "--reassignment-json-file", path
        )
        assert (code, err) == (0, "")
        assert out.splitlines() == [
            "Current partition replica assignment",
            "",
            '{"version":1,"partitions":['
            '{"topic":"moves","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
            '{"topic":"moves","partition":1,"replicas":[2,1],"log_dirs":["any","any"]}]}',
            "",
            "Save this to use as the --reassignment-json-file option during rollback",
            "Successfully started partition reassignments for moves-0,moves-1",
        ]
        [request] = controller.sent("AlterPartitionReassignments")
        assert [
            (r.partition.topic, r.partition.partition, list(r.replicas.ids))
            for r in request.reassignments
        ] == [("moves", 0, [3, 2]), ("moves", 1, [1, 2])]

    def test_execute_refusals(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        controller.topics = {"moves": [[1, 2]]}
        execute = ["--execute", "--reassignment-json-file"]
        path = write(
            tmp_path, {"partitions": [{"topic": "moves", "partition": 0, "replicas": [7]}]}
        )
        assert run(capsys, "reassign-partitions", *BOOT, *execute, path) == (
            1,
            "",
            "Error while executing reassign-partitions command : INVALID_REPLICA_ASSIGNMENT: "
            "Unknown broker id 7\n",
        )
        path = write(
            tmp_path, {"partitions": [{"topic": "moves", "partition": 5, "replicas": [1]}]}
        )
        assert run(capsys, "reassign-partitions", *BOOT, *execute, path) == (
            1,
            "",
            "Error while executing reassign-partitions command : UNKNOWN_TOPIC_OR_PARTITION: "
            "Unable to find partition: moves-5\n",
        )
        controller.ongoing["moves", 0] = Ongoing(partition=tp("moves", 0), replicas=[1, 2])
        path = write(
            tmp_path, {"partitions": [{"topic": "moves", "partition": 0, "replicas": [2]}]}
        )
        code, out, err = run(capsys, "reassign-partitions", *BOOT, *execute, path)
        assert (code, out) == (1, "")
        assert err.startswith(
            "Error while executing reassign-partitions command : REASSIGNMENT_IN_PROGRESS: "
            "Cannot execute because there is an existing partition assignment.  Use --additional"
        )
        assert controller.sent("AlterPartitionReassignments") == []
        controller.reassign_errors["moves", 0] = error("INVALID_REPLICA_ASSIGNMENT", "Nope.")
        code, out, err = run(capsys, "reassign-partitions", *BOOT, *execute, path, "--additional")
        assert code == 1 and out.startswith("Current partition replica assignment")
        assert err == (
            "Error while executing reassign-partitions command : INVALID_REPLICA_ASSIGNMENT: "
            "Error reassigning partition(s): moves-0: Nope.\n"
        )

    def test_execute_with_a_throttle_sets_kafkas_throttle_configs(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        controller.topics = {"moves": [[1, 2], [2, 1], [3, 1]], "other": [[3, 4, 1]]}
        controller.brokers = [1, 2, 3, 4]
        # other-0 is being moved already (from 3,1 to 3,4): its throttles are kept.
        controller.ongoing["other", 0] = Ongoing(
            partition=tp("other", 0), replicas=[3, 4, 1], adding_replicas=[4], removing_replicas=[1]
        )
        parts = [
            {"topic": "moves", "partition": 0, "replicas": [3, 2]},
            {"topic": "moves", "partition": 1, "replicas": [2, 1]},
            {"topic": "moves", "partition": 2, "replicas": [4, 1]},
        ]
        path = write(tmp_path, {"version": 1, "partitions": parts})
        execute = ["--execute", "--reassignment-json-file", path, "--additional"]
        code, out, err = run(capsys, "reassign-partitions", *BOOT, *execute, "--throttle", "5000")
        assert (code, err) == (0, "")
        assert out.splitlines()[-3:] == [
            "Warning: You must run --verify periodically, until the reassignment completes, to "
            "ensure the throttle is removed.",
            "The inter-broker throttle limit was set to 5000 B/s",
            "Successfully started partition reassignments for moves-0,moves-1,moves-2",
        ]
        [request] = controller.sent("IncrementalAlterConfigs")
        assert {
            (r.resource.type, r.resource.name): {op.name: (op.op, op.value) for op in r.ops}
            for r in request.resources
        } == {
            (mpb.TOPIC, "moves"): {
                "leader.replication.throttled.replicas": (cpb.SET, "0:1,0:2,1:1,1:2,2:1,2:3"),
                "follower.replication.throttled.replicas": (cpb.SET, "0:3,2:4"),
            },
            (mpb.TOPIC, "other"): {
                "leader.replication.throttled.replicas": (cpb.SET, "0:1,0:3"),
                "follower.replication.throttled.replicas": (cpb.SET, "0:4"),
            },
            **{
                (mpb.BROKER, str(b)): {
                    "leader.replication.throttled.rate": (cpb.SET, "5000"),
                    "follower.replication.throttled.rate": (cpb.SET, "5000"),
                }
                for b in (1, 2, 3, 4)
            },
        }
        # No throttle asked (Kafka's default -1): no configs touched.
        controller.requests.clear()
        code, out, err = run(capsys, "reassign-partitions", *BOOT, *execute, "--throttle", "-1")
        assert (code, err) == (0, "") and "throttle" not in out
        assert controller.sent("IncrementalAlterConfigs") == []

    def test_a_refused_throttle_is_one_line_and_starts_nothing(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        controller.topics = {"moves": [[1, 2]]}
        controller.alter_errors[mpb.BROKER, "3"] = error("INVALID_CONFIG", "No.")
        parts = [{"topic": "moves", "partition": 0, "replicas": [3, 2]}]
        path = write(tmp_path, {"version": 1, "partitions": parts})
        execute = ["--execute", "--reassignment-json-file", path, "--throttle", "10"]
        code, out, err = run(capsys, "reassign-partitions", *BOOT, *execute)
        assert code == 1
        assert err == "Error while executing reassign-partitions command : INVALID_CONFIG: No.\n"
        assert controller.sent("AlterPartitionReassignments") == []

    def test_verify_clears_the_throttles_once_every_move_is_done(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        controller.topics = {"moves": [[3, 2], [1, 2]], "other": [[1]]}
        controller.brokers = [1, 2, 3, 4]
        parts = [
            {"topic": "moves", "partition": 0, "replicas": [3, 2]},
            {"topic": "moves", "partition": 1, "replicas": [2, 1]},
        ]
        path = write(tmp_path, {"version": 1, "partitions": parts})
        verify = ["--verify", "--reassignment-json-file", path]
        code, out, _ = run(capsys, "reassign-partitions", *BOOT, *verify)
        assert code == 0 and "Clearing" not in out  # moves-1 is not 2,1: not done
        assert controller.sent("IncrementalAlterConfigs") == []

        controller.topics["moves"][1] = [2, 1]
        assert run(capsys, "reassign-partitions", *BOOT, *verify, "--preserve-throttles") == (
            0,
            "Status of partition reassignment:\n"
            "Reassignment of partition moves-0 is completed.\n"
            "Reassignment of partition moves-1 is completed.\n",
            "",
        )
        assert controller.sent("IncrementalAlterConfigs") == []
        assert run(capsys, "reassign-partitions", *BOOT, *verify) == (
            0,
            "Status of partition reassignment:\n"
            "Reassignment of partition moves-0 is completed.\n"
            "Reassignment of partition moves-1 is completed.\n"
            "Clearing broker-level throttles on brokers 1,2,3,4\n"
            "Clearing topic-level throttles on topic moves\n",
            "",
        )
        [request] = controller.sent("IncrementalAlterConfigs")
        assert {
            (r.resource.type, r.resource.name): sorted((op.name, op.op) for op in r.ops)
            for r in request.resources
        } == {
            (mpb.TOPIC, "moves"): [
                ("follower.replication.throttled.replicas", cpb.DELETE),
                ("leader.replication.throttled.replicas", cpb.DELETE),
            ],
            **{
                (mpb.BROKER, str(b)): [
                    ("follower.replication.throttled.rate", cpb.DELETE),
                    ("leader.replication.throttled.rate", cpb.DELETE),
                ]
                for b in (1, 2, 3, 4)
            },
        }

    def test_verify(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        controller.topics = {"moves": [[3, 2, 1], [1, 2], [2, 1]]}
        controller.ongoing["moves", 0] = Ongoing(
            partition=tp("moves", 0), replicas=[3, 2, 1], adding_replicas=[3], removing_replicas=[1]
        )
        parts = [
            {"topic": "moves", "partition": p, "replicas": r}
            for p, r in ((0, [3, 2]), (1, [1, 2]), (2, [1, 3]))
        ]
        path = write(tmp_path, {"version": 1, "partitions": parts})
        verify = ["--verify", "--reassignment-json-file", path]
        assert run(capsys, "reassign-partitions", *BOOT, *verify) == (
            0,
            "Status of partition reassignment:\n"
            "Reassignment of partition moves-0 is still in progress.\n"
            "Reassignment of partition moves-1 is completed.\n"
            "There is no active reassignment of partition moves-2, but replica set is 2,1 "
            "rather than 1,3.\n",
            "",
        )

    def test_cancel_only_what_is_in_progress(
        self, capsys: pytest.CaptureFixture[str], controller: FakeController, tmp_path: Path
    ) -> None:
        controller.ongoing["moves", 0] = Ongoing(
            partition=tp("moves", 0), replicas=[3, 2, 1], adding_replicas=[3], removing_replicas=[1]
        )
        controller.ongoing["other", 0] = Ongoing(
            partition=tp("other", 0), replicas=[3, 1], adding_replicas=[3]
        )
        controller.topics = {"moves": [[3, 2, 1], [1, 2]], "other": [[3, 1]]}
        parts = [
            {"topic": "moves", "partition": 0, "replicas": [3, 2]},
            {"topic": "moves", "partition": 1, "replicas": [1, 2]},
        ]
        path = write(tmp_path, {"partitions": parts})
        cancel = ["--cancel", "--reassignment-json-file", path]
        assert run(capsys, "reassign-partitions", *BOOT, *cancel) == (
            0,
            "Successfully cancelled partition reassignment for: moves-0\n"
            "None of the specified partition moves are active.\n"
            "Clearing broker-level throttles on brokers 1,2,3\n"
            "Clearing topic-level throttles on topic moves\n",
            "",
        )
        [listed] = controller.sent("ListPartitionReassignments")
        assert [(p.topic, p.partition) for p in listed.partitions] == [("moves", 0), ("moves", 1)]
        [request] = controller.sent("AlterPartitionReassignments")
        [only] = request.reassignments
        assert (only.partition.topic, only.partition.partition) == ("moves", 0)
        assert not only.HasField("replicas")  # unset: cancel

        controller.ongoing.clear()
        assert run(capsys, "reassign-partitions", *BOOT, *cancel, "--preserve-throttles") == (
            0,
            "None of the specified partition reassignments are active.\n"
            "None of the specified partition moves are active.\n",
            "",
        )

    def test_list(self, capsys: pytest.CaptureFixture[str], controller: FakeController) -> None:
        assert run(capsys, "reassign-partitions", *BOOT, "--list") == (
            0,
            "No partition reassignments found.\n",
            "",
        )
        controller.ongoing["moves", 0] = Ongoing(
            partition=tp("moves", 0), replicas=[3, 2, 1], adding_replicas=[3], removing_replicas=[1]
        )
        assert run(capsys, "reassign-partitions", *BOOT, "--list") == (
            0,
            "Current partition reassignments:\nmoves-0: replicas: 3,2,1. adding: 3. removing: 1.\n",
            "",
        )


class TestProposal:
    def test_kafkas_rack_unaware_placement_with_a_fixed_start(self) -> None:
        # Kafka's AdminUtils test expectation for brokers 0-4, 10 partitions, 3 replicas,
        # start index 0: round-robin leaders, followers shifted once per wrap-around.
        proposal = propose_assignment({"t": (10, 3)}, [4, 3, 2, 1, 0])
        assert [proposal["t", p] for p in range(10)] == [
            [0, 1, 2],
            [1, 2, 3],
            [2, 3, 4],
            [3, 4, 0],
            [4, 0, 1],
            [0, 2, 3],
            [1, 3, 4],
            [2, 4, 0],
            [3, 0, 1],
            [4, 1, 2],
        ]

    def test_kafkas_rack_aware_placement_with_a_fixed_start(self) -> None:
        # Kafka's AdminRackAwareTest expectation (7 partitions, 3 replicas, start index 0).
        racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
        proposal = propose_assignment({"t": (7, 3)}, list(racks), racks)
        assert [proposal["t", p] for p in range(7)] == [
            [0, 3, 1],
            [3, 1, 5],
            [1, 5, 4],
            [5, 4, 2],
            [4, 2, 0],
            [2, 0, 3],
            [0, 4, 2],
        ]

    def test_each_topic_by_its_own_shape(self) -> None:
        assert propose_assignment({"a": (2, 1), "b": (1, 2)}, [1, 2]) == {
            ("a", 0): [1],
            ("a", 1): [2],
            ("b", 0): [1, 2],
        }

    def test_more_replicas_than_brokers(self) -> None:
        with pytest.raises(StromError) as info:
            propose_assignment({"a": (1, 3)}, [1, 2])
        assert (info.value.name, info.value.message) == (
            "INVALID_REPLICATION_FACTOR",
            "Replication factor: 3 larger than available brokers: 2.",
        )
