"""The SASL settings of each SASL_PLAINTEXT / SASL_SSL listener, with Kafka's names:

    listener.security.protocol.map=CLIENT:SASL_SSL,REPLICATION:SSL,CONTROLLER:SSL
    sasl.enabled.mechanisms=SCRAM-SHA-512                       # or per listener:
    listener.name.client.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
    listener.name.client.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.\
        PlainLoginModule required user_admin="..." user_alice="...";
    sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512          # when nodes talk SASL
    listener.name.replication.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.\
        security.scram.ScramLoginModule required username="broker" password="...";
    connections.max.reauth.ms=3600000                           # KIP-368; 0: never
    sasl.server.max.receive.size=524288

- Mechanisms served: SCRAM-SHA-256 and SCRAM-SHA-512 (users' credentials from the metadata
  log, `strom configs --entity-type users`), and PLAIN with the users a PlainLoginModule
  JAAS config declares (Kafka's way; meant for tests: the passwords sit in the file).
  GSSAPI and OAUTHBEARER are refused with one line. Kafka's default for
  sasl.enabled.mechanisms is GSSAPI, which Strom does not serve: here the default is
  SCRAM-SHA-512.
- A node dialling a SASL listener of another node (the inter-broker listener, the
  controller listener) logs in with `sasl.mechanism.inter.broker.protocol` /
  `sasl.mechanism.controller.protocol` (default: the listener's first enabled mechanism)
  and the username and password of the JAAS config for that mechanism
  (`listener.name.<listener>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from storage.errors import InvalidConfigError
from strom_api.jaas import login_credentials, parse_jaas_config, plain_users
from strom_api.sasl_client import SaslLogin

LISTENER_PREFIX = "listener.name."
SERVED_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
DEFAULT_MECHANISMS = "SCRAM-SHA-512"
DEFAULT_MAX_RECEIVE = 524_288  # Kafka's sasl.server.max.receive.size

# Keys read as they are (not per listener).
GLOBAL_KEYS = (
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.mechanism.controller.protocol",
    "connections.max.reauth.ms",
    "sasl.server.max.receive.size",
)


@dataclass(frozen=True)
class ListenerSasl:
    name: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    login: SaslLogin | None = None  # how this node logs in when it dials the listener
    reauth_ms: int = 0
    max_receive_bytes: int = DEFAULT_MAX_RECEIVE


def is_sasl_key(key: str) -> bool:
    """Keys this module reads (so server_config does not report them unknown)."""
    if key in GLOBAL_KEYS:
        return True
    if not key.startswith(LISTENER_PREFIX):
        return False
    name, _, rest = key[len(LISTENER_PREFIX) :].partition(".")
    if name != name.lower():
        return False
    if rest == "sasl.enabled.mechanisms":
        return True
    mechanism, _, tail = rest.partition(".")
    return tail == "sasl.jaas.config" and mechanism.upper() in SERVED_MECHANISMS


def _int(props: Mapping[str, str], key: str, default: int, lowest: int) -> int:
    text = props.get(key, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = lowest - 1
    if value < lowest:
        raise InvalidConfigError(
            f"invalid value '{text}' for config '{key}': expected an int >= {lowest}"
        )
    return value


def _jaas(props: Mapping[str, str], listener: str, mechanism: str) -> tuple[str, str] | None:
    """(key, text) of the JAAS config for `mechanism` on `listener`, if any."""
    own = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    for key in (own, "sasl.jaas.config"):
        text = props.get(key, "").strip()
        if text:
            return key, text
    return None


def _entry(key: str, text: str):  # type: ignore[no-untyped-def]
    try:
        return parse_jaas_config(text)
    except ValueError as exc:
        raise InvalidConfigError(f"invalid value for config '{key}': {exc}") from None


def _login(
    props: Mapping[str, str], listener: str, mechanisms: tuple[str, ...], role: str
) -> SaslLogin | None:
    key = f"sasl.mechanism.{role}.protocol"
    mechanism = props.get(key, "").strip().upper() or mechanisms[0]
    if mechanism not in mechanisms:
        raise InvalidConfigError(
            f"{key} is {mechanism}, which listener {listener} does not enable "
            f"(sasl.enabled.mechanisms: {', '.join(mechanisms)})"
        )
    found = _jaas(props, listener, mechanism)
    if found is None:
        raise InvalidConfigError(
            f"listener {listener} uses SASL between nodes: set "
            f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config with "
            "the username and password this node logs in with"
        )
    key, text = found
    try:
        username, password = login_credentials(_entry(key, text))
    except ValueError as exc:
        raise InvalidConfigError(f"invalid value for config '{key}': {exc}") from None
    return SaslLogin(mechanism, username, password)


def listener_sasl(props: Mapping[str, str], listener: str, dialled_as: str | None) -> ListenerSasl:
    """The settings of SASL listener `listener`; `dialled_as` is "inter.broker" or
    "controller" when this node also dials it on other nodes, else None."""
    own = f"{LISTENER_PREFIX}{listener.lower()}.sasl.enabled.mechanisms"
    key = own if own in props else "sasl.enabled.mechanisms"
    text = props.get(key, "").strip() or DEFAULT_MECHANISMS
    mechanisms = tuple(dict.fromkeys(m.strip().upper() for m in text.split(",") if m.strip()))
    unknown = [m for m in mechanisms if m not in SERVED_MECHANISMS]
    if unknown or not mechanisms:
        raise InvalidConfigError(
            f"{key} names {', '.join(unknown) or 'no mechanism'}: listener {listener} can "
            f"serve {', '.join(SERVED_MECHANISMS)}"
        )
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        found = _jaas(props, listener, "PLAIN")
        if found is None:
            raise InvalidConfigError(
                f"listener {listener} enables PLAIN but no PlainLoginModule declares its "
                f"users: set {LISTENER_PREFIX}{listener.lower()}.plain.sasl.jaas.config"
            )
        try:
            users = plain_users(_entry(*found))
        except ValueError as exc:
            raise InvalidConfigError(f"invalid value for config '{found[0]}': {exc}") from None
    login = None if dialled_as is None else _login(props, listener, mechanisms, dialled_as)
    return ListenerSasl(
        listener,
        mechanisms,
        users,
        login,
        _int(props, "connections.max.reauth.ms", 0, 0),
        _int(props, "sasl.server.max.receive.size", DEFAULT_MAX_RECEIVE, 1),
    )
