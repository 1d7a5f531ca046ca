"""Kafka's client properties, read into the clients' kafka-python keyword arguments
(strom/security.py): what the `strom` tools' `--command-config FILE` holds, as
kafka-topics.sh and the others take it, and the Spark connector's kafka.* options:

    security.protocol=SSL
    ssl.truststore.location=/etc/strom/tls/ca.pem      # PEM CA certificates
    ssl.keystore.location=/etc/strom/tls/admin.pem     # PEM private key + certificate chain
    ssl.key.password=...                               # if the key is encrypted
    ssl.endpoint.identification.algorithm=             # empty: no hostname check
    security.protocol=SASL_SSL                         # or SASL_PLAINTEXT
    sasl.mechanism=SCRAM-SHA-512                       # SCRAM-SHA-256, PLAIN
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
        username="alice" password="alice-secret";
    sasl.username=alice                                # instead of sasl.jaas.config
    sasl.password=alice-secret
    sasl.mechanism=OAUTHBEARER                         # a token from a file or an issuer:
    sasl.oauthbearer.token.endpoint.url=file:/var/run/secrets/tokens/strom
    sasl.login.callback.handler.class=...OAuthBearerLoginCallbackHandler   # optional
    (strom/oauth_login.py: the https: client-credentials form and its sasl.jaas.config)

Stores are PEM (ssl.keystore.type / ssl.truststore.type PEM, the default here); a key this
reader does not know is warned about, as Kafka's tools warn "supplied but isn't a known
config", and ignored.

Part of the public client API (Kafka's clients read these properties too): the tools
(strom_tools) and the Spark connector build their clients' settings with it.
"""

from __future__ import annotations

import logging
import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from strom.errors import StromError
from strom.oauth_login import ClientCredentialsTokenProvider, FileTokenProvider
from strom_api.error_codes import ErrorCode
from strom_api.jaas import login_credentials, parse_jaas_config
from strom_api.tls import TlsConfigError, client_tls

log = logging.getLogger("strom.tools")

KNOWN = (
    "security.protocol",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.login.callback.handler.class",
)


def _boolean(value: str) -> bool:
    """Kafka's ConfigDef BOOLEAN: true or false, any case; anything else does not parse."""
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ValueError(value)
    return text == "true"


def _names(value: str) -> tuple[str, ...]:
    """Kafka's ConfigDef LIST: comma-separated, blanks around each name dropped."""
    return tuple(name.strip() for name in value.split(",") if name.strip())


# Kafka's producer properties the Producer takes, each with how its value is read: the
# console tools' --producer-property and the Spark connector's kafka.* write options.
PRODUCER_PROPERTIES: dict[str, Callable[[str], Any]] = {
    "acks": str,
    "linger.ms": int,
    "batch.size": int,
    "compression.type": str,
    "retries": int,
    "delivery.timeout.ms": int,
    "request.timeout.ms": int,
    "enable.idempotence": _boolean,
    "max.request.size": int,
    "max.block.ms": int,
    "buffer.memory": int,
    "max.in.flight.requests.per.connection": int,
    "retry.backoff.ms": int,
    "reconnect.backoff.ms": int,
    "reconnect.backoff.max.ms": int,
    "client.id": str,
    "partitioner.adaptive.partitioning.enable": _boolean,
    "partitioner.availability.timeout.ms": int,
    "partitioner.ignore.keys": _boolean,
}


# Kafka's consumer properties the Consumer takes: console-consumer's --consumer-property.
# partition.assignment.strategy takes Kafka's assignor class names or Strom's short ones.
CONSUMER_PROPERTIES: dict[str, Callable[[str], Any]] = {
    "group.id": str,
    "group.instance.id": str,
    "client.id": str,
    "enable.auto.commit": _boolean,
    "auto.commit.interval.ms": int,
    "auto.offset.reset": str,
    "session.timeout.ms": int,
    "heartbeat.interval.ms": int,
    "max.poll.interval.ms": int,
    "max.poll.records": int,
    "partition.assignment.strategy": _names,
    "fetch.min.bytes": int,
    "fetch.max.wait.ms": int,
    "fetch.max.bytes": int,
    "max.partition.fetch.bytes": int,
    "request.timeout.ms": int,
    "retry.backoff.ms": int,
    "metadata.max.age.ms": int,
    "reconnect.backoff.ms": int,
    "reconnect.backoff.max.ms": int,
    "isolation.level": str,
    "exclude.internal.topics": _boolean,
}


