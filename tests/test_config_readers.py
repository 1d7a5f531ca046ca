"""No config key, flag or option is accepted without code that reads it (issue 17: several
were validated, stored, reported as set, and did nothing).

For every kind of setting — server.properties keys, dynamic broker configs, topic configs,
client constructor parameters, Spark options and `strom` command-line options — the key
must reach a reader in the product code (tests/config_readers.py says what counts as a
read). A key Strom deliberately does not apply is in server/unapplied_configs.py, is logged
as such when set, and is listed in README. The check is by reading the code, so it catches
a new key the day it is added without a reader; the behaviour of each key is tested where
the key is applied."""

from __future__ import annotations

import ast
import dataclasses

import pytest

import metadata.config_control as config_control
import pyspark_strom.options as spark_options
import raft.config as raft_config
import server.server_config as server_config
import storage.config as storage_config
from broker.topic_settings import TopicSettings
from metadata.topic_configs import REPLICATION_CONFIGS
from server.unapplied_configs import NOT_APPLIED, not_applied_warning
from tests.config_readers import (
    ROOT,
    CodeIndex,
    cli_options,
    init_parameters_unread,
    product_index,
)

SERVER_CONFIG = "server/server_config.py"


@pytest.fixture(scope="module")
def index() -> CodeIndex:
    return product_index()


def test_server_properties_keys_reach_the_attribute_that_is_read(index):
    tables = [
        (server_config._REPLICA_KEYS, "ReplicaConfig"),
        (server_config._CONTROLLER_KEYS, "ControllerConfig"),
        (server_config._GROUP_KEYS, "GroupConfig"),
        (raft_config._NAMES, "RaftConfig"),
    ]
    unread = [
        f"{key} ({cls}.{attr})"
        for table, cls in tables
        for key, attr in table.items()
        if not index.reads_attribute(attr, outside=[SERVER_CONFIG])
    ]
    assert unread == [], "server.properties keys stored and never read"


def _mapped_keys() -> set[str]:
    return {
        *server_config._REPLICA_KEYS,
        *server_config._CONTROLLER_KEYS,
        *server_config._GROUP_KEYS,
        *raft_config._NAMES,
    }


def test_node_and_static_broker_keys_are_looked_up(index):
    # The effective topic configs read every key of storage's synonym tables (log.* names
    # of topic configs, and the coarser units of log.retention.ms and log.roll.ms).
    effective = ast.parse((ROOT / "metadata/config_control.py").read_text(encoding="utf-8"))
    names = {n.id for n in ast.walk(effective) if isinstance(n, ast.Name)}
    assert {"BROKER_SYNONYMS", "UNIT_SYNONYMS"} <= names
    synonyms = set(storage_config.BROKER_SYNONYMS) | {
        key for forms in storage_config.UNIT_SYNONYMS.values() for key, _ in forms
    }
    keys = set(server_config._NODE_KEYS) | set(config_control.STATIC_BROKER_CONFIGS)
    keys -= _mapped_keys() | synonyms
    unread = sorted(k for k in keys if not index.reads_string(k))
    assert unread == [], "node keys accepted and never looked up"


def test_listener_security_keys_are_read(index):
    """Every ssl.* key a listener accepts (listener_security.SSL_KEYS, also under
    listener.name.<name>.) is looked up where the listener's TLS is built."""
    from server.listener_security import SSL_KEYS

    module = "server/listener_security.py"
    unread = [k for k in SSL_KEYS if module not in index.reads_string(k)]
    assert unread == [], "listener ssl.* keys accepted and never looked up"
    assert module in index.reads_string("listener.security.protocol.map")


def test_dynamic_broker_configs_are_read_at_runtime(index):
    """A dynamic broker config without a topic synonym must be looked up outside
    server.properties parsing, where its per-broker and cluster-wide values are applied."""
    unread = sorted(
        key
        for key, spec in config_control.DYNAMIC_BROKER_CONFIGS.items()
        if spec.topic_synonym is None and not index.reads_string(key, outside=[SERVER_CONFIG])
    )
    assert unread == [], "dynamic broker configs accepted and read by nothing"


def test_topic_configs_are_read_by_the_broker_or_controller(index):
    validation = ["metadata/topic_configs.py", "metadata/config_control.py"]
    unread = [
        key
        for key in REPLICATION_CONFIGS
        if not {
            m
            for m in index.reads_string(key, outside=validation)
            if m.split("/")[0] in ("broker", "metadata", "storage")
        }
    ]
    unread += [
        f"{name} (LogConfig.{spec[0]})"
        for name, spec in storage_config._SPECS.items()
        if not index.reads_attribute(spec[0])
    ]
    unread += [
        f"TopicSettings.{f.name}"
        for f in dataclasses.fields(TopicSettings)
        if not index.reads_attribute(f.name, outside=["broker/topic_settings.py"])
    ]
    assert unread == [], "topic configs accepted and read by nothing"


