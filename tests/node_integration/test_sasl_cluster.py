"""SASL over gRPC (issue 18), with real node processes on loopback: every listener
SASL_PLAINTEXT — clients, the inter-broker listener (replica fetches) and the controller
listener (registration, heartbeats, forwarding) — with PLAIN users declared in the JAAS
config, as Kafka's PlainLoginModule declares them (the nodes and the admin log in so), and
SCRAM-SHA-512 users whose credentials the admin writes into the metadata log.

The attacks: no SASL at all, a wrong password, an unknown user, a mechanism the listener
does not enable, an absurdly large SASL message, a session token replayed on another
connection, a token altered, a token past its lifetime (connections.max.reauth.ms). Each is
refused with Kafka's error name and nothing is written; the node keeps serving."""

from __future__ import annotations

import os
import time

import grpc
import pytest
from node_cluster import NodeCluster, wait_until

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
from strom.consumer import Consumer
from strom.errors import AuthenticationError, TopicAuthorizationFailedError
from strom.producer import Producer
from strom_api.sasl_client import METADATA_KEY, SaslLogin, sync_authenticate, sync_sasl_channel
from strom_api.sasl_plain import plain_message
from strom_api.scram_credential import MECHANISM_CODES, salted_password
from strom_api.v1 import client_pb2, client_pb2_grpc, controller_pb2, security_pb2

TOPIC = "sasl-orders"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
USERS = {"broker": "broker-secret", "admin": "admin-secret", "alice": "alice-secret"}
REAUTH_MS = 3000
JAAS = (
    f'{PLAIN_MODULE} required username="broker" password="broker-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
ADMIN = SaslLogin("PLAIN", "admin", "admin-secret")


class SaslCluster(NodeCluster):
    def _write_config(self, node: int) -> None:
        super()._write_config(node)
        lines = {
            "listeners": f"CLIENT://127.0.0.1:{self.broker_port[node]},"
            f"CONTROLLER://127.0.0.1:{self.controller_port[node]}",
            "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.client.plain.sasl.jaas.config": JAAS,
            "listener.name.controller.plain.sasl.jaas.config": JAAS,
            "connections.max.reauth.ms": str(REAUTH_MS),
            # The SASL principals are what the authorizer judges (the nodes log in as broker).
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:broker;User:admin",
        }
        with open(self.config_path(node), "a") as f:  # later lines win
            f.writelines(f"{k}={v}\n" for k, v in lines.items())

    def channel(self, target: str) -> grpc.Channel:
        return sync_sasl_channel(grpc.insecure_channel(target), ADMIN)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = SaslCluster(str(tmp_path_factory.mktemp("sasl")), 3)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        yield cluster
    finally:
        cluster.stop_all()


def bootstrap(cluster: NodeCluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids)


def sasl(user: str = "alice", password: str | None = None) -> dict[str, object]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS.get(user, "x") if password is None else password,
    }


def metadata(channel: grpc.Channel, token: str | None = None) -> client_pb2.MetadataResponse:
    stub = client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]
    extra = () if token is None else ((METADATA_KEY, token),)
    return stub.Metadata(client_pb2.MetadataRequest(), timeout=5, metadata=extra)


def grant(admin: AdminClient, user: str, operation: ACLOperation, kind: ResourceType, name: str):
    pattern = ResourcePattern(kind, name, ACLResourcePatternType.LITERAL)
    admin.create_acls([ACL(f"User:{user}", "*", operation, ACLPermissionType.ALLOW, pattern)])


