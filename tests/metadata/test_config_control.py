"""IncrementalAlterConfigs and DescribeConfigs: the records replay to the configs asked for,
every refusal is Kafka's error naming the key, and describe resolves values and sources in
Kafka's order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.config_control import (
    DYNAMIC_BROKER_CONFIGS,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    OpType,
    describe_configs,
    incremental_alter_configs,
)
from metadata.delta import MetadataDelta
from metadata.errors import ApiError
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.topic_configs import REPLICATION_CONFIGS
from storage.config import BROKER_SYNONYMS, LogConfig
from strom_api.v1 import metadata_pb2 as pb

SET, DELETE, APPEND, SUBTRACT = OpType.SET, OpType.DELETE, OpType.APPEND, OpType.SUBTRACT
TOPIC = (pb.TOPIC, "orders")
DEFAULT = (pb.BROKER, "")
BROKER_1 = (pb.BROKER, "1")
S = ConfigSource


def commit(image: MetadataImage, records) -> MetadataImage:
    return MetadataDelta(image).replay_all(records).apply(image.offset + len(records), 1)


def base_image() -> MetadataImage:
    """Brokers 1 and 2, topic "orders" with one partition."""
    records = [
        pb.RegisterBrokerRecord(broker_id=1, broker_epoch=1),
        pb.RegisterBrokerRecord(broker_id=2, broker_epoch=2),
        pb.TopicRecord(name="orders", topic_id=b"\x01" * 16),
        pb.PartitionRecord(
            partition_id=0, topic_id=b"\x01" * 16, replicas=[1, 2], isr=[1, 2], leader=1
        ),
    ]
    return commit(EMPTY_IMAGE, records)


IMAGE = base_image()


def alter(image, changes, **kwargs):
    """Runs the operation, commits its records and returns (image after, results)."""
    records, results = incremental_alter_configs(image, changes, **kwargs)
    return commit(image, records), results


def ok(image, changes) -> MetadataImage:
    after, results = alter(image, changes)
    assert all(error is None for error in results.values()), results
    return after


def error_of(image, resource, ops) -> ApiError:
    records, results = incremental_alter_configs(image, {resource: ops})
    error = results[resource]
    assert error is not None and records == []
    return error


def entry(entries: list[ConfigEntry], name: str) -> ConfigEntry:
    (found,) = [e for e in entries if e.name == name]
    return found


# --- the four op types -------------------------------------------------------------------


def test_set_writes_one_record_per_changed_key_and_replays_to_the_values():
    records, results = incremental_alter_configs(
        IMAGE, {TOPIC: [("retention.ms", SET, "1000"), ("min.insync.replicas", SET, "2")]}
    )
    assert results == {TOPIC: None}
    assert records == [
        pb.ConfigRecord(resource_type=pb.TOPIC, resource_name="orders", name=k, value=v)
        for k, v in (("retention.ms", "1000"), ("min.insync.replicas", "2"))
    ]
    after = commit(IMAGE, records)
    assert after.configs.of(*TOPIC) == {"retention.ms": "1000", "min.insync.replicas": "2"}


def test_setting_a_topic_key_to_its_current_value_writes_nothing():
    image = ok(IMAGE, {TOPIC: [("retention.ms", SET, "1000")]})
    records, results = incremental_alter_configs(image, {TOPIC: [("retention.ms", SET, "1000")]})
    assert results == {TOPIC: None} and records == []


def test_a_broker_key_is_written_even_when_unchanged():
    # KAFKA-14136: the record is what makes brokers reload the config.
    image = ok(IMAGE, {BROKER_1: [("num.replica.fetchers", SET, "4")]})
    records, _ = incremental_alter_configs(image, {BROKER_1: [("num.replica.fetchers", SET, "4")]})
    assert len(records) == 1


def test_delete_writes_a_record_without_value_that_removes_the_key():
    image = ok(IMAGE, {TOPIC: [("retention.ms", SET, "1000"), ("retention.bytes", SET, "5")]})
    records, _ = incremental_alter_configs(image, {TOPIC: [("retention.ms", DELETE, None)]})
    (record,) = records
    assert record.name == "retention.ms" and not record.HasField("value")
    assert commit(image, records).configs.of(*TOPIC) == {"retention.bytes": "5"}


def test_deleting_an_unset_topic_key_writes_nothing():
    records, results = incremental_alter_configs(IMAGE, {TOPIC: [("retention.ms", DELETE, None)]})
    assert results == {TOPIC: None} and records == []


def test_append_starts_from_kafkas_default_and_adds_only_missing_items():
    image = ok(IMAGE, {TOPIC: [("cleanup.policy", APPEND, "compact")]})
    assert image.configs.of(*TOPIC) == {"cleanup.policy": "delete,compact"}
    records, _ = incremental_alter_configs(image, {TOPIC: [("cleanup.policy", APPEND, "delete")]})
    assert records == []  # already there: unchanged


def test_subtract_removes_items():
    image = ok(IMAGE, {TOPIC: [("cleanup.policy", SET, "compact,delete")]})
    image = ok(image, {TOPIC: [("cleanup.policy", SUBTRACT, "delete")]})
    assert image.configs.of(*TOPIC) == {"cleanup.policy": "compact"}


def test_subtracting_every_item_leaves_an_invalid_empty_policy():
    error = error_of(IMAGE, TOPIC, [("cleanup.policy", SUBTRACT, "delete")])
    assert error.error_name == "INVALID_CONFIG" and "cleanup.policy" in error.message


def test_append_to_a_broker_list_config():
    image = ok(IMAGE, {DEFAULT: [("log.cleanup.policy", APPEND, "compact")]})
    assert image.configs.of(*DEFAULT) == {"log.cleanup.policy": "delete,compact"}


@pytest.mark.parametrize("op", [APPEND, SUBTRACT])
def test_append_and_subtract_are_for_list_configs_only(op):
    error = error_of(IMAGE, TOPIC, [("retention.ms", op, "1")])
    assert error.error_name == "INVALID_CONFIG"
    assert error.message == f"Can't {op.name} to key retention.ms because its type is not LIST."
    error = error_of(IMAGE, BROKER_1, [("log.retention.ms", op, "1")])
    assert error.error_name == "INVALID_CONFIG"
    verb = op.name.lower()
    assert error.message == f"Config value {verb} is not allowed for config key: log.retention.ms"


def test_list_ops_know_which_resource_a_list_config_belongs_to():
    error = error_of(IMAGE, TOPIC, [("log.cleanup.policy", APPEND, "compact")])
    assert error.error_name == "INVALID_CONFIG" and "log.cleanup.policy" in error.message
    error = error_of(IMAGE, DEFAULT, [("cleanup.policy", APPEND, "compact")])
    assert error.message == "Unknown broker config 'cleanup.policy'"


# --- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retention.ms", "abc"),
        ("retention.ms", "-2"),
        ("segment.bytes", "1"),
        ("cleanup.policy", "shred"),
        ("min.insync.replicas", "0"),
        ("compression.type", "brotli"),
        ("unclean.leader.election.enable", "yes"),
    ],
)
def test_a_bad_topic_value_is_invalid_config_naming_key_and_value(key, value):
    error = error_of(IMAGE, TOPIC, [(key, SET, value)])
    assert error.error_name == "INVALID_CONFIG"
    assert key in error.message and value in error.message


def test_an_unknown_topic_config_is_invalid_config():
    error = error_of(IMAGE, TOPIC, [("retention.hours", SET, "1")])
    assert error.error_name == "INVALID_CONFIG" and "retention.hours" in error.message


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("log.retention.ms", "abc", "a long >= -1"),
        ("log.segment.bytes", "1", "an int in [14, 2^31-1]"),
        ("log.cleanup.policy", "shred", "delete, compact or both"),
        ("min.insync.replicas", "0", "an int >= 1"),
        ("num.replica.fetchers", "0", "an int >= 1"),
        ("replica.fetch.max.bytes", "x", "an int >= 0"),
    ],
)
def test_a_bad_broker_value_is_invalid_config_naming_the_broker_key(key, value, rule):
    for resource in (DEFAULT, BROKER_1):
        error = error_of(IMAGE, resource, [(key, SET, value)])
        assert error.error_name == "INVALID_CONFIG"
        assert error.message.startswith(f"Invalid value {value} for configuration {key}: ")
        assert error.message.endswith(rule)


def test_every_dynamic_broker_config_takes_its_own_default():
    ops = [(k, SET, c.default) for k, c in DYNAMIC_BROKER_CONFIGS.items() if c.default is not None]
    assert ok(IMAGE, {DEFAULT: ops}).configs.of(*DEFAULT) == {k: v for k, _, v in ops}


def test_an_unknown_broker_config_is_refused():
    error = error_of(IMAGE, DEFAULT, [("log.retention.msec", SET, "1")])
    assert error.error_name == "INVALID_CONFIG"
    assert error.message == "Unknown broker config 'log.retention.msec'"


@pytest.mark.parametrize("key", ["log.retention.hours", "node.id", "listeners"])
def test_a_static_broker_config_cannot_be_updated_dynamically(key):
    error = error_of(IMAGE, BROKER_1, [(key, SET, "1")])
    assert error.error_name == "INVALID_REQUEST"
    assert error.message == f"Cannot update these configs dynamically: Set({key})"


def test_one_bad_key_fails_the_whole_resource():
    error = error_of(IMAGE, TOPIC, [("retention.ms", SET, "1000"), ("segment.bytes", SET, "1")])
    assert "segment.bytes" in error.message


def test_a_change_is_validated_with_the_resources_other_configs():
    image = ok(IMAGE, {TOPIC: [("retention.ms", SET, "1000")]})
    # Deleting one key and setting another: the resulting set is what gets checked.
    image = ok(image, {TOPIC: [("retention.ms", DELETE, None), ("flush.ms", SET, "10")]})
    assert image.configs.of(*TOPIC) == {"flush.ms": "10"}


# --- resources ---------------------------------------------------------------------------


def test_an_unknown_topic():
    error = error_of(IMAGE, (pb.TOPIC, "nope"), [("retention.ms", SET, "1")])
    assert error.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert error.message == "The topic 'nope' does not exist."


def test_configs_are_checked_before_the_topic_exists():
    # Kafka's controller validates the configs, then looks the resource up.
    error = error_of(IMAGE, (pb.TOPIC, "nope"), [("retention.ms", SET, "x")])
    assert error.error_name == "INVALID_CONFIG"


@pytest.mark.parametrize(
    ("name", "error_name", "message"),
    [
        ("", "INVALID_REQUEST", "Default topic resources are not allowed."),
        ("bad name!", "INVALID_TOPIC_EXCEPTION", None),
    ],
)
def test_bad_topic_resource_names(name, error_name, message):
    error = error_of(IMAGE, (pb.TOPIC, name), [("retention.ms", SET, "1")])
    assert error.error_name == error_name
    assert message is None or error.message == message


@pytest.mark.parametrize(
    ("name", "error_name", "message"),
    [
        ("blah", "INVALID_REQUEST", "Unable to parse broker name as a base 10 number."),
        ("03", "INVALID_REQUEST", "Unable to parse broker name as a base 10 number."),
        ("99999999999", "INVALID_REQUEST", "Unable to parse broker name as a base 10 number."),
        ("-1", "INVALID_REQUEST", "Invalid negative broker ID."),
        ("9", "BROKER_ID_NOT_REGISTERED", "No node with id 9 found."),
    ],
)
def test_bad_broker_resource_names(name, error_name, message):
    error = error_of(IMAGE, (pb.BROKER, name), [("num.replica.fetchers", SET, "2")])
    assert (error.error_name, error.message) == (error_name, message)


def test_an_unknown_resource_type():
    error = error_of(IMAGE, (7, "x"), [("a", SET, "1")])
    assert (error.error_name, error.message) == ("INVALID_REQUEST", "Unknown resource type 7")


def test_a_resource_named_twice_fails_and_the_others_go_ahead():
    changes = [
        (TOPIC, [("retention.ms", SET, "1")]),
        (BROKER_1, [("num.replica.fetchers", SET, "2")]),
        (TOPIC, [("retention.ms", SET, "2")]),
    ]
    image, results = alter(IMAGE, changes)
    assert results[BROKER_1] is None
    error = results[TOPIC]
    assert error is not None and error.error_name == "INVALID_REQUEST"
    assert error.message == "Each resource must appear at most once."
    assert image.configs.of(*TOPIC) == {}
    assert image.configs.of(*BROKER_1) == {"num.replica.fetchers": "2"}


def test_a_failed_resource_does_not_stop_the_others():
    image, results = alter(
        IMAGE,
        {
            TOPIC: [("retention.ms", SET, "x")],
            DEFAULT: [("log.retention.ms", SET, "5000")],
        },
    )
    assert results[TOPIC] is not None and results[DEFAULT] is None
    assert image.configs.of(*TOPIC) == {}
    assert image.configs.of(*DEFAULT) == {"log.retention.ms": "5000"}


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        (
            [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)],
            "Error due to duplicate config keys",
        ),
        ([("retention.ms", SET, None)], "Null value not supported for : retention.ms"),
        ([("retention.ms", 7, "1")], "Unknown operations type 7"),
    ],
)
def test_malformed_requests_are_invalid_request(ops, message):
    error = error_of(IMAGE, TOPIC, ops)
    assert (error.error_name, error.message) == ("INVALID_REQUEST", message)


def test_validate_only_gives_the_same_results_and_writes_nothing():
    changes = {
        TOPIC: [("retention.ms", SET, "1000")],
        BROKER_1: [("num.replica.fetchers", SET, "0")],
        DEFAULT: [("log.retention.ms", SET, "1")],
    }
    records, results = incremental_alter_configs(IMAGE, changes, validate_only=True)
    _, real = incremental_alter_configs(IMAGE, changes)
    assert records == []
    assert {r: e and e.error_name for r, e in results.items()} == {
        r: e and e.error_name for r, e in real.items()
    }
    assert results[TOPIC] is None and results[BROKER_1] is not None


# A model of the ops on one topic, checked against records committed and replayed.
_OPS = st.one_of(
    st.tuples(st.just("retention.ms"), st.just(SET), st.integers(-1, 10**12).map(str)),
    st.tuples(st.just("retention.ms"), st.just(DELETE), st.none()),
    st.tuples(
        st.just("cleanup.policy"),
        st.sampled_from([APPEND, SUBTRACT]),
        st.sampled_from(["compact", "delete"]),
    ),
    st.tuples(st.just("cleanup.policy"), st.just(DELETE), st.none()),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_OPS, max_size=2, unique_by=lambda op: op[0]), max_size=8))
def test_records_replay_to_the_configs_asked_for(requests):
    image, model = IMAGE, {}
    for ops in requests:
        expected = dict(model)
        for key, op, value in ops:
            if op == SET:
                expected[key] = value
            elif op == DELETE:
                expected.pop(key, None)
            else:
                parts = expected.get(key, "delete").split(",")
                if op == APPEND and value not in parts:
                    parts.append(value)
                elif op == SUBTRACT and value in parts:
                    parts.remove(value)
                expected[key] = ",".join(p for p in parts if p)
        image, results = alter(image, {TOPIC: ops})
        if expected.get("cleanup.policy") == "":
            assert results[TOPIC] is not None  # an empty policy is refused, nothing written
        else:
            assert results[TOPIC] is None
            model = expected
        assert image.configs.of(*TOPIC) == model


# --- DescribeConfigs ---------------------------------------------------------------------


def test_a_topic_shows_every_topic_config_with_kafkas_defaults():
    entries = describe_configs(IMAGE, TOPIC)
    names = [e.name for e in entries]
    assert names == sorted(set(LogConfig().to_properties()) | set(REPLICATION_CONFIGS))
    retention = entry(entries, "retention.ms")
    assert (retention.value, retention.source, retention.read_only) == (
        "604800000",
        S.DEFAULT_CONFIG,
        False,
    )
    # Kafka's log.retention.hours=168 is what decides it.
    assert retention.synonyms == (ConfigSynonym("log.retention.hours", "168", S.DEFAULT_CONFIG),)
    assert entry(entries, "cleanup.policy").value == "delete"
    assert entry(entries, "min.insync.replicas").value == "1"
    assert all(e.source == S.DEFAULT_CONFIG for e in entries)


def test_topic_precedence_follows_kafka():
    static = {"log.retention.ms": "4000"}
    image = IMAGE

    def retention(broker_id=1):
        e = entry(describe_configs(image, TOPIC, static, broker_id=broker_id), "retention.ms")
        return e.value, e.source

    assert retention() == ("4000", S.STATIC_BROKER_CONFIG)
    image = ok(image, {DEFAULT: [("log.retention.ms", SET, "3000")]})
    assert retention() == ("3000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    image = ok(image, {BROKER_1: [("log.retention.ms", SET, "2000")]})
    assert retention() == ("2000", S.DYNAMIC_BROKER_CONFIG)
    assert retention(broker_id=2) == ("3000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert retention(broker_id=None) == ("3000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    image = ok(image, {TOPIC: [("retention.ms", SET, "1000")]})
    assert retention() == ("1000", S.DYNAMIC_TOPIC_CONFIG)

    e = entry(describe_configs(image, TOPIC, static, broker_id=1), "retention.ms")
    assert e.synonyms == (
        ConfigSynonym("retention.ms", "1000", S.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.retention.ms", "2000", S.DYNAMIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.ms", "3000", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigSynonym("log.retention.ms", "4000", S.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", S.DEFAULT_CONFIG),
    )

    image = ok(image, {TOPIC: [("retention.ms", DELETE, None)]})
    assert retention() == ("2000", S.DYNAMIC_BROKER_CONFIG)


@pytest.mark.parametrize(
    ("static", "value"),
    [
        ({"log.retention.hours": "24"}, str(24 * 3_600_000)),
        ({"log.retention.hours": "24", "log.retention.minutes": "30"}, str(30 * 60_000)),
        ({"log.retention.hours": "24", "log.retention.ms": "5"}, "5"),
        ({"log.retention.hours": "-1"}, "-1"),
    ],
)
def test_the_finest_static_retention_unit_wins(static, value):
    e = entry(describe_configs(IMAGE, TOPIC, static), "retention.ms")
    assert (e.value, e.source) == (value, S.STATIC_BROKER_CONFIG)


def test_a_dynamic_retention_beats_static_coarser_units():
    image = ok(IMAGE, {DEFAULT: [("log.retention.ms", SET, "7")]})
    e = entry(describe_configs(image, TOPIC, {"log.retention.hours": "1"}), "retention.ms")
    assert (e.value, e.source) == ("7", S.DYNAMIC_DEFAULT_BROKER_CONFIG)


@pytest.mark.parametrize(("broker_name", "topic_name"), sorted(BROKER_SYNONYMS.items()))
def test_every_log_synonym_sets_its_topic_config(broker_name, topic_name):
    value = "compact" if topic_name == "cleanup.policy" else "12345"
    image = ok(IMAGE, {DEFAULT: [(broker_name, SET, value)]})
    e = entry(describe_configs(image, TOPIC), topic_name)
    assert (e.value, e.source) == (value, S.DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_list_values_are_comma_joined():
    image = ok(IMAGE, {TOPIC: [("cleanup.policy", SET, "compact, delete")]})
    e = entry(describe_configs(image, TOPIC), "cleanup.policy")
    assert e.value == "compact,delete"


def test_keys_limit_the_entries():
    entries = describe_configs(IMAGE, TOPIC, keys=["retention.ms", "segment.bytes", "nope"])
    assert [e.name for e in entries] == ["retention.ms", "segment.bytes"]


def test_a_deleted_topics_configs_are_gone():
    image = ok(IMAGE, {TOPIC: [("retention.ms", SET, "1000")]})
    image = commit(image, [pb.RemoveTopicRecord(topic_id=b"\x01" * 16)])
    assert image.configs.of(*TOPIC) == {}
    with pytest.raises(ApiError) as raised:
        describe_configs(image, TOPIC)
    assert raised.value.error_name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_the_cluster_default_resource_shows_only_what_is_set_in_it():
    assert describe_configs(IMAGE, DEFAULT) == []
    image = ok(IMAGE, {DEFAULT: [("log.retention.ms", SET, "9")]})
    assert describe_configs(image, DEFAULT, {"log.retention.ms": "1"}) == [
        ConfigEntry(
            "log.retention.ms",
            "9",
            S.DYNAMIC_DEFAULT_BROKER_CONFIG,
            read_only=False,
            synonyms=(ConfigSynonym("log.retention.ms", "9", S.DYNAMIC_DEFAULT_BROKER_CONFIG),),
        )
    ]


def test_a_broker_shows_its_configs_with_sources_and_read_only():
    image = ok(IMAGE, {DEFAULT: [("num.replica.fetchers", SET, "3")]})
    image = ok(image, {BROKER_1: [("min.insync.replicas", SET, "2")]})
    static = {"node.id": "1", "num.replica.fetchers": "2", "log.retention.hours": "24"}
    entries = describe_configs(image, BROKER_1, static)

    def shown(name):
        e = entry(entries, name)
        return e.value, e.source, e.read_only

    assert shown("min.insync.replicas") == ("2", S.DYNAMIC_BROKER_CONFIG, False)
    assert shown("num.replica.fetchers") == ("3", S.DYNAMIC_DEFAULT_BROKER_CONFIG, False)
    assert shown("node.id") == ("1", S.STATIC_BROKER_CONFIG, True)
    assert shown("log.retention.hours") == ("24", S.STATIC_BROKER_CONFIG, True)
    assert shown("log.segment.bytes") == ("1073741824", S.DEFAULT_CONFIG, False)
    # Kafka has no default for log.retention.ms (log.retention.hours stands in): null.
    assert shown("log.retention.ms") == (None, S.DEFAULT_CONFIG, False)
    # Another broker's dynamic config is not this one's.
    other = entry(describe_configs(image, (pb.BROKER, "2"), static), "min.insync.replicas")
    assert (other.value, other.source) == ("1", S.DEFAULT_CONFIG)


def test_describe_errors():
    with pytest.raises(ApiError) as raised:
        describe_configs(IMAGE, (pb.BROKER, "x"))
    assert raised.value.error_name == "INVALID_REQUEST"
    assert raised.value.message == "Broker id must be an integer, but it is: x"
    with pytest.raises(ApiError) as raised:
        describe_configs(IMAGE, (pb.TOPIC, "nope"))
    assert raised.value.error_name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_replace_leaves_a_resource_exactly_the_configs_set():
    """Kafka's legacy AlterConfigs: what the request does not name is deleted."""
    image = ok(IMAGE, {TOPIC: [("retention.ms", SET, "1000"), ("segment.ms", SET, "5000")]})
    records, results = incremental_alter_configs(
        image, {TOPIC: [("retention.bytes", SET, "2048")]}, replace=True
    )
    assert results == {TOPIC: None}
    after = commit(image, records)
    assert dict(after.configs.of(*TOPIC)) == {"retention.bytes": "2048"}
    _, bad = incremental_alter_configs(image, {TOPIC: [("retention.ms", SET, "x")]}, replace=True)
    assert bad[TOPIC] is not None and bad[TOPIC].error_name == "INVALID_CONFIG"
