"""Each listener's security protocol and TLS settings, with Kafka's names and rules.

    listener.security.protocol.map=CLIENT:SSL,REPLICATION:SSL,CONTROLLER:SSL
    ssl.keystore.type=PEM
    ssl.keystore.location=/etc/strom/tls/node.pem       # private key + certificate chain
    ssl.key.password=...                                # when the key is encrypted (PKCS#8)
    ssl.truststore.location=/etc/strom/tls/ca.pem       # CA certificates
    ssl.client.auth=required                            # mTLS
    listener.name.client.ssl.client.auth=none           # per-listener override
    ssl.principal.mapping.rules=RULE:^CN=([^,]+).*$/$1/,DEFAULT   # certificate -> user

- The map defaults to Kafka's PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,
  SASL_SSL:SASL_SSL. As in Kafka 4, when the map is not set, a controller listener name
  (controller.listener.names) it lacks is PLAINTEXT; any other listener name it lacks is
  refused ("No security protocol defined for listener ...").
- All four are served: SSL and SASL_SSL with TLS (the ssl.* settings below), SASL_* with
  the SASL settings of server/listener_sasl.py.
- `listener.name.<lowercase name>.ssl.*` wins over `ssl.*` for that listener, for serving it
  and for dialling it on other nodes (Kafka reads the controller and inter-broker
  listeners' own settings when it connects to them).
- PEM only (`ssl.keystore.type` / `ssl.truststore.type` PEM, the default here; JKS and
  PKCS12 are refused with one line: convert them with openssl). With PEM, Kafka takes no
  store passwords (`ssl.keystore.password`, `ssl.truststore.password`): refused as Kafka does.
- On a SASL_SSL listener only the listener's own `listener.name.<name>.ssl.client.auth`
  asks for client certificates, never the broker-wide `ssl.client.auth` (Kafka's KIP-684):
  an operator sets `ssl.client.auth=required` for mTLS between the nodes while clients log
  in to a SASL_SSL listener with a password and no certificate.
- `ssl.client.auth=requested`: gRPC's Python server can only require a client certificate
  or not ask for one; "requested" therefore asks for none (clients with or without a
  certificate connect, as Kafka's "requested" lets them; no certificate principal is
  taken from them). Use "required" for mTLS.
- `ssl.principal.mapping.rules` (server/principal_mapping.py, Kafka's RULE syntax, default
  DEFAULT) turns a client certificate's subject DN into the user of `User:<name>`; read
  per listener like every ssl.* key, checked at startup.
- `ssl.endpoint.identification.algorithm` (default https): the host a node dials (the
  advertised host or the voter's host) must be in the peer's certificate SANs; "" turns
  the check off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from server.principal_mapping import DEFAULT_MAPPER, PrincipalMapper, parse_rules
from storage.errors import InvalidConfigError
from strom_api.tls import KeystoreSource, ServerTls, TlsConfigError, TruststoreSource

DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED = PROTOCOLS
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
CLIENT_AUTH = ("required", "requested", "none")

# The ssl.* keys read per listener (each also as listener.name.<name>.<key>).
SSL_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.endpoint.identification.algorithm",
    "ssl.principal.mapping.rules",
)
LISTENER_PREFIX = "listener.name."


def is_security_key(key: str) -> bool:
    """Keys this module reads (so server_config does not report them unknown)."""
    if key == "listener.security.protocol.map" or key in SSL_KEYS:
        return True
    if key.startswith(LISTENER_PREFIX):
        name, _, rest = key[len(LISTENER_PREFIX) :].partition(".")
        # Kafka's prefix names the listener in lower case; another spelling is read by
        # nothing, so it is reported as unknown rather than silently ignored.
        return name == name.lower() and rest in SSL_KEYS
    return False


def protocol_map(props: Mapping[str, str], controller_names: Iterable[str]) -> dict[str, str]:
    text = props.get("listener.security.protocol.map", "").strip()
    explicit = bool(text)
    found: dict[str, str] = {}
    for item in (text or DEFAULT_PROTOCOL_MAP).split(","):
        name, colon, protocol = item.strip().partition(":")
        name, protocol = name.strip(), protocol.strip().upper()
        if not colon or not name or protocol not in PROTOCOLS:
            raise InvalidConfigError(
                f"invalid value '{item.strip()}' in config 'listener.security.protocol.map': "
                f"expected NAME:PROTOCOL with PROTOCOL one of {', '.join(PROTOCOLS)}"
            )
        found[name] = protocol
    if not explicit:  # Kafka 4: unmapped controller listeners are PLAINTEXT by default
        for name in controller_names:
            found.setdefault(name, "PLAINTEXT")
    return found


def listener_protocols(
    props: Mapping[str, str], names: Iterable[str], controller_names: Iterable[str]
) -> dict[str, str]:
    """The protocol of each listener name in `names`; refuses unmapped names and the
    protocols Strom does not serve yet."""
    mapping = protocol_map(props, controller_names)
    protocols = {}
    for name in names:
        protocol = mapping.get(name)
        if protocol is None:
            raise InvalidConfigError(
                f"No security protocol defined for listener {name}: add {name}:<protocol> to "
                "listener.security.protocol.map"
            )
        if protocol not in SERVED:
            raise InvalidConfigError(
                f"listener {name} uses security protocol {protocol}, which is not supported "
                "yet: Strom serves PLAINTEXT and SSL (SASL comes with a later release)"
            )
        protocols[name] = protocol
    return protocols


def _setting(props: Mapping[str, str], listener: str, key: str) -> tuple[str, str | None]:
    """(the key as given, its value): the listener's own key first, then the plain one."""
    own = f"{LISTENER_PREFIX}{listener.lower()}.{key}"
    if own in props:
        return own, props[own].strip()
    if key in props:
        return key, props[key].strip()
    return key, None


