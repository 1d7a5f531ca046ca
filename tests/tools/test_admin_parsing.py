"""The admin tools' argument values, read as Kafka's tools read them."""

from __future__ import annotations

import pytest

from strom.admin_errors import AdminError
from strom.admin_parsing import (
    TopicFilter,
    check_new_topic_counts,
    has_collision_chars,
    parse_replica_assignment,
    parse_topic_configs,
)
from strom.controller_client import ControllerAddress, parse_bootstrap


def error_of(fn, *args) -> AdminError:
    with pytest.raises(AdminError) as info:
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