def producer_settings(props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka producer properties as the Producer's keyword arguments. An unknown property or
    a value that does not parse is INVALID_CONFIG naming it (the Producer checks ranges)."""
    return _settings(props, PRODUCER_PROPERTIES, "producer")


def consumer_settings(props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka consumer properties as the Consumer's keyword arguments, as producer_settings."""
    return _settings(props, CONSUMER_PROPERTIES, "consumer")


def _settings(
    props: Mapping[str, str], table: Mapping[str, Callable[[str], Any]], client: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in props.items():
        parse = table.get(name)
        if parse is None:
            raise StromError(ErrorCode.INVALID_CONFIG, f"unknown {client} property '{name}'")
        try:
            out[name.replace(".", "_")] = parse(value)
        except ValueError:
            raise StromError(
                ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}"
            ) from None
    return out


LOGIN_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def read_properties(path: str, option: str = "--command-config") -> dict[str, str]:
    """A Java properties file's keys and values (`option`: the flag named in errors)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise StromError(
            ErrorCode.INVALID_CONFIG, f"cannot read {option} {path}: {exc.strerror}"
        ) from None
    props = {}
    for raw in lines:
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        key, value = (match.group(1), match.group(2).strip()) if match else (line, "")
        props[key] = value
    return props


def client_settings(path: str | None) -> dict[str, Any]:
    """The file's settings as Producer/Consumer/AdminClient keyword arguments ({} without
    a file)."""
    if path is None:
        return {}
    props = read_properties(path)
    for key in sorted(props):
        if key not in KNOWN:
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
    return settings_from_properties(props, f"--command-config {path}")


def consumer_config_settings(path: str) -> dict[str, Any]:
    """A console consumer's --consumer.config FILE: Kafka's consumer properties and the
    security ones, as the Consumer's keyword arguments; any other key is warned about and
    ignored, as Kafka's clients warn of a config they do not know."""
    props = read_properties(path, "--consumer.config")
    for key in sorted(props):
        if key not in KNOWN and key not in CONSUMER_PROPERTIES:
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
    settings = consumer_settings({k: v for k, v in props.items() if k in CONSUMER_PROPERTIES})
    settings.update(settings_from_properties(props, f"--consumer.config {path}"))
    return settings


def settings_from_properties(props: dict[str, str], where: str) -> dict[str, Any]:
    """Kafka's client security properties (the KNOWN keys of `props`) as the clients'
    keyword arguments; `where` names their source in errors. Also read by the Spark
    connector for its kafka.* options."""
    for store in ("ssl.truststore.type", "ssl.keystore.type"):
        if props.get(store, "PEM").upper() != "PEM":
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                f"{store}={props[store]} in {where}: Strom's clients read PEM stores only",
            )
    settings: dict[str, Any] = {}
    if "security.protocol" in props:
        settings["security_protocol"] = props["security.protocol"]
    if props.get("ssl.truststore.location"):
        settings["ssl_cafile"] = props["ssl.truststore.location"]
    if props.get("ssl.keystore.location"):
        settings["ssl_certfile"] = props["ssl.keystore.location"]  # key and chain in one
    if props.get("ssl.key.password"):
        settings["ssl_password"] = props["ssl.key.password"]
    if "ssl.endpoint.identification.algorithm" in props:
        algorithm = props["ssl.endpoint.identification.algorithm"].lower()
        if algorithm not in ("https", ""):
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                f"ssl.endpoint.identification.algorithm must be https or empty, not {algorithm!r}",
            )
        settings["ssl_check_hostname"] = algorithm == "https"
    settings.update(_sasl_settings(props, where))
    _check_pem(settings, where)
    return settings


