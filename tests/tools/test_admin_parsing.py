"""The admin tools' argument values, read as Kafka's tools read them."""

from __future__ import annotations

import pytest

from strom.controller_client import ControllerAddress, parse_bootstrap
from strom.errors import StromError
from strom_tools.admin_parsing import (
    TopicFilter,
    check_new_topic_counts,
    check_reassignment,
    has_collision_chars,
    parse_add_config,
    parse_broker_list,
    parse_delete_config,
    parse_election_partitions,
    parse_properties,
    parse_reassignment,
    parse_replica_assignment,
    parse_topic_configs,
    parse_topics_to_move,
)


def error_of(fn, *args) -> StromError:
    with pytest.raises(StromError) as info:
        fn(*args)
    return info.value


class TestReplicaAssignment:
    def test_partitions_by_comma_brokers_by_colon(self) -> None:
        assert parse_replica_assignment("1:2,2:3,3:1") == {0: [1, 2], 1: [2, 3], 2: [3, 1]}

    def test_spaces_and_a_trailing_comma_are_tolerated_as_in_kafka(self) -> None:
        assert parse_replica_assignment(" 1 : 2, 2:3,") == {0: [1, 2], 1: [2, 3]}
        assert parse_replica_assignment("3") == {0: [3]}

    def test_duplicates_are_refused_with_kafkas_message(self) -> None:
        error = error_of(parse_replica_assignment, "1:2,2:2:3")
        assert error.name == "INVALID_REPLICA_ASSIGNMENT"
        assert error.message == "Partition replica lists may not contain duplicate entries: 2"

    def test_every_partition_has_the_same_replication_factor(self) -> None:
        error = error_of(parse_replica_assignment, "1:2,3")
        assert error.name == "INVALID_REPLICA_ASSIGNMENT"
        assert error.message == "Partition 1 has different replication factor: [3]"

    @pytest.mark.parametrize("text", ["1:x", "1,,2", "", "1;2"])
    def test_what_is_not_broker_ids_is_refused(self, text: str) -> None:
        assert error_of(parse_replica_assignment, text).name == "INVALID_REPLICA_ASSIGNMENT"


class TestTopicConfigs:
    def test_key_value_pairs_with_spaces_around_the_equals_sign(self) -> None:
        assert parse_topic_configs(["retention.ms=1000", "cleanup.policy = compact"]) == {
            "retention.ms": "1000",
            "cleanup.policy": "compact",
        }

    @pytest.mark.parametrize("value", ["retention.ms", "retention.ms=", "a=b=c"])
    def test_anything_else_is_kafkas_invalid_topic_config(self, value: str) -> None:
        error = error_of(parse_topic_configs, [value])
        assert error.name == "INVALID_CONFIG"
        assert 'must be in the format "key=val"' in error.message


class TestNewTopicCounts:
    @pytest.mark.parametrize("factor", [0, -1, 32768])
    def test_replication_factor_between_1_and_short_max(self, factor: int) -> None:
        error = error_of(check_new_topic_counts, None, factor)
        assert error.name == "INVALID_REPLICATION_FACTOR"
        assert error.message == "The replication factor must be between 1 and 32767 inclusive"

    def test_partitions_greater_than_zero(self) -> None:
        error = error_of(check_new_topic_counts, 0, None)
        assert (error.name, error.message) == (
            "INVALID_PARTITIONS",
            "The partitions must be greater than 0",
        )

    def test_defaults_and_sensible_values_pass(self) -> None:
        check_new_topic_counts(None, None)
        check_new_topic_counts(12, 3)


class TestTopicFilter:
    names = ["orders", "orders-eu", "my.events", "my_events", "payments"]

    def test_a_plain_name_matches_only_itself(self) -> None:
        assert TopicFilter("orders").select(self.names) == ["orders"]

    def test_a_regular_expression_matches_whole_names(self) -> None:
        assert TopicFilter("orders.*").select(self.names) == ["orders", "orders-eu"]
        assert TopicFilter("rders").select(self.names) == []

    def test_commas_are_alternatives_and_quotes_spaces_are_dropped(self) -> None:
        assert TopicFilter("'orders, payments'").select(self.names) == ["orders", "payments"]

    def test_a_dot_is_any_character_unless_escaped_as_in_kafka(self) -> None:
        assert TopicFilter("my.events").select(self.names) == ["my.events", "my_events"]
        assert TopicFilter(r"my\.events").select(self.names) == ["my.events"]

    def test_an_invalid_regex_is_an_error(self) -> None:
        assert error_of(TopicFilter, "orders[").name == "INVALID_REQUEST"

    def test_collision_characters(self) -> None:
        assert has_collision_chars("my.events") and has_collision_chars("my_events")
        assert not has_collision_chars("orders-eu")


