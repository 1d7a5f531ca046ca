"""listener.security.protocol.map and the ssl.* settings of server.properties (issue 18,
first layer): each listener's protocol as Kafka 4 decides it, SASL refused with one line,
PEM keystores with their password, per-listener overrides."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

from server import server_config
from server.listener_security import ANONYMOUS, ListenerTls, certificate_principal, ssl_principal
from server.principal_mapping import NoMatchingRule, parse_rules
from storage.errors import InvalidConfigError
from strom_api.tls import ClientTls, aio_channel, client_tls
from tests.tls_certs import ENCRYPTED_PASSWORD, SERVICE_CLIENT_DN, make_certs

BASE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "log.dirs": "/tmp/strom-test",
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(str(tmp_path_factory.mktemp("certs")))


def config(**props: str) -> server_config.ServerConfig:
    return server_config.from_properties({**BASE, **props})


def test_kafka_default_map_and_controller_listener_plaintext_by_default():
    parsed = config()
    assert parsed.protocols == {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}
    assert parsed.tls == {}
    assert parsed.unknown == ()


def test_a_listener_name_without_a_protocol_is_refused():
    with pytest.raises(
        InvalidConfigError, match="No security protocol defined for listener CLIENT"
    ):
        config(listeners="CLIENT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093")


def test_an_explicit_map_must_name_the_controller_listener_too():
    with pytest.raises(InvalidConfigError, match="listener CONTROLLER"):
        config(**{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"})


SCRAM_LOGIN = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
    'password="broker-secret";'
)


def test_sasl_listeners_take_kafkas_sasl_settings(certs):
    parsed = config(
        **{
            "listeners": "CLIENT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "listener.security.protocol.map": "CLIENT:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
            "ssl.keystore.location": certs.node_keystore,
            "listener.name.client.sasl.enabled.mechanisms": "scram-sha-256,SCRAM-SHA-512",
            "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
            "listener.name.controller.scram-sha-512.sasl.jaas.config": SCRAM_LOGIN,
            "listener.name.client.scram-sha-256.sasl.jaas.config": SCRAM_LOGIN,
            "connections.max.reauth.ms": "60000",
        }
    )
    client, controller = parsed.sasl["CLIENT"], parsed.sasl["CONTROLLER"]
    assert client.mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert "CLIENT" in parsed.tls  # SASL_SSL: TLS underneath
    assert controller.mechanisms == ("SCRAM-SHA-512",)  # Strom's default
    assert controller.login is not None and controller.login.username == "broker"
    assert client.reauth_ms == controller.reauth_ms == 60_000
    assert not parsed.unknown


@pytest.mark.parametrize(
    "settings, says",
    [
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "names GSSAPI"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, "no PlainLoginModule declares its users"),
        ({"sasl.mechanism.controller.protocol": "PLAIN"}, "which listener CONTROLLER does not"),
        ({}, "set listener.name.controller.scram-sha-512.sasl.jaas.config"),
        ({"sasl.jaas.config": "ScramLoginModule username=x;"}, "invalid value for config"),
        (
            {"connections.max.reauth.ms": "-1", "sasl.jaas.config": SCRAM_LOGIN},
            "connections.max.reauth.ms",
        ),
    ],
)
def test_sasl_settings_that_cannot_work_refuse_to_start(settings, says):
    with pytest.raises(InvalidConfigError, match=says) as raised:
        config(
            **{
                "listeners": "CLIENT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                "listener.security.protocol.map": "CLIENT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
                **settings,
            }
        )
    assert "\n" not in str(raised.value)


def test_ssl_listener_settings_with_per_listener_overrides(certs):
    parsed = config(
        **{
            "listeners": "CLIENT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "listener.security.protocol.map": "CLIENT:SSL,CONTROLLER:SSL",
            "ssl.keystore.location": certs.node_keystore,
            "ssl.truststore.location": certs.ca,
            "ssl.client.auth": "required",
            "listener.name.client.ssl.client.auth": "requested",
            "listener.name.controller.ssl.endpoint.identification.algorithm": "",
        }
    )
    assert parsed.protocols == {"CLIENT": "SSL", "CONTROLLER": "SSL"}
    assert parsed.tls["CLIENT"].client_auth == "requested"
    assert parsed.tls["CONTROLLER"].client_auth == "required"
    assert parsed.tls["CLIENT"].check_hostname and not parsed.tls["CONTROLLER"].check_hostname
    assert parsed.unknown == ()  # the listener.name.* keys are read
    misspelt = config(**{"listener.name.CLIENT.ssl.client.auth": "none"})
    assert misspelt.unknown == ("listener.name.CLIENT.ssl.client.auth",)
    assert parsed.tls["CONTROLLER"].load().require_client_auth


def test_a_sasl_ssl_listener_asks_for_certificates_only_by_its_own_client_auth(certs):
    """Kafka's KIP-684: the broker-wide ssl.client.auth=required (mTLS between the nodes)
    does not make SASL_SSL clients show a certificate; only the listener's own key does."""
    secured = {
        "listeners": "CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9094,"
        "CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "REPLICATION",
        "ssl.keystore.location": certs.node_keystore,
        "ssl.truststore.location": certs.ca,
        "ssl.client.auth": "required",
    }
    parsed = config(**secured)
    assert parsed.tls["CLIENT"].client_auth == "none"
    assert not parsed.tls["CLIENT"].load().require_client_auth
    assert parsed.tls["REPLICATION"].client_auth == "required"
    assert parsed.tls["CONTROLLER"].client_auth == "required"
    own = config(**secured, **{"listener.name.client.ssl.client.auth": "required"})
    assert own.tls["CLIENT"].load().require_client_auth