def _sasl_settings(props: dict[str, str], where: str) -> dict[str, Any]:
    """sasl.mechanism and the login (sasl.jaas.config's ScramLoginModule / PlainLoginModule
    username and password, or sasl.username / sasl.password) as kafka-python's names."""
    settings: dict[str, Any] = {}
    if props.get("sasl.mechanism", "").strip().upper() == "OAUTHBEARER":
        provider = _token_provider(props, where)
        return {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": provider}
    if props.get("sasl.mechanism"):
        settings["sasl_mechanism"] = props["sasl.mechanism"]
    if props.get("sasl.jaas.config"):
        try:
            username, password = login_credentials(parse_jaas_config(props["sasl.jaas.config"]))
        except ValueError as exc:
            raise StromError(
                ErrorCode.INVALID_CONFIG, f"sasl.jaas.config in {where}: {exc}"
            ) from None
        settings["sasl_plain_username"], settings["sasl_plain_password"] = username, password
    if props.get("sasl.username"):
        settings["sasl_plain_username"] = props["sasl.username"]
    if "sasl.password" in props:
        settings["sasl_plain_password"] = props["sasl.password"]
    return settings


def _token_provider(props: dict[str, str], where: str) -> Any:
    """Kafka's OAuthBearerLoginCallbackHandler settings as a token provider
    (strom/oauth_login.py)."""

    def invalid(message: str) -> StromError:
        return StromError(ErrorCode.INVALID_CONFIG, f"{message} ({where})")

    handler = props.get("sasl.login.callback.handler.class", "").strip()
    if handler and handler not in LOGIN_HANDLERS:
        raise invalid(
            f"sasl.login.callback.handler.class is {handler}: OAUTHBEARER logs in with "
            f"{LOGIN_HANDLERS[0]} only"
        )
    url = props.get("sasl.oauthbearer.token.endpoint.url", "").strip()
    scheme = urllib.parse.urlparse(url).scheme
    if scheme == "file":
        return FileTokenProvider(urllib.parse.unquote(urllib.parse.urlparse(url).path))
    if scheme not in ("http", "https"):
        raise invalid(
            "sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url: "
            "file:/path/to/token, or the identity provider's https: token endpoint"
        )
    needs = invalid(
        f"a token endpoint needs sasl.jaas.config={OAUTHBEARER_LOGIN_MODULE} required "
        'clientId="..." clientSecret="...";'
    )
    if not props.get("sasl.jaas.config", "").strip():
        raise needs
    try:
        entry = parse_jaas_config(props["sasl.jaas.config"])
    except ValueError as exc:
        raise invalid(f"sasl.jaas.config: {exc}") from None
    client_id, secret = entry.options.get("clientId"), entry.options.get("clientSecret")
    if entry.module != OAUTHBEARER_LOGIN_MODULE or not client_id or secret is None:
        raise needs
    return ClientCredentialsTokenProvider(url, client_id, secret, entry.options.get("scope", ""))


def _check_pem(settings: dict[str, Any], where: str) -> None:
    """Reads the PEM files once here, so that a bad one is named by the key the file gave
    (the clients name their own parameters)."""
    if str(settings.get("security_protocol", "PLAINTEXT")).upper() not in ("SSL", "SASL_SSL"):
        return
    try:
        client_tls(
            settings.get("ssl_cafile"),
            settings.get("ssl_certfile"),
            None,
            settings.get("ssl_password"),
            password_name="ssl.key.password",
            cert_setting="ssl.keystore.location",
            ca_setting="ssl.truststore.location",
        )
    except TlsConfigError as exc:
        raise StromError(ErrorCode.INVALID_CONFIG, f"{exc} ({where})") from None
