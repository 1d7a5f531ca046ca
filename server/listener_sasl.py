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
    listener.name.client.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=file:/etc/jwks.json
    listener.name.client.oauthbearer.sasl.oauthbearer.expected.audience=strom

- Mechanisms served: SCRAM-SHA-256 and SCRAM-SHA-512 (users' credentials from the metadata
  log, `strom configs --entity-type users`), and PLAIN with the users a PlainLoginModule
  JAAS config declares (Kafka's way; meant for tests: the passwords sit in the file), and
  OAUTHBEARER: JWTs checked against a JWKS file as Kafka's OAuthBearerValidatorCallbackHandler
  checks them (server/oauthbearer_validator.py), its sasl.oauthbearer.* keys per listener
  and mechanism (listener.name.<l>.oauthbearer.<key>) or global. GSSAPI is refused with
  one line. Kafka's default for
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

from server.oauthbearer_validator import (
    JwksError,
    OAuthBearerSettings,
    OAuthBearerValidator,
)
from storage.errors import InvalidConfigError
from strom_api.jaas import JaasEntry, login_credentials, parse_jaas_config, plain_users
from strom_api.sasl_client import SaslLogin

LISTENER_PREFIX = "listener.name."
SERVED_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER")
# Mechanisms a node logs in with when it dials another node's SASL listener.
NODE_LOGIN_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
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
# OAUTHBEARER's keys (KIP-768): global, listener.name.<l>.<key> or
# listener.name.<l>.oauthbearer.<key>.
OAUTHBEARER_KEYS = (
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name",
)
# Kafka needs this per listener and mechanism to check tokens with a JWKS; it is what
# Strom always does, so the key is accepted with that class only (the 3.x name too).
CALLBACK_HANDLER_KEY = "sasl.server.callback.handler.class"
VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@dataclass(frozen=True)
class ListenerSasl:
    name: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    login: SaslLogin | None = None  # how this node logs in when it dials the listener
    reauth_ms: int = 0
    max_receive_bytes: int = DEFAULT_MAX_RECEIVE
    oauthbearer: OAuthBearerValidator | None = None  # when OAUTHBEARER is enabled


def is_sasl_key(key: str) -> bool:
    """Keys this module reads (so server_config does not report them unknown)."""
    if key in GLOBAL_KEYS or key in OAUTHBEARER_KEYS:
        return True
    if not key.startswith(LISTENER_PREFIX):
        return False
    name, _, rest = key[len(LISTENER_PREFIX) :].partition(".")
    if name != name.lower():
        return False
    if rest == "sasl.enabled.mechanisms" or rest in OAUTHBEARER_KEYS:
        return True
    mechanism, _, tail = rest.partition(".")
    if mechanism == "oauthbearer" and (tail in OAUTHBEARER_KEYS or tail == CALLBACK_HANDLER_KEY):
        return True
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


def _entry(key: str, text: str) -> JaasEntry:
    try:
        return parse_jaas_config(text)
    except ValueError as exc:
        raise InvalidConfigError(f"invalid value for config '{key}': {exc}") from None


def _login(
    props: Mapping[str, str], listener: str, mechanisms: tuple[str, ...], role: str
) -> SaslLogin | None:
    key = f"sasl.mechanism.{role}.protocol"
    mechanism = props.get(key, "").strip().upper() or mechanisms[0]
    if mechanism not in NODE_LOGIN_MECHANISMS:
        raise InvalidConfigError(
            f"listener {listener} is dialled by the nodes with {mechanism}: nodes log in with "
            f"{', '.join(NODE_LOGIN_MECHANISMS)} (set {key})"
        )
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
    oauthbearer = _oauthbearer(props, listener) if "OAUTHBEARER" in mechanisms else None
    return ListenerSasl(
        listener,
        mechanisms,
        users,
        login,
        _int(props, "connections.max.reauth.ms", 0, 0),
        _int(props, "sasl.server.max.receive.size", DEFAULT_MAX_RECEIVE, 1),
        oauthbearer,
    )


def _oauthbearer_value(props: Mapping[str, str], listener: str, key: str) -> tuple[str, str]:
    """(the key found, its value): listener.name.<l>.oauthbearer.<key>, else
    listener.name.<l>.<key>, else <key> (Kafka's order: mechanism, listener, global)."""
    listener_key = f"{LISTENER_PREFIX}{listener.lower()}.{key}"
    mechanism_key = f"{LISTENER_PREFIX}{listener.lower()}.oauthbearer.{key}"
    found = next((k for k in (mechanism_key, listener_key) if k in props), key)
    return found, props.get(found, "").strip()


def _oauthbearer(props: Mapping[str, str], listener: str) -> OAuthBearerValidator:
    handler_key = f"{LISTENER_PREFIX}{listener.lower()}.oauthbearer.{CALLBACK_HANDLER_KEY}"
    handler = props.get(handler_key, "").strip()
    if handler and handler not in VALIDATOR_CLASSES:
        raise InvalidConfigError(
            f"{handler_key} is {handler}: Strom checks OAUTHBEARER tokens with "
            f"{VALIDATOR_CLASSES[0]} only"
        )
    # The listener's own OAUTHBEARER JAAS entry, which Kafka requires, names the login
    # module only (the global sasl.jaas.config serves the other mechanisms).
    jaas_key = f"{LISTENER_PREFIX}{listener.lower()}.oauthbearer.sasl.jaas.config"
    if props.get(jaas_key, "").strip():
        module = _entry(jaas_key, props[jaas_key]).module
        if module != OAUTHBEARER_LOGIN_MODULE:
            raise InvalidConfigError(
                f"{jaas_key} names {module}: OAUTHBEARER takes {OAUTHBEARER_LOGIN_MODULE}"
            )
    url_key, url = _oauthbearer_value(props, listener, "sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise InvalidConfigError(
            f"listener {listener} enables OAUTHBEARER without a JWKS: set "
            f"{LISTENER_PREFIX}{listener.lower()}.oauthbearer.sasl.oauthbearer.jwks.endpoint.url"
            " (or sasl.oauthbearer.jwks.endpoint.url) to file:/path/jwks.json"
        )
    skew_key, _ = _oauthbearer_value(props, listener, "sasl.oauthbearer.clock.skew.seconds")
    audience = _oauthbearer_value(props, listener, "sasl.oauthbearer.expected.audience")[1]
    settings = OAuthBearerSettings(
        url,
        _int(props, skew_key, 30, 0),
        tuple(a.strip() for a in audience.split(",") if a.strip()),
        _oauthbearer_value(props, listener, "sasl.oauthbearer.expected.issuer")[1],
        _oauthbearer_value(props, listener, "sasl.oauthbearer.sub.claim.name")[1] or "sub",
    )
    try:
        return OAuthBearerValidator(settings)
    except JwksError as exc:
        raise InvalidConfigError(f"invalid value for config '{url_key}': {exc}") from None