def test_clients_and_nodes_authenticate_and_replicate_over_sasl(cluster):
    with AdminClient(bootstrap(cluster), **sasl("admin")) as admin:  # type: ignore[arg-type]
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={"min.insync.replicas": "3"})])
        admin.create_topics([NewTopic("sasl-private", 1, 3)])
        grant(admin, "alice", ACLOperation.ALL, ResourceType.TOPIC, TOPIC)
        grant(admin, "alice", ACLOperation.READ, ResourceType.GROUP, "alice-group")
        grant(admin, "bob", ACLOperation.WRITE, ResourceType.TOPIC, TOPIC)
    values = [b"v%d" % i for i in range(20)]
    with Producer(bootstrap(cluster), acks="all", **sasl()) as producer:  # type: ignore[arg-type]
        futures = [producer.send(TOPIC, v) for v in values]
        producer.flush()
        # acks=all with min.insync.replicas=3: both followers fetched over SASL.
        assert all(f.get(timeout=30).offset >= 0 for f in futures)
    # The sessions expire every REAUTH_MS: a consumer that outlives one re-authenticates.
    time.sleep(REAUTH_MS / 1000)
    consumer = Consumer(
        TOPIC,
        bootstrap_servers=bootstrap(cluster),
        group_id="alice-group",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **sasl(),  # type: ignore[arg-type]
    )
    with consumer:
        seen = [r.value for _, r in zip(values, consumer, strict=False)]
    assert seen == values


def test_the_authorizer_judges_the_sasl_principal(cluster):
    """alice's ACLs name User:alice: she may write her topic, not another one."""
    with pytest.raises(TopicAuthorizationFailedError):
        with Producer(bootstrap(cluster), **sasl()) as producer:  # type: ignore[arg-type]
            producer.send("sasl-private", b"not hers").get(timeout=20)
    assert "Principal = User:alice is Denied operation = " in "".join(
        cluster.log_text(n) for n in cluster.ids
    )


def add_scram_user(cluster: NodeCluster, name: str, password: str) -> None:
    salt = os.urandom(16)
    request = controller_pb2.AlterUserScramCredentialsRequest(
        upsertions=[
            controller_pb2.AlterUserScramCredentialsRequest.Upsertion(
                name=name,
                mechanism=MECHANISM_CODES["SCRAM-SHA-512"],
                iterations=4096,
                salt=salt,
                salted_password=salted_password("SCRAM-SHA-512", password.encode(), salt, 4096),
            )
        ]
    )
    answer = cluster.call("AlterUserScramCredentials", request)
    assert [r.error.code for r in answer.results] == [0]


def scram(user: str, password: str) -> dict[str, object]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def test_scram_users_from_the_metadata_log_produce_and_are_refused_a_wrong_password(cluster):
    add_scram_user(cluster, "bob", "bob-secret")

    def produced() -> bool:
        try:
            with Producer(bootstrap(cluster), **scram("bob", "bob-secret")) as producer:  # type: ignore[arg-type]
                return producer.send(TOPIC, b"from bob").get(timeout=10).offset >= 0
        except AuthenticationError:
            return False  # not every broker has replayed the credential yet

    wait_until(produced, 15, "bob producing with SCRAM-SHA-512")
    with pytest.raises(AuthenticationError) as refused:
        with Producer(bootstrap(cluster), **scram("bob", "not-bob")) as producer:  # type: ignore[arg-type]
            producer.send(TOPIC, b"never").get(timeout=20)
    assert refused.value.name == "SASL_AUTHENTICATION_FAILED"
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in refused.value.message
    # The password is nowhere on the nodes: not in their logs, not in the metadata log.
    for node in cluster.ids:
        assert "bob-secret" not in cluster.log_text(node)


@pytest.mark.parametrize(
    "user, password", [("alice", "wrong"), ("mallory", "whatever")], ids=["wrong", "unknown"]
)
def test_a_bad_password_or_unknown_user_is_refused_at_once(cluster, user, password):
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as refused:
        with Producer(bootstrap(cluster), **sasl(user, password)) as producer:  # type: ignore[arg-type]
            producer.send(TOPIC, b"never").get(timeout=20)
    assert refused.value.name == "SASL_AUTHENTICATION_FAILED"
    assert "Invalid username or password" in refused.value.message
    assert time.monotonic() - started < 10  # not retried into a timeout


def test_a_client_without_sasl_is_refused_and_told_why(cluster):
    with grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[1]}") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            metadata(channel)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert refused.value.details().startswith("SASL_AUTHENTICATION_FAILED: listener CLIENT")