def ssl(**props: str) -> dict[str, str]:
    return {"listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:SSL", **props}


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, "has no keystore"),
        ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "x"}, "PEM only"),
        (
            {"ssl.keystore.location": "x", "ssl.keystore.password": "p"},
            "cannot be specified with PEM format",
        ),
        ({"ssl.keystore.location": "x", "ssl.client.auth": "maybe"}, "expected required"),
        (
            {"ssl.keystore.location": "x", "listener.security.protocol.map": "PLAINTEXT:TLS"},
            "listener.security.protocol.map",
        ),
    ],
)
def test_bad_ssl_settings_are_one_line(props, expected):
    with pytest.raises(InvalidConfigError, match=expected) as raised:
        config(**ssl(**props))
    assert "\n" not in str(raised.value)


def test_an_encrypted_key_is_decrypted_with_ssl_key_password(certs):
    parsed = config(
        **ssl(
            **{
                "ssl.keystore.location": certs.encrypted_node_keystore,
                "ssl.key.password": ENCRYPTED_PASSWORD,
                "ssl.truststore.location": certs.ca,
            }
        )
    )
    loaded = parsed.tls["PLAINTEXT"].load()
    assert b"ENCRYPTED" not in loaded.pair.key and b"PRIVATE KEY" in loaded.pair.key


@pytest.mark.parametrize(
    ("password", "expected"),
    [
        ("wrong", "could not be decrypted with ssl.key.password"),
        (None, "is encrypted: set ssl.key.password"),
    ],
)
def test_a_wrong_or_missing_key_password_is_one_line(certs, password, expected):
    props = {"ssl.keystore.location": certs.encrypted_node_keystore}
    if password is not None:
        props["ssl.key.password"] = password
    with pytest.raises(InvalidConfigError, match=expected) as raised:
        config(**ssl(**props)).tls["PLAINTEXT"].load()
    assert "\n" not in str(raised.value)
    assert "Invalid SSL configuration of listener PLAINTEXT" in str(raised.value)


def test_inline_pem_forms(certs):
    """As server.properties gives them: continued lines joined, the line breaks lost."""
    node = certs.read(certs.node_keystore).decode()
    key_end = node.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----\n")
    parsed = config(
        **ssl(
            **{
                "ssl.keystore.key": node[:key_end].replace("\n", " "),
                "ssl.keystore.certificate.chain": node[key_end:].replace("\n", ""),
                "ssl.truststore.certificates": certs.read(certs.ca).decode(),
                "ssl.client.auth": "required",
            }
        )
    )
    loaded = parsed.tls["PLAINTEXT"].load()
    assert loaded.ca == certs.read(certs.ca)


def test_required_client_auth_needs_a_truststore(certs):
    parsed = config(
        **ssl(**{"ssl.keystore.location": certs.node_keystore, "ssl.client.auth": "required"})
    )
    with pytest.raises(InvalidConfigError, match="needs a truststore"):
        parsed.tls["PLAINTEXT"].load()


def test_a_key_that_does_not_match_its_certificate_is_refused(certs):
    other = certs.read(certs.client_keystore)
    key = other[: other.index(b"-----BEGIN CERTIFICATE-----")]
    mixed = certs.directory + "/mixed.pem"
    node = certs.read(certs.node_keystore)
    with open(mixed, "wb") as f:
        f.write(key + node[node.index(b"-----BEGIN CERTIFICATE-----") :])
    with pytest.raises(InvalidConfigError, match="does not belong to its first certificate"):
        config(**ssl(**{"ssl.keystore.location": mixed})).tls["PLAINTEXT"].load()


def test_ssl_principal_is_the_certificate_subject():
    assert ssl_principal({"x509_subject": [b"CN=strom-client,O=Acme"]}) == (
        "User:CN=strom-client,O=Acme"
    )
    assert ssl_principal({"transport_security_type": [b"insecure"]}) == ANONYMOUS