@pytest.mark.parametrize(
    ("module", "cls"),
    [
        ("strom/producer.py", "Producer"),
        ("strom/consumer.py", "Consumer"),
        ("strom/admin.py", "AdminClient"),
    ],
)
def test_client_parameters_are_applied(index, module, cls):
    source = (ROOT / module).read_text(encoding="utf-8")
    assert init_parameters_unread(source, cls, index) == []


def test_spark_options_are_applied(index):
    fields = dataclasses.fields(spark_options.Options) + dataclasses.fields(
        spark_options.WriteOptions
    )
    unread = [
        f.name
        for f in fields
        if not index.reads_attribute(f.name, outside=["pyspark_strom/options.py"])
    ]
    assert unread == [], "Spark options parsed and never used"


def test_command_line_options_are_read(index):
    options = cli_options()
    # The tools moved from strom/ to strom_tools/ and this test, still looking in strom/,
    # checked no option at all: a floor keeps it from passing on nothing again.
    assert len(options) > 100
    unread = [
        f"{o.module}: {'/'.join(o.flags)}"
        for o in options
        if not (
            {m for m in index.reads_attribute(o.dest) if m.startswith("strom_tools/")}
            or {m for m in index.strings.get(o.dest, ()) if m.startswith("strom_tools/")}
        )
    ]
    assert unread == [], "command-line options accepted and never read"


def test_keys_strom_does_not_apply_are_logged_and_documented():
    config = server_config.from_properties(
        {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": "/tmp/strom-test",
            **{key: "1" for key in NOT_APPLIED},
        }
    )
    assert config.not_applied == tuple(sorted(NOT_APPLIED))
    assert config.unknown == ()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for key in NOT_APPLIED:
        assert key in not_applied_warning(key)
        assert f"`{key}`" in readme, f"README does not list {key} as not applied"
    accepted = _mapped_keys() | set(config_control.DYNAMIC_BROKER_CONFIGS)
    assert not accepted & set(NOT_APPLIED), "a key both applied and listed as not applied"


def test_the_check_catches_a_key_without_a_reader():
    """The index itself: a key only declared is not read; a key looked up is."""
    index = CodeIndex()
    index.add(
        "broker/example.py",
        "KEYS = {'declared.only': 1}\n"
        "def f(props):\n"
        "    props['looked.up']\n"
        "    return props.get('got.too')\n",
    )
    assert not index.reads_string("declared.only")
    assert index.reads_string("looked.up") and index.reads_string("got.too")
    source = (
        "class C:\n"
        "    def __init__(self, checked=1, stored=2, passed=3):\n"
        "        if checked < 0:\n"
        "            raise ValueError\n"
        "        self.stored_here = stored\n"
        "        print(passed)\n"
    )
    assert init_parameters_unread(source, "C", index) == ["checked", "stored"]


def test_producer_properties_name_producer_parameters():
    """Kafka producer properties (console-producer's --producer-property, producer-perf-test,
    the Spark writer's kafka.* options) become Producer keyword arguments; each must be one,
    so none is accepted and then dropped."""
    import inspect

    from strom.client_properties import PRODUCER_PROPERTIES, producer_settings
    from strom.producer import Producer

    parameters = set(inspect.signature(Producer).parameters)
    assert {k for k in PRODUCER_PROPERTIES if k.replace(".", "_") not in parameters} == set()
    assert set(producer_settings({"linger.ms": "5", "client.id": "c"})) <= parameters


def test_consumer_properties_name_consumer_parameters_and_parse_as_kafka_does():
    """console-consumer's --consumer-property: each name a Consumer keyword argument, each
    value read as Kafka's ConfigDef reads its type (a boolean that is neither true nor false,
    a number that is not one: INVALID_CONFIG naming the property)."""
    import inspect

    from strom.client_properties import CONSUMER_PROPERTIES, consumer_settings, producer_settings
    from strom.consumer import Consumer
    from strom.errors import StromError

    parameters = set(inspect.signature(Consumer).parameters)
    assert {k for k in CONSUMER_PROPERTIES if k.replace(".", "_") not in parameters} == set()
    assert consumer_settings(
        {
            "enable.auto.commit": "FALSE",
            "max.poll.records": "7",
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor, "
            "cooperative-sticky",
        }
    ) == {
        "enable_auto_commit": False,
        "max_poll_records": 7,
        "partition_assignment_strategy": (
            "org.apache.kafka.clients.consumer.RangeAssignor",
            "cooperative-sticky",
        ),
    }
    for read, props in (
        (consumer_settings, {"enable.auto.commit": "yes"}),
        (consumer_settings, {"fetch.min.bytes": "1k"}),
        (consumer_settings, {"no.such.property": "1"}),
        (producer_settings, {"enable.idempotence": "yes"}),  # once read as false
    ):
        try:
            read(props)
        except StromError as exc:
            assert exc.name == "INVALID_CONFIG" and next(iter(props)) in exc.message
        else:
            raise AssertionError(f"{props} was accepted")