@dataclass(frozen=True)
class ListenerTls:
    """The TLS settings of one SSL listener, as read (files not yet loaded)."""

    name: str
    keystore: KeystoreSource
    truststore: TruststoreSource
    client_auth: str  # required | requested | none
    check_hostname: bool
    principal_mapper: PrincipalMapper = DEFAULT_MAPPER

    def principal(self, auth_context: Mapping[str, Sequence[bytes]]) -> str:
        """The principal of a connection to this listener (ssl_principal with its
        ssl.principal.mapping.rules)."""
        return ssl_principal(auth_context, self.principal_mapper)

    def certificate_principal(self, der: bytes | None) -> str:
        """The principal of a connection to this listener served by Python's ssl (the
        Kafka protocol listener): certificate_principal with its mapping rules."""
        return certificate_principal(der, self.principal_mapper)

    def load(self, on_reload_error: Callable[[str], None] | None = None) -> ServerTls:
        """Reads the PEM material (InvalidConfigError naming the listener if it cannot be
        used); `on_reload_error` hears of a rotated file that cannot be."""
        try:
            return ServerTls(
                self.keystore, self.truststore, self.client_auth == "required", on_reload_error
            )
        except TlsConfigError as exc:
            raise InvalidConfigError(
                f"Invalid SSL configuration of listener {self.name}: {exc}"
            ) from None


def _pem_only(given: str, value: str | None) -> None:
    if value and value.upper() != "PEM":
        raise InvalidConfigError(
            f"invalid value '{value}' for config '{given}': Strom reads PEM only (convert "
            "a JKS or PKCS12 store with keytool/openssl)"
        )


def _no_store_password(given: str, value: str | None) -> None:
    if value:
        raise InvalidConfigError(
            f"{given} cannot be specified with PEM format, only the key password "
            "(ssl.key.password) may be specified"
        )


