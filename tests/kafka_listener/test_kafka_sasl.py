"""A SASL Kafka listener (KAFKA:SASL_PLAINTEXT): Kafka's clients log in with PLAIN (users
of the listener's JAAS config) and SCRAM-SHA-512 (a user bootstrapped with `strom storage
format --add-scram`), through the SASL rules the gRPC listeners use
(server/sasl_exchange.py), and the authorizer judges the SASL principal. Raw frames show
Kafka's SaslServerAuthenticator behaviour: nothing but ApiVersions and the SASL APIs
before authentication, an unsupported mechanism answered with the enabled ones, a session
of connections.max.reauth.ms (KIP-368) that the client renews on its connection as the same
principal, and a request after it ended closing the connection."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import time

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from strom.admin import AdminClient, NewTopic
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.kafka_cluster import (
    KafkaCluster,
    connect,
    decode_response,
    read_frame,
    request_frame,
)

TOPIC = "ledger"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
REAUTH_MS = 2000


class KafkaSaslCluster(KafkaCluster):
    def _write_config(self, node: int) -> None:
        super()._write_config(node)
        jaas = f"{PLAIN_MODULE} required " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
        lines = {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,KAFKA:SASL_PLAINTEXT,"
            "CONTROLLER:PLAINTEXT",
            "listener.name.kafka.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.kafka.plain.sasl.jaas.config": jaas + ";",
            "connections.max.reauth.ms": str(REAUTH_MS),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # The nodes talk PLAINTEXT gRPC among themselves (ANONYMOUS); no Kafka client is
            # ANONYMOUS: the Kafka listener serves nobody before a SASL login.
            "super.users": "User:ANONYMOUS;User:admin;User:bob",
        }
        with open(self.config_path(node), "a") as f:  # later lines win
            f.writelines(f"{k}={v}\n" for k, v in lines.items())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = KafkaSaslCluster(
        str(tmp_path_factory.mktemp("kafka-sasl")),
        1,
        format_args=["--add-scram", "SCRAM-SHA-512=[name=bob,password=bob-secret]"],
    )
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        with AdminClient(bootstrap(cluster)) as admin:
            admin.create_topics([NewTopic(TOPIC, 2, replication_factor=1)])
        yield cluster
    finally:
        cluster.stop_all()


def librdkafka_topics(cluster, mechanism: str, user: str, password: str, timeout_s=10) -> list[str]:
    from confluent_kafka.admin import AdminClient as KafkaAdmin

    admin = KafkaAdmin(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
    )
    return sorted(admin.list_topics(timeout=timeout_s).topics)


def test_librdkafka_logs_in_with_plain_and_scram_and_the_authorizer_sees_who(cluster):
    deadline = time.monotonic() + 30
    while TOPIC not in (seen := librdkafka_topics(cluster, "PLAIN", "admin", "admin-secret")):
        assert time.monotonic() < deadline, seen
        time.sleep(0.5)
    assert TOPIC in librdkafka_topics(cluster, "SCRAM-SHA-512", "bob", "bob-secret")
    assert TOPIC not in librdkafka_topics(cluster, "PLAIN", "alice", "alice-secret")


def test_a_wrong_password_is_refused(cluster):
    from confluent_kafka import KafkaException

    for mechanism, user in (("PLAIN", "admin"), ("SCRAM-SHA-512", "bob")):
        with pytest.raises(KafkaException):
            librdkafka_topics(cluster, mechanism, user, "not-the-password", 3)


def test_kafka_python_logs_in_with_scram(cluster):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="bob",
        sasl_plain_password="bob-secret",
        request_timeout_ms=10_000,
    )
    try:
        assert TOPIC in admin.list_topics()
    finally:
        admin.close()


# --- raw frames ----------------------------------------------------------------------------


def ask(sock, request, correlation_id: int):
    sock.sendall(request_frame(request, correlation_id))
    frame = read_frame(sock)
    if frame is None:
        return None
    answered, response = decode_response(frame, request.__api_key__, request.__version__)
    assert answered == correlation_id
    return response


def metadata_request():
    return load_request_schema(3, 12)(topics=None, include_topic_authorized_operations=False)


def plain_login(sock, user: str, password: str, correlation_id: int):
    handshake = ask(sock, load_request_schema(17, 1)(mechanism="PLAIN"), correlation_id)
    assert handshake.error_code == ErrorCode.none
    token = b"\0" + user.encode() + b"\0" + password.encode()
    return ask(sock, load_request_schema(36, 2)(auth_bytes=token), correlation_id + 1)


def kafka_address(cluster) -> str:
    return cluster.kafka_bootstrap().split(",")[0]


def test_nothing_but_the_sasl_apis_before_authentication(cluster):
    with connect(kafka_address(cluster)) as sock:
        versions = ask(sock, load_request_schema(18, 3)(
            client_software_name="raw", client_software_version="1"), 1)  # fmt: skip
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert served[17] == (0, 1) and served[36] == (0, 2)
        assert ask(sock, metadata_request(), 2) is None  # closed, as Kafka does
    with connect(kafka_address(cluster)) as sock:
        answer = ask(sock, load_request_schema(17, 1)(mechanism="GSSAPI"), 1)
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert answer.mechanisms == ("PLAIN", "SCRAM-SHA-512")
        assert read_frame(sock) is None  # then closed
    with connect(kafka_address(cluster)) as sock:
        refused = plain_login(sock, "alice", "wrong", 1)
        assert refused.error_code == ErrorCode.sasl_authentication_failed
        assert refused.error_message
        assert read_frame(sock) is None


def test_a_session_is_renewed_as_the_same_principal_and_ends_after_its_lifetime(cluster):
    with connect(kafka_address(cluster)) as sock:
        login = plain_login(sock, "admin", "admin-secret", 1)
        assert login.error_code == ErrorCode.none
        assert login.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        assert TOPIC in [t.name for t in ask(sock, metadata_request(), 3).topics]
        again = plain_login(sock, "admin", "admin-secret", 4)  # KIP-368 re-authentication
        assert again.error_code == ErrorCode.none
        assert TOPIC in [t.name for t in ask(sock, metadata_request(), 6).topics]
        time.sleep(REAUTH_MS / 1000 + 0.3)
        assert ask(sock, metadata_request(), 7) is None  # ended: the connection closes
    with connect(kafka_address(cluster)) as sock:
        assert plain_login(sock, "admin", "admin-secret", 1).error_code == ErrorCode.none
        other = plain_login(sock, "alice", "alice-secret", 3)
        assert other.error_code == ErrorCode.sasl_authentication_failed
        assert "Cannot change principals" in other.error_message
        assert read_frame(sock) is None


def bare(sock, token: bytes) -> bytes | None:
    sock.sendall(struct.pack(">i", len(token)) + token)
    return read_frame(sock)


def test_a_v0_handshake_then_bare_tokens_log_in(cluster):
    """Kafka's SASL before KIP-152, which old librdkafka (Debian 12's kcat) speaks: the
    tokens come size-prefixed without Kafka's request framing, and so do the answers."""
    with connect(kafka_address(cluster)) as sock:
        handshake = ask(sock, load_request_schema(17, 0)(mechanism="PLAIN"), 1)
        assert handshake.error_code == ErrorCode.none
        assert bare(sock, b"\0admin\0admin-secret") == b""  # PLAIN's empty answer
        assert TOPIC in [t.name for t in ask(sock, metadata_request(), 2).topics]
    with connect(kafka_address(cluster)) as sock:
        assert ask(sock, load_request_schema(17, 0)(mechanism="PLAIN"), 1).error_code == 0
        assert bare(sock, b"\0admin\0wrong") is None  # refused: the connection closes


