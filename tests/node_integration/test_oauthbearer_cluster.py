"""SASL/OAUTHBEARER with a real node (issue 18): a SASL_PLAINTEXT listener enabling
OAUTHBEARER checks JWTs against a JWKS file (sasl.oauthbearer.jwks.endpoint.url), with the
authorizer on and ACLs for the token's subject. A Producer given kafka-python's
sasl_oauth_token_provider produces as User:<sub>; when its token expires, its session ends
with it and the client asks the provider for a fresh one; a bad token is refused at once
with its cause. The tools log in with Kafka's client-credentials properties against a
token endpoint on loopback."""

from __future__ import annotations

import subprocess
import sys
import time

import grpc
import pytest
from node_cluster import NodeCluster

from strom.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    AdminClient,
    NewTopic,
    ResourcePattern,
    ResourceType,
)
from strom.errors import AuthenticationError, TopicAuthorizationFailedError
from strom.producer import Producer
from strom_api.sasl_client import SaslLogin, sync_authenticate, sync_sasl_channel
from tests.server.oauth_tokens import AUDIENCE, ISSUER, Keys, TokenEndpoint

TOPIC = "oauth-orders"
TOKEN_LIFETIME_S = 4
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" '
    'user_broker="broker-secret" user_admin="admin-secret";'
)
ADMIN = ("admin", "admin-secret")
KEYS = Keys()


class OAuthCluster(NodeCluster):
    jwks_url = ""

    def _write_config(self, node: int) -> None:
        super()._write_config(node)
        lines = {
            "listeners": f"CLIENT://127.0.0.1:{self.broker_port[node]},"
            f"CONTROLLER://127.0.0.1:{self.controller_port[node]}",
            "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "listener.name.client.sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "sasl.jaas.config": JAAS,
            "listener.name.client.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": (self.jwks_url),
            "listener.name.client.oauthbearer.sasl.oauthbearer.expected.audience": AUDIENCE,
            "listener.name.client.oauthbearer.sasl.oauthbearer.expected.issuer": ISSUER,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:broker;User:admin",
        }
        with open(self.config_path(node), "a") as f:  # later lines win
            f.writelines(f"{k}={v}\n" for k, v in lines.items())

    def channel(self, target: str) -> grpc.Channel:
        return sync_sasl_channel(grpc.insecure_channel(target), SaslLogin("PLAIN", *ADMIN))


class Provider:
    """kafka-python's AbstractTokenProvider: a fresh token at every call."""

    def __init__(self, sub: str = "alice", lifetime_s: float = 300, **claims: object) -> None:
        self.sub, self.lifetime_s, self.claims = sub, lifetime_s, claims
        self.tokens: list[str] = []

    def token(self) -> str:
        self.tokens.append(KEYS.token(self.sub, self.lifetime_s, **self.claims))
        return self.tokens[-1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("oauth")
    OAuthCluster.jwks_url = KEYS.write(base / "jwks.json")
    cluster = OAuthCluster(str(base), 1)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        admin = {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "admin",
            "sasl_plain_password": "admin-secret",
        }
        with AdminClient(bootstrap(cluster), **admin) as client:  # type: ignore[arg-type]
            client.create_topics([NewTopic(TOPIC, 1, 1)])
            pattern = ResourcePattern(ResourceType.TOPIC, TOPIC, ACLResourcePatternType.LITERAL)
            client.create_acls(
                [ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.ALLOW, pattern)]
            )
        yield cluster
    finally:
        cluster.stop_all()


def bootstrap(cluster: NodeCluster) -> str:
    return f"127.0.0.1:{cluster.broker_port[1]}"


def oauth(provider: Provider) -> dict[str, object]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": provider,
    }


def test_a_token_provider_produces_and_gets_a_fresh_token_when_its_token_expires(cluster):
    provider = Provider("alice", TOKEN_LIFETIME_S)
    with Producer(bootstrap(cluster), acks="all", **oauth(provider)) as producer:  # type: ignore[arg-type]
        first = producer.send(TOPIC, b"before").get(timeout=20)
        assert len(provider.tokens) == 1
        time.sleep(TOKEN_LIFETIME_S + 0.5)  # the first token has expired, and its session
        second = producer.send(TOPIC, b"after").get(timeout=20)
    assert second.offset == first.offset + 1
    assert len(provider.tokens) >= 2  # asked again at re-authentication


def test_the_session_ends_no_later_than_the_token(cluster):
    provider = Provider("alice", 60)
    with grpc.insecure_channel(bootstrap(cluster)) as channel:
        started = time.time()
        answer = sync_authenticate(channel, SaslLogin("OAUTHBEARER", token_provider=provider))
    assert answer.session_token
    assert 0 < answer.session_lifetime_ms <= (int(started) + 60 - started) * 1000 + 1


def test_the_token_subject_is_the_principal_the_authorizer_judges(cluster):
    with pytest.raises(TopicAuthorizationFailedError):
        with Producer(bootstrap(cluster), **oauth(Provider("mallory"))) as producer:  # type: ignore[arg-type]
            producer.send(TOPIC, b"not hers").get(timeout=20)
    assert "Principal = User:mallory is Denied operation = " in cluster.log_text(1)


@pytest.mark.parametrize(
    ("provider", "says"),
    [
        (Provider(lifetime_s=-120), "the token expired"),
        (Provider(aud="someone-else"), "audience (aud) is not one of"),
        (Provider(kid="rsa-unknown"), "key id 'rsa-unknown'"),
    ],
    ids=["expired", "audience", "kid"],
)
def test_a_bad_token_is_refused_at_once_with_its_cause(cluster, provider, says):
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as refused:
        with Producer(bootstrap(cluster), **oauth(provider)) as producer:  # type: ignore[arg-type]
            producer.send(TOPIC, b"never").get(timeout=20)
    assert refused.value.name == "SASL_AUTHENTICATION_FAILED"
    assert says in refused.value.message
    assert time.monotonic() - started < 10  # not retried into a timeout
    log = cluster.log_text(1)
    assert "Failed authentication with /127.0.0.1 (listener CLIENT, mechanism OAUTHBEARER)" in log
    assert all(token.split(".")[1] not in log for token in provider.tokens)


def test_the_tools_log_in_with_a_token_from_the_token_endpoint(cluster, tmp_path):
    """Kafka's client-credentials login in --command-config: the tool asks the identity
    provider for a token (sub = its client id) and lists what User:alice may see."""
    with TokenEndpoint(KEYS, {"alice": "alice-client-secret"}) as endpoint:
        properties = tmp_path / "client.properties"
        properties.write_text(
            "security.protocol=SASL_PLAINTEXT\n"
            "sasl.mechanism=OAUTHBEARER\n"
            f"sasl.oauthbearer.token.endpoint.url={endpoint.url}\n"
            "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
            ' required clientId="alice" clientSecret="alice-client-secret";\n'
        )
        listed = subprocess.run(
            [sys.executable, "-m", "strom_tools", "topics", "--bootstrap-server"]
            + [bootstrap(cluster), "--list", "--command-config", str(properties)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == [TOPIC]
    assert endpoint.requests == [{"grant_type": "client_credentials"}]