def test_a_mechanism_the_listener_does_not_enable_is_refused_with_the_enabled_ones(cluster):
    with grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[1]}") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            sync_authenticate(channel, SaslLogin("SCRAM-SHA-256", "alice", "alice-secret"))
    assert refused.value.details().startswith("UNSUPPORTED_SASL_MECHANISM")
    assert "enabled: PLAIN, SCRAM-SHA-512" in refused.value.details()


def test_an_absurd_sasl_message_is_refused_and_the_node_serves_on(cluster):
    request = security_pb2.SaslAuthenticateRequest(
        mechanism="PLAIN", auth_bytes=b"\0alice\0" + b"x" * 2_000_000
    )
    with grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[1]}") as channel:
        call = channel.stream_stream(
            "/strom_api.v1.SecurityService/SaslAuthenticate",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=security_pb2.SaslAuthenticateResponse.FromString,
        )
        answers = list(call(iter([request]), timeout=10))
    assert security_pb2.SaslAuthenticateResponse  # (the type is what came back)
    assert answers[0].error.message.startswith("a SASL message of 2000007 bytes is larger")
    with cluster.channel(f"127.0.0.1:{cluster.broker_port[1]}") as channel:
        assert metadata(channel).cluster_id == cluster.cluster_id


def test_a_session_token_is_good_on_its_own_connection_only(cluster):
    target = f"127.0.0.1:{cluster.broker_port[1]}"
    with grpc.insecure_channel(target) as first:
        token = sync_authenticate(first, SaslLogin("PLAIN", "alice", "alice-secret"))
        token = token.session_token.decode()
        assert metadata(first, token).cluster_id == cluster.cluster_id
        altered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
        with pytest.raises(grpc.RpcError) as refused:
            metadata(first, altered)
        assert "not issued by this node" in refused.value.details()
        # The same token from another connection (a replay, or a token moved elsewhere).
        with grpc.insecure_channel(
            target, options=[("grpc.use_local_subchannel_pool", 1)]
        ) as other:
            with pytest.raises(grpc.RpcError) as refused:
                metadata(other, token)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "belongs to another connection" in refused.value.details()
        # Another node never accepts it.
        with grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[2]}") as elsewhere:
            with pytest.raises(grpc.RpcError) as refused:
                metadata(elsewhere, token)
        assert "not issued by this node" in refused.value.details()
        # Past connections.max.reauth.ms the session is over.
        time.sleep(REAUTH_MS / 1000 + 0.2)
        with pytest.raises(grpc.RpcError) as refused:
            metadata(first, token)
        assert "expired" in refused.value.details()
    assert plain_message  # the PLAIN framing the client used


def test_a_stream_ends_when_its_session_expires_and_says_to_authenticate_again(cluster):
    """A stream is admitted once, at its start; past connections.max.reauth.ms its next
    message ends it, as Kafka closes a connection whose session expired (KIP-368)."""
    with grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[1]}") as channel:
        token = sync_authenticate(channel, SaslLogin("PLAIN", "alice", "alice-secret"))
        stub = client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]
        asked = []  # each request waits until the answer before it came

        def requests():
            yield client_pb2.FetchRequest(max_wait_ms=0)
            while len(asked) < 1:
                time.sleep(0.01)
            time.sleep(REAUTH_MS / 1000 + 0.2)
            yield client_pb2.FetchRequest(max_wait_ms=0)

        call = stub.FetchStream(
            requests(), metadata=((METADATA_KEY, token.session_token.decode()),), timeout=30
        )
        with pytest.raises(grpc.RpcError) as ended:
            for answer in call:
                asked.append(answer)
    assert len(asked) == 1
    assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "expired (connections.max.reauth.ms)" in ended.value.details()
    assert ("strom-sasl-reauthenticate", "1") in tuple(ended.value.trailing_metadata())


def test_failed_authentications_are_counted_and_logged(cluster):
    def counted() -> float | None:
        samples = cluster.scrape(1)
        failed = sum(
            v
            for (name, labels), v in samples.items()
            if name == "kafka_server_socket_server_metrics_failed_authentication_total"
        )
        return failed or None

    wait_until(counted, 10, "failed authentications counted")
    assert "Failed authentication with /127.0.0.1" in cluster.log_text(1)