def test_kcat_logs_in_with_plain(cluster):
    """Debian 12's kcat (librdkafka 2.0.2) logs in once SaslHandshake v0 and
    SaslAuthenticate v0 are served, as Kafka 4 serves them. Its SCRAM is refused, by Kafka 4
    too: librdkafka before 2.6.1 repeats its client nonce in the final message
    (librdkafka#4895), which RFC 5802's check refuses."""
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (Debian package kcat; .ci/run installs it)")
    for mechanism, user, password in (("PLAIN", "admin", "admin-secret"),):
        listed = subprocess.run(
            [kcat, "-L", "-J", "-b", cluster.kafka_bootstrap(), "-m", "10",
             "-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mechanism}",
             "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        assert TOPIC in [t["topic"] for t in json.loads(listed.stdout)["topics"]]


def test_before_login_a_frame_may_not_pass_sasl_server_max_receive_size(cluster):
    """As Kafka's SaslServerAuthenticator: an unauthenticated client cannot make the broker
    buffer socket.request.max.bytes (1 MiB here), only sasl.server.max.receive.size (512
    KiB by default); once logged in, the larger frames are read."""
    big = struct.pack(">i", 600_000)
    with connect(kafka_address(cluster)) as sock:
        sock.sendall(big)  # the size alone: refused before any body is read
        assert read_frame(sock) is None
    with connect(kafka_address(cluster)) as sock:
        assert plain_login(sock, "admin", "admin-secret", 1).error_code == ErrorCode.none
        sock.sendall(big)  # now within the limit: the broker waits for the body
        sock.settimeout(1.0)
        with pytest.raises(TimeoutError):
            sock.recv(1)
