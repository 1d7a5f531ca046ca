"""A node's listeners, with Kafka's names and checks: what it binds (`listeners`), what it
tells others to connect to (`advertised.listeners`), and which of them brokers replicate
over (`inter.broker.listener.name`).

    listeners=CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9094,CONTROLLER://0.0.0.0:9093
    advertised.listeners=CLIENT://strom-0.strom.prod.svc:9092,REPLICATION://10.0.0.7:9094
    inter.broker.listener.name=REPLICATION
    controller.listener.names=CONTROLLER
    listener.security.protocol.map=CLIENT:SSL,REPLICATION:SSL,CONTROLLER:SSL

Each listener's protocol and TLS settings: server/listener_security.py.

Every listener of `listeners` is bound: the controller listener by the Raft server, each
other one by a broker server of its own that serves every broker API (server/node.py). A
broker registers its advertised listeners; a Metadata answer carries each broker's endpoint
for the listener the request came in on, and followers fetch from their leader's endpoint
for the inter-broker listener. As in Kafka:
- `advertised.listeners` defaults to `listeners`; when set it names a subset of them (its
  hosts and ports may differ: a pod binds 0.0.0.0 and advertises its stable DNS name);
- 0.0.0.0 binds every interface and cannot be advertised (set advertised.listeners);
  an empty host (`PLAINTEXT://:9092`) binds every interface and advertises the machine's
  canonical host name (server/node.py resolves it);
- `inter.broker.listener.name` names an advertised broker listener; without it, the first
  one (Kafka takes the PLAINTEXT one by security.inter.broker.protocol);
- a controller-only node has only controller listeners, a broker-only node none; a
  controller has one (Kafka's may have several).
The controller listener in `advertised.listeners` is accepted (Kafka 4's example configs
have it) and not used: controllers are found through controller.quorum.voters.

A broker listener speaks gRPC (Strom's own clients, replication, the controller API
forwarded), unless `kafka.listener.names` (a comma list, like controller.listener.names;
default empty) names it: then it speaks Kafka's binary protocol, for Kafka's own clients
and tools (server/kafka/, issue 20):

    listeners=PLAINTEXT://:9092,KAFKA://:9192,CONTROLLER://:9093
    kafka.listener.names=KAFKA
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT,CONTROLLER:PLAINTEXT

It is registered and advertised as any broker listener, so a Metadata request on it answers
every broker's KAFKA endpoint. Each name must be a broker listener of `listeners`, never a
controller listener nor the inter-broker one (replication is gRPC), and PLAINTEXT: TLS and
SASL on a Kafka listener are refused with a config error until they are implemented (never
accepted and ignored). Without inter.broker.listener.name the inter-broker listener is the
first advertised gRPC listener.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from dataclasses import dataclass

from storage.errors import InvalidConfigError

_LISTENER = re.compile(r"^([A-Z_][A-Z0-9_]*)://([^:/]*):(\d{1,5})$")
ANY_HOST = "0.0.0.0"


@dataclass(frozen=True)
class Listener:
    name: str
    host: str  # "": every interface
    port: int

    @property
    def address(self) -> str:
        """Where it binds."""
        return f"{self.host or ANY_HOST}:{self.port}"


def parse_listeners(text: str, key: str) -> dict[str, Listener]:
    """`NAME://host:port,...` as `key` (listeners, advertised.listeners) gives them."""
    found: dict[str, Listener] = {}
    for item in text.split(","):
        match = _LISTENER.match(item.strip())
        if match is None:
            raise InvalidConfigError(
                f"invalid listener '{item.strip()}' in config '{key}': expected NAME://host:port"
            )
        name = match.group(1)
        if name in found:
            raise InvalidConfigError(f"listener name {name} appears twice in config '{key}'")
        found[name] = Listener(name, match.group(2), int(match.group(3)))
    return found


@dataclass(frozen=True)
class BrokerListeners:
    """The listeners of the broker role: bound, advertised, and the inter-broker one."""

    bound: tuple[Listener, ...]
    advertised: tuple[Listener, ...]
    inter_broker: str


def broker_listeners(
    props: Mapping[str, str],
    listeners: Mapping[str, Listener],
    controller_listener: str,
    kafka_names: frozenset[str] = frozenset(),
) -> BrokerListeners:
    bound = tuple(x for n, x in listeners.items() if n != controller_listener)
    text = props.get("advertised.listeners", "").strip()
    if text:
        given = parse_listeners(text, "advertised.listeners")
        strangers = sorted(set(given) - set(listeners))
        if strangers:
            raise InvalidConfigError(
                f"advertised.listeners names {', '.join(strangers)}, which 'listeners' does not "
                f"have: its listener names must be a subset of {', '.join(listeners)}"
            )
        advertised = tuple(x for n, x in given.items() if n != controller_listener)
    else:
        advertised = bound
    for listener in advertised:
        if listener.host == ANY_HOST:
            raise InvalidConfigError(
                f"advertised.listeners cannot use the nonroutable meta-address 0.0.0.0 "
                f"({listener.name}): set advertised.listeners to a routable host for it"
            )
    names = [x.name for x in advertised]
    inter = props.get("inter.broker.listener.name", "").strip()
    if inter and inter not in names:
        raise InvalidConfigError(
            f"inter.broker.listener.name must be a listener name defined in "
            f"advertised.listeners; '{inter}' is not one of {', '.join(names) or 'none'}"
        )
    if not names:
        raise InvalidConfigError(
            "advertised.listeners names no broker listener: brokers and clients could not "
            "reach this broker"
        )
    if inter in kafka_names:
        raise InvalidConfigError(
            f"inter.broker.listener.name {inter} is in kafka.listener.names: brokers replicate "
            "over gRPC, so the inter-broker listener must be one kafka.listener.names does not "
            "name"
        )
    grpc_names = [n for n in names if n not in kafka_names]
    if not inter and not grpc_names:
        raise InvalidConfigError(
            "every advertised broker listener is in kafka.listener.names: brokers replicate "
            "over gRPC, so advertise a broker listener kafka.listener.names does not name"
        )
    return BrokerListeners(bound, advertised, inter or grpc_names[0])


def check_controller_listeners(
    roles: frozenset[str], listeners: Mapping[str, Listener], controller_names: list[str]
) -> None:
    """The controller listeners of `listeners` are ones the node binds: the first of
    controller.listener.names on a node with the controller role (its Raft server listens
    on one; Kafka's may on several), none on a broker-only node (as Kafka requires)."""
    present = [n for n in controller_names if n in listeners]
    if "controller" not in roles and present:
        raise InvalidConfigError(
            f"Controller listener with name {present[0]} defined in controller.listener.names "
            "must not be in listeners when process.roles=broker"
        )
    if len(present) > 1:
        raise InvalidConfigError(
            f"listeners has {len(present)} controller listeners ({', '.join(present)}): a "
            "Strom controller listens on one, the first of controller.listener.names"
        )


def check_controller_only(listeners: Mapping[str, Listener], controller_listener: str) -> None:
    """Kafka: a node with process.roles=controller binds controller listeners only."""
    others = [n for n in listeners if n != controller_listener]
    if others:
        raise InvalidConfigError(
            "The listeners config must only contain KRaft controller listeners from "
            f"controller.listener.names when process.roles=controller; {', '.join(others)} "
            "is not one"
        )


def kafka_listener_names(
    props: Mapping[str, str], listeners: Mapping[str, Listener], controller_names: list[str]
) -> frozenset[str]:
    """kafka.listener.names: the broker listeners that speak Kafka's binary protocol (a
    controller-only node binds none: any name is a controller one or not in listeners)."""
    text = props.get("kafka.listener.names", "")
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name in controller_names:
            raise InvalidConfigError(
                f"kafka.listener.names names {name}, a controller listener "
                "(controller.listener.names): controllers speak Raft over gRPC, name a broker "
                "listener"
            )
        if name not in listeners:
            raise InvalidConfigError(
                f"kafka.listener.names names '{name}', which is not in 'listeners' "
                f"({', '.join(listeners)})"
            )
    if names and importlib.util.find_spec("kio") is None:
        raise InvalidConfigError(
            "kafka.listener.names is set, but the Kafka protocol's codecs are not installed: "
            "pip install 'strom[kafka]'"
        )
    return frozenset(names)