def test_ssl_principal_applies_the_mapping_rules():
    mapper = parse_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L")
    context = {"x509_subject": [SERVICE_CLIENT_DN.encode()]}
    assert ssl_principal(context, mapper) == "User:duke"
    assert ssl_principal({}, mapper) == ANONYMOUS  # no certificate: no rule applies
    with pytest.raises(NoMatchingRule):
        ssl_principal({"x509_subject": [b"CN=strom-client"]}, mapper)


def test_a_certificate_from_python_ssl_names_the_same_principal_as_from_grpc(certs):
    """The Kafka listener (Python's ssl, DER) and the gRPC listeners (x509_subject) name a
    client certificate alike, through the same mapping rules."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    def der(path: str) -> bytes:
        pem = open(path, "rb").read()
        return x509.load_pem_x509_certificates(pem)[0].public_bytes(Encoding.DER)

    mapper = parse_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT")
    service = der(certs.service_client_keystore)
    assert certificate_principal(service) == f"User:{SERVICE_CLIENT_DN}"
    assert certificate_principal(service) == ssl_principal(
        {"x509_subject": [SERVICE_CLIENT_DN.encode()]}
    )
    assert certificate_principal(service, mapper) == "User:duke"
    assert certificate_principal(der(certs.client_keystore), mapper) == "User:CN=strom-client"
    assert certificate_principal(None, mapper) == ANONYMOUS


SERVICE_RULES = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,RULE:^CN=([^,]+)$/cert-$1/"


def test_mapping_rules_are_read_per_listener(certs):
    parsed = config(
        **{
            "listeners": "CLIENT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "listener.security.protocol.map": "CLIENT:SSL,CONTROLLER:SSL",
            "ssl.keystore.location": certs.node_keystore,
            "ssl.truststore.location": certs.ca,
            "ssl.principal.mapping.rules": SERVICE_RULES,
            "listener.name.controller.ssl.principal.mapping.rules": "DEFAULT",
        }
    )
    assert parsed.unknown == ()
    context = {"x509_subject": [SERVICE_CLIENT_DN.encode()]}
    assert parsed.tls["CLIENT"].principal(context) == "User:duke"
    assert parsed.tls["CONTROLLER"].principal(context) == f"User:{SERVICE_CLIENT_DN}"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ssl.principal.mapping.rules", "RULE:^CN=(.*?)$/$1/X"),
        ("listener.name.plaintext.ssl.principal.mapping.rules", "DEFAUL"),
        ("listener.name.plaintext.ssl.principal.mapping.rules", ""),
    ],
)
def test_a_bad_mapping_rule_stops_the_node_naming_the_key(certs, key, value):
    with pytest.raises(InvalidConfigError, match=f"config '{key}'") as raised:
        config(**ssl(**{"ssl.keystore.location": certs.node_keystore, key: value}))
    assert "\n" not in str(raised.value)


def test_a_certificate_dn_maps_as_configured_over_real_tls(certs):
    """mTLS on loopback with the listener built from server.properties: the servicer sees
    the principal the listener's rules give the verified client certificate."""
    parsed = config(
        **{
            "listeners": "CLIENT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "listener.security.protocol.map": "CLIENT:SSL,CONTROLLER:PLAINTEXT",
            "listener.name.client.ssl.keystore.location": certs.node_keystore,
            "listener.name.client.ssl.truststore.location": certs.ca,
            "listener.name.client.ssl.client.auth": "required",
            "listener.name.client.ssl.principal.mapping.rules": (
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U"
            ),
        }
    )
    listener = parsed.tls["CLIENT"]

    answers = asyncio.run(_who_am_i(listener, certs))
    assert answers == {
        "service": "User:DUKE",
        "other subject": "REFUSED No rules apply to CN=strom-client",
    }


async def _who_am_i(listener: ListenerTls, certs) -> dict[str, str]:
    async def who(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            return listener.principal(context.auth_context()).encode()
        except NoMatchingRule as exc:
            return f"REFUSED {str(exc).partition(',')[0]}".encode()

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "test.Who", {"Am": grpc.unary_unary_rpc_method_handler(who)}
            ),
        )
    )
    port = server.add_secure_port("127.0.0.1:0", listener.load().credentials())
    await server.start()

    async def ask(tls: ClientTls) -> str:
        channel = aio_channel(f"127.0.0.1:{port}", tls)
        try:
            return (await channel.unary_unary("/test.Who/Am")(b"", timeout=5)).decode()
        finally:
            await channel.close()

    try:
        return {
            "service": await ask(client_tls(certs.ca, certs.service_client_keystore)),
            "other subject": await ask(client_tls(certs.ca, certs.client_keystore)),
        }
    finally:
        await server.stop(0)
