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