class TestBootstrap:
    def test_host_port_list(self) -> None:
        assert parse_bootstrap("127.0.0.1:9093, localhost:9095") == [
            ControllerAddress("127.0.0.1", 9093),
            ControllerAddress("localhost", 9095),
        ]

    def test_voter_form_names_the_controller_id(self) -> None:
        assert parse_bootstrap("1@h1:9093,2@h2:9093") == [
            ControllerAddress("h1", 9093, 1),
            ControllerAddress("h2", 9093, 2),
        ]

    def test_ipv6_in_brackets(self) -> None:
        [address] = parse_bootstrap("[::1]:9093")
        assert (address.host, address.port, address.target) == ("::1", 9093, "[::1]:9093")

    @pytest.mark.parametrize("text", ["", "host", "host:", ":9093", "h:0", "h:99999", "x@h:1"])
    def test_bad_addresses(self, text: str) -> None:
        with pytest.raises(ValueError):
            parse_bootstrap(text)


class TestAddConfig:
    def test_pairs_with_kafkas_square_brackets_for_list_values(self) -> None:
        assert parse_add_config("a=b,c=[d,e ,f],g=[h,i]") == {"a": "b", "c": "d,e ,f", "g": "h,i"}

    def test_an_empty_value_spaces_around_equals_and_a_trailing_comma(self) -> None:
        assert parse_add_config("k=,x = y,") == {"k": "", "x": "y"}

    def test_an_equals_sign_inside_brackets_is_part_of_the_value(self) -> None:
        assert parse_add_config("a=[x=y]") == {"a": "x=y"}

    def test_the_last_value_of_a_key_wins(self) -> None:
        assert parse_add_config("a=1,a=2") == {"a": "2"}

    @pytest.mark.parametrize("text", ["a=b=c", "a", "", "a=1,b"])
    def test_anything_else_is_kafkas_message(self, text: str) -> None:
        error = error_of(parse_add_config, text)
        assert error.name == "INVALID_CONFIG"
        assert error.message == (
            'Invalid entity config: all configs to be added must be in the format "key=val" '
            'or  "key=[val1,val2]" to group values which contain commas.'
        )

    def test_keys_are_letters_digits_and_dot_underscore_dash_dollar(self) -> None:
        assert parse_add_config("a.b_c-d$e=1") == {"a.b_c-d$e": "1"}
        error = error_of(parse_add_config, "a b=1")
        assert (error.name, error.message) == (
            "INVALID_CONFIG",
            "Invalid character found for config key: a b",
        )


class TestPropertiesFile:
    def test_javas_properties_format(self) -> None:
        text = "# comment\n! comment\na=1\nb : 2\nc 3\nd=long \\\n   value\nf=\\u0041\\tB\ng\n\n"
        assert parse_properties(text) == {
            "a": "1",
            "b": "2",
            "c": "3",
            "d": "long value",
            "f": "A\tB",
            "g": "",
        }

    def test_brackets_are_kept_and_keys_checked(self) -> None:
        assert parse_properties("cleanup.policy=[compact]") == {"cleanup.policy": "[compact]"}
        assert error_of(parse_properties, "a\\ b=1").name == "INVALID_CONFIG"


def test_delete_config_splits_commas_of_every_occurrence() -> None:
    assert parse_delete_config(["a, b", "c,"]) == ["a", "b", "c"]


