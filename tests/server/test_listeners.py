"""listeners, advertised.listeners and inter.broker.listener.name as Kafka checks them
(server/listeners.py): what is bound, what is registered, and one clear line for each
configuration Kafka refuses."""

from __future__ import annotations

import pytest

from server.listeners import Listener
from server.server_config import from_properties
from storage.errors import InvalidConfigError

BASE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    # Kafka refuses listener names its default map lacks (server/listener_security.py).
    "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "log.dirs": "/tmp/strom-test",
}


def test_advertised_listeners_default_to_the_broker_listeners():
    config = from_properties(BASE)
    assert [x.name for x in config.broker_listeners] == ["CLIENT", "REPLICATION"]
    assert config.advertised_listeners == tuple(config.broker_listeners)
    assert config.replica.inter_broker_listener == "CLIENT"  # the first, without the key


def test_a_pod_binds_every_interface_and_advertises_its_name():
    config = from_properties(
        {
            **BASE,
            "listeners": "CLIENT://0.0.0.0:9092,REPLICATION://:9094,CONTROLLER://0.0.0.0:9093",
            "advertised.listeners": "CLIENT://strom-0.strom.ns.svc:19092,"
            "REPLICATION://10.0.0.7:9094,CONTROLLER://strom-0.strom.ns.svc:9093",
            "inter.broker.listener.name": "REPLICATION",
        }
    )
    assert [x.address for x in config.broker_listeners] == ["0.0.0.0:9092", "0.0.0.0:9094"]
    assert config.advertised_listeners == (
        Listener("CLIENT", "strom-0.strom.ns.svc", 19092),
        Listener("REPLICATION", "10.0.0.7", 9094),
    )  # the controller's entry is accepted (Kafka 4's example has it) and not registered
    assert config.replica.inter_broker_listener == "REPLICATION"
    assert "advertised.listeners" not in config.unknown


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"listeners": "CLIENT://0.0.0.0:9092,CONTROLLER://127.0.0.1:9093"}, "0.0.0.0"),
        ({"advertised.listeners": "CLIENT://0.0.0.0:9092"}, "nonroutable meta-address"),
        ({"advertised.listeners": "CLIENT://h:1,OTHER://h:2"}, "OTHER, which 'listeners'"),
        ({"advertised.listeners": "CLIENT://h:1,CLIENT://h:2"}, "appears twice"),
        ({"inter.broker.listener.name": "NOPE"}, "'NOPE' is not one of CLIENT, REPLICATION"),
        ({"inter.broker.listener.name": "CONTROLLER"}, "inter.broker.listener.name"),
        (
            {"advertised.listeners": "CLIENT://h:1", "inter.broker.listener.name": "REPLICATION"},
            "'REPLICATION' is not one of CLIENT",
        ),
        ({"advertised.listeners": "CONTROLLER://h:9093"}, "names no broker listener"),
        ({"process.roles": "controller"}, "must only contain KRaft controller listeners"),
        ({"process.roles": "broker"}, "must not be in listeners when process.roles=broker"),
        (
            {
                "controller.listener.names": "CONTROLLER,REPLICATION",
                "listeners": "CLIENT://h:1,REPLICATION://h:2,CONTROLLER://h:3",
            },
            "listens on one",
        ),
    ],
)
def test_kafkas_refusals_are_one_line_naming_the_key(changes, words):
    with pytest.raises(InvalidConfigError, match=words) as caught:
        from_properties({**BASE, **changes})
    assert "\n" not in str(caught.value)


# --- kafka.listener.names: the broker listeners speaking Kafka's protocol (issue 20) -------

KAFKA = {
    **BASE,
    "listeners": "CLIENT://127.0.0.1:9092,KAFKA://127.0.0.1:9192,CONTROLLER://127.0.0.1:9093",
    "listener.security.protocol.map": "CLIENT:PLAINTEXT,KAFKA:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "kafka.listener.names": "KAFKA",
}


def test_a_kafka_listener_is_a_broker_listener_that_is_registered_but_not_replicated_over():
    config = from_properties(KAFKA)
    assert config.kafka_listeners == frozenset({"KAFKA"})
    assert [x.name for x in config.advertised_listeners] == ["CLIENT", "KAFKA"]
    assert [x.name for x in config.broker_listeners] == ["CLIENT", "KAFKA"]
    assert config.replica.inter_broker_listener == "CLIENT"
    assert "kafka.listener.names" not in config.unknown


def test_the_inter_broker_listener_defaults_to_the_first_grpc_one():
    config = from_properties(
        {
            **KAFKA,
            "listeners": "KAFKA://127.0.0.1:9192,CLIENT://127.0.0.1:9092,"
            "CONTROLLER://127.0.0.1:9093",
        }
    )
    assert config.replica.inter_broker_listener == "CLIENT"


def test_without_kafka_listener_names_no_listener_speaks_kafka():
    assert from_properties(BASE).kafka_listeners == frozenset()


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"kafka.listener.names": "NOPE"},
            "kafka.listener.names names 'NOPE', which is not in 'listeners' "
            "(CLIENT, KAFKA, CONTROLLER)",
        ),
        (
            {"kafka.listener.names": "CONTROLLER"},
            "kafka.listener.names names CONTROLLER, a controller listener "
            "(controller.listener.names): controllers speak Raft over gRPC, name a broker "
            "listener",
        ),
        (
            {"kafka.listener.names": "KAFKA", "inter.broker.listener.name": "KAFKA"},
            "inter.broker.listener.name KAFKA is in kafka.listener.names: brokers replicate over "
            "gRPC, so the inter-broker listener must be one kafka.listener.names does not name",
        ),
        (
            {"kafka.listener.names": "CLIENT,KAFKA"},
            "every advertised broker listener is in kafka.listener.names: brokers replicate over "
            "gRPC, so advertise a broker listener kafka.listener.names does not name",
        ),
    ],
)
def test_kafka_listener_names_are_checked_as_kafka_checks_listener_names(changes, message):
    with pytest.raises(InvalidConfigError) as raised:
        from_properties({**KAFKA, **changes})
    assert str(raised.value) == message


@pytest.mark.parametrize("protocol", ["SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_a_kafka_listener_takes_every_security_protocol(protocol, tmp_path):
    """Its TLS and SASL settings are read as any listener's (and checked: a keystore that
    cannot be read is the error here, the Kafka listener is not)."""
    props = {
        **KAFKA,
        "listener.security.protocol.map": f"CLIENT:PLAINTEXT,KAFKA:{protocol},"
        "CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/nonexistent/key.pem",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/nonexistent/ca.pem",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.kafka.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain."
        'PlainLoginModule required user_alice="secret";',
    }
    config = from_properties(props)
    assert config.kafka_listeners == frozenset({"KAFKA"})
    assert ("KAFKA" in config.tls) == protocol.endswith("SSL")
    assert ("KAFKA" in config.sasl) == protocol.startswith("SASL_")
    if "KAFKA" in config.sasl:
        assert config.sasl["KAFKA"].plain_users == {"alice": "secret"}


def test_a_controller_only_node_serves_no_kafka_listener():
    props = {
        **BASE,
        "process.roles": "controller",
        "listeners": "CONTROLLER://127.0.0.1:9093",
        "kafka.listener.names": "CONTROLLER",
    }
    with pytest.raises(InvalidConfigError, match="a controller listener"):
        from_properties(props)