def listener_tls(props: Mapping[str, str], name: str, protocol: str) -> ListenerTls:
    def get(key: str) -> tuple[str, str | None]:
        return _setting(props, name, key)

    _pem_only(*get("ssl.keystore.type"))
    _pem_only(*get("ssl.truststore.type"))
    _no_store_password(*get("ssl.keystore.password"))
    _no_store_password(*get("ssl.truststore.password"))
    location_key, location = get("ssl.keystore.location")
    chain_key, chain = get("ssl.keystore.certificate.chain")
    key_key, key = get("ssl.keystore.key")
    _, key_password = get("ssl.key.password")
    password_name = _setting(props, name, "ssl.key.password")[0]
    if location and (chain or key):
        raise InvalidConfigError(
            f"listener {name}: set {location_key} or {chain_key} with {key_key}, not both"
        )
    if location:
        keystore = KeystoreSource(
            path=location,
            password=key_password or None,
            password_name=password_name,
            setting=location_key,
        )
    elif chain and key:
        keystore = KeystoreSource(
            inline_key=key.encode(),
            inline_chain=chain.encode(),
            password=key_password or None,
            password_name=password_name,
        )
    else:
        raise InvalidConfigError(
            f"listener {name} uses SSL but has no keystore: set ssl.keystore.location (a PEM "
            "file with the private key and certificate chain) or ssl.keystore.certificate.chain "
            f"and ssl.keystore.key (or their {LISTENER_PREFIX}{name.lower()}. forms)"
        )
    trust_key, trust = get("ssl.truststore.location")
    _, inline_trust = get("ssl.truststore.certificates")
    truststore = (
        TruststoreSource(path=trust, setting=trust_key)
        if trust
        else TruststoreSource(inline=inline_trust.encode() if inline_trust else None)
    )
    auth_key, auth = get("ssl.client.auth")
    if protocol == "SASL_SSL" and auth_key == "ssl.client.auth":
        auth = None  # KIP-684: the broker-wide setting is not this listener's (above)
    client_auth = (auth or "none").lower()
    if client_auth not in CLIENT_AUTH:
        raise InvalidConfigError(
            f"invalid value '{auth}' for config '{auth_key}': expected required, requested or none"
        )
    _, algorithm = get("ssl.endpoint.identification.algorithm")
    algorithm = "https" if algorithm is None else algorithm.lower()
    if algorithm not in ("https", ""):
        raise InvalidConfigError(
            f"invalid value '{algorithm}' for config 'ssl.endpoint.identification.algorithm': "
            "expected https or an empty value"
        )
    rules_key, rules = get("ssl.principal.mapping.rules")
    mapper = parse_rules(rules, rules_key)
    return ListenerTls(name, keystore, truststore, client_auth, algorithm == "https", mapper)


ANONYMOUS = "User:ANONYMOUS"


def ssl_principal(
    auth_context: Mapping[str, Sequence[bytes]], mapper: PrincipalMapper = DEFAULT_MAPPER
) -> str:
    """The principal of a request's connection, as Kafka's default SSL principal builder
    names it: `User:` and the name `mapper` (the listener's ssl.principal.mapping.rules)
    gives the subject distinguished name of the client certificate that the TLS
    handshake verified (`context.auth_context()` of a gRPC servicer; RFC 2253 form, as
    Java's X500Principal.getName gives it), or User:ANONYMOUS (plaintext, or TLS without
    a client certificate; no rule applies to it, as in Kafka). A DN no rule maps raises
    principal_mapping.NoMatchingRule: the connection has no principal and is refused, as
    Kafka fails its authentication. The authorizer of issue 18's next layer reads it."""
    subject = auth_context.get("x509_subject") or ()
    return subject_principal(subject[0].decode(errors="replace") if subject else None, mapper)


def subject_principal(subject: str | None, mapper: PrincipalMapper = DEFAULT_MAPPER) -> str:
    """`User:` and what `mapper` makes of a verified client certificate's subject DN (RFC
    2253 form), or User:ANONYMOUS without one: the rule of both front ends."""
    if not subject:
        return ANONYMOUS
    return f"User:{mapper.name(subject)}"


def certificate_principal(der: bytes | None, mapper: PrincipalMapper = DEFAULT_MAPPER) -> str:
    """subject_principal of a client certificate as Python's ssl gives it (DER, None
    without one); its subject in RFC 2253 form, most specific first, as gRPC gives it."""
    if not der:
        return ANONYMOUS
    from cryptography import x509

    return subject_principal(x509.load_der_x509_certificate(der).subject.rfc4514_string(), mapper)