class TestElectionJson:
    def test_kafkas_format(self) -> None:
        text = (
            '{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "bar", "partition": 0}]}'
        )
        assert parse_election_partitions(text) == [("foo", 1), ("bar", 0)]

    @pytest.mark.parametrize(
        "text, message",
        [
            ("null", "Replica election data is empty"),
            ("{}", "Replica election data is empty"),
            ('{"topics": []}', 'Replica election data is missing "partitions" field'),
            (
                '{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 0}]}',
                "Replica election data contains duplicate partitions: [a-0]",
            ),
        ],
    )
    def test_kafkas_complaints(self, text: str, message: str) -> None:
        error = error_of(parse_election_partitions, text)
        assert (error.name, error.message) == ("INVALID_REQUEST", message)

    @pytest.mark.parametrize(
        "text",
        [
            "{",
            "[]",
            '{"partitions": {}}',
            '{"partitions": [{"topic": "a"}]}',
            '{"partitions": [{"topic": 1, "partition": 0}]}',
            '{"partitions": [{"topic": "a", "partition": "0"}]}',
            '{"partitions": [{"topic": "a", "partition": true}]}',
        ],
    )
    def test_malformed_files_are_invalid_requests(self, text: str) -> None:
        assert error_of(parse_election_partitions, text).name == "INVALID_REQUEST"


class TestTopicsToMoveJson:
    def test_kafkas_format(self) -> None:
        text = '{"topics": [{"topic": "foo"}, {"topic": "bar"}], "version": 1}'
        assert parse_topics_to_move(text) == ["foo", "bar"]
        assert parse_topics_to_move('{"version": 1}') == []

    def test_duplicates_and_other_versions_are_refused(self) -> None:
        error = error_of(parse_topics_to_move, '{"topics": [{"topic": "a"}, {"topic": "a"}]}')
        assert error.message == "List of topics to reassign contains duplicate entries: [a]"
        error = error_of(parse_topics_to_move, '{"topics": [], "version": 2}')
        assert error.message == "Not supported version field value 2"


class TestReassignmentJson:
    def test_what_generate_prints_reads_back(self) -> None:
        text = (
            '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2],'
            '"log_dirs":["any","any"]},{"topic":"a","partition":1,"replicas":[3]}]}'
        )
        assert parse_reassignment(text) == [(("a", 0), [1, 2]), (("a", 1), [3])]

    def test_log_dirs_must_match_the_replicas_and_be_any(self) -> None:
        error = error_of(
            parse_reassignment,
            '{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
        )
        assert (error.name, error.message) == (
            "INVALID_REPLICA_ASSIGNMENT",
            "Size of replicas list [1, 2] is different from size of log dirs list [any] for "
            "partition a-0",
        )
        error = error_of(
            parse_reassignment,
            '{"partitions":[{"topic":"a","partition":0,"replicas":[1],"log_dirs":["/d"]}]}',
        )
        assert error.name == "INVALID_REQUEST" and "log_dirs" in error.message

    @pytest.mark.parametrize(
        "text",
        [
            "nope",
            '{"version": 2}',
            '{"partitions":[{"topic":"a","partition":0}]}',
            '{"partitions":[{"topic":"a","partition":0,"replicas":["1"]}]}',
        ],
    )
    def test_malformed_files_are_invalid_requests(self, text: str) -> None:
        assert error_of(parse_reassignment, text).name == "INVALID_REQUEST"

    @pytest.mark.parametrize(
        "parts, message",
        [
            ([], "Partition reassignment list cannot be empty"),
            ([(("a", 0), [])], "Partition replica list cannot be empty"),
            (
                [(("a", 0), [1]), (("a", 0), [2])],
                "Partition reassignment contains duplicate topic partitions: a-0",
            ),
            (
                [(("a", 0), [1, 1]), (("b", 1), [2, 3, 2, 3])],
                "Partition replica lists may not contain duplicate entries: a-0 contains "
                "multiple entries for 1. b-1 contains multiple entries for 2,3",
            ),
        ],
    )
    def test_execute_refuses_what_kafka_refuses(self, parts: list, message: str) -> None:
        error = error_of(check_reassignment, parts)
        assert (error.name, error.message) == ("INVALID_REPLICA_ASSIGNMENT", message)

    def test_a_good_reassignment_becomes_a_mapping(self) -> None:
        assert check_reassignment([(("a", 0), [1, 2])]) == {("a", 0): [1, 2]}


class TestBrokerList:
    def test_ids_in_order(self) -> None:
        assert parse_broker_list("3, 1,2") == [3, 1, 2]

    def test_bad_ids_and_duplicates(self) -> None:
        assert error_of(parse_broker_list, "1,x").message == (
            "Invalid broker list '1,x': 'x' is not a broker id."
        )
        assert error_of(parse_broker_list, "1,2,1").message == (
            "Broker list contains duplicate entries: [1]"
        )
