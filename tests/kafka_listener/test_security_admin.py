"""The security admin APIs through the Kafka listener (issue 20), on a cluster with Kafka's
StandardAuthorizer and a SASL_PLAINTEXT Kafka listener. DescribeAcls, CreateAcls and
DeleteAcls: admin (a super user) manages ACLs with confluent-kafka (librdkafka: v2) and
kafka-python (v3); alice (no ACLs) is refused CLUSTER_AUTHORIZATION_FAILED; ACLs made through
the Kafka protocol are seen by Strom's own AdminClient (gRPC) and the reverse.
Describe/AlterUserScramCredentials: a user made by confluent-kafka (which salts the
password) logs in with SCRAM and is seen by Strom's AdminClient; Kafka's per-user errors
through kafka-python. SECURITY_DISABLED on a cluster without an authorizer is in
test_cluster_admin.py (the shared cluster has none)."""

from __future__ import annotations

import pytest

from strom.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    AdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.kafka_cluster import KafkaCluster

TIMEOUT = 20
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
USERS = {"admin": "admin-secret", "alice": "alice-secret"}


class KafkaAclCluster(KafkaCluster):
    def _write_config(self, node: int) -> None:
        super()._write_config(node)
        jaas = f"{PLAIN_MODULE} required " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
        lines = {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,KAFKA:SASL_PLAINTEXT,"
            "CONTROLLER:PLAINTEXT",
            "listener.name.kafka.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.kafka.plain.sasl.jaas.config": jaas + ";",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # The nodes (and Strom's AdminClient) talk PLAINTEXT gRPC as ANONYMOUS.
            "super.users": "User:ANONYMOUS;User:admin",
        }
        with open(self.config_path(node), "a") as f:  # later lines win
            f.writelines(f"{k}={v}\n" for k, v in lines.items())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = KafkaAclCluster(str(tmp_path_factory.mktemp("kafka-acls")), 1)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        yield cluster
    finally:
        cluster.stop_all()


def sasl_config(cluster, user: str, password: str, mechanism: str = "PLAIN") -> dict[str, str]:
    return {
        "bootstrap.servers": cluster.kafka_bootstrap(),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def librdkafka_admin(cluster, user: str = "admin"):
    from confluent_kafka.admin import AdminClient as KafkaAdmin

    return KafkaAdmin(sasl_config(cluster, user, USERS[user]))


@pytest.fixture(scope="module")
def kafka_python(cluster):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="admin",
        sasl_plain_password=USERS["admin"],
        request_timeout_ms=TIMEOUT * 1000,
    )
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def strom_admin(cluster):
    with AdminClient(bootstrap(cluster)) as admin:
        yield admin


def strom_acls(strom_admin, name: str) -> set[tuple[str, str, str, str, str]]:
    found, _ = strom_admin.describe_acls(
        ACLFilter(
            None,
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.ANY, name, ACLResourcePatternType.ANY),
        )
    )
    return {
        (
            a.principal,
            a.host,
            ACLOperation(a.operation).name,
            ACLPermissionType(a.permission_type).name,
            ACLResourcePatternType(a.resource_pattern.pattern_type).name,
        )
        for a in found
    }


def test_confluent_kafka_creates_describes_and_deletes_acls(cluster, strom_admin):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )
    from confluent_kafka.admin import ResourceType as KafkaResourceType

    admin = librdkafka_admin(cluster)
    read = AclBinding(
        KafkaResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
        "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    write = AclBinding(
        KafkaResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED,
        "User:alice", "*", AclOperation.WRITE, AclPermissionType.DENY,
    )  # fmt: skip
    bad = AclBinding(
        KafkaResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL,
        "User:alice", "*", AclOperation.ALTER, AclPermissionType.ALLOW,
    )  # fmt: skip
    futures = admin.create_acls([read, write, bad], request_timeout=TIMEOUT)
    assert futures[read].result(timeout=TIMEOUT) is None
    assert futures[write].result(timeout=TIMEOUT) is None
    with pytest.raises(Exception) as refused:
        futures[bad].result(timeout=TIMEOUT)
    error = refused.value.args[0]
    assert error.name() == "INVALID_REQUEST"
    assert "kafka-cluster" in error.str()

    # MATCH: every ACL that applies to the topic "orders" (the literal one and the prefix)
    match = AclBindingFilter(
        KafkaResourceType.TOPIC, "orders", ResourcePatternType.MATCH,
        None, None, AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    described = admin.describe_acls(match, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert set(described) == {read, write}
    # ANY pattern type with a name: only the patterns of that very name
    exact = AclBindingFilter(
        KafkaResourceType.ANY, "ord", ResourcePatternType.ANY,
        None, None, AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    assert admin.describe_acls(exact, request_timeout=TIMEOUT).result(timeout=TIMEOUT) == [write]

    # Seen by Strom's own AdminClient (gRPC)
    assert strom_acls(strom_admin, "orders") == {("User:alice", "*", "READ", "ALLOW", "LITERAL")}
    assert strom_acls(strom_admin, "ord") == {("User:alice", "*", "WRITE", "DENY", "PREFIXED")}

    deleted = admin.delete_acls([match], request_timeout=TIMEOUT)[match].result(timeout=TIMEOUT)
    assert set(deleted) == {read, write}
    assert strom_acls(strom_admin, "orders") == set()
    assert strom_acls(strom_admin, "ord") == set()


def test_confluent_kafka_without_cluster_alter_is_refused(cluster):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )
    from confluent_kafka.admin import ResourceType as KafkaResourceType

    admin = librdkafka_admin(cluster, "alice")
    grant = AclBinding(
        KafkaResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
        "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW,
    )  # fmt: skip
    every = AclBindingFilter(
        KafkaResourceType.ANY, None, ResourcePatternType.ANY,
        None, None, AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    calls = (
        lambda: admin.create_acls([grant], request_timeout=TIMEOUT)[grant],
        lambda: admin.delete_acls([every], request_timeout=TIMEOUT)[every],
    )
    for call in calls:
        with pytest.raises(Exception) as refused:
            call().result(timeout=TIMEOUT)
        assert refused.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
    # librdkafka 2.16 reads DescribeAcls' top-level error but answers an empty list (it
    # never sets it on the result, against Kafka's brokers too); kafka-python raises it.
    from kafka.admin import ACLFilter as KafkaACLFilter
    from kafka.admin import ACLOperation as KafkaOp
    from kafka.admin import ACLPermissionType as KafkaPermission
    from kafka.admin import ACLResourcePatternType as KafkaPatternType
    from kafka.admin import KafkaAdminClient
    from kafka.admin import ResourcePatternFilter as KafkaPatternFilter
    from kafka.admin import ResourceType as KafkaPythonResourceType
    from kafka.errors import ClusterAuthorizationFailedError

    alice = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
        request_timeout_ms=TIMEOUT * 1000,
    )
    try:
        with pytest.raises(ClusterAuthorizationFailedError, match="may not DESCRIBE Cluster"):
            alice.describe_acls(
                KafkaACLFilter(
                    None,
                    None,
                    KafkaOp.ANY,
                    KafkaPermission.ANY,
                    KafkaPatternFilter(KafkaPythonResourceType.ANY, None, KafkaPatternType.ANY),
                )  # fmt: skip
            )
    finally:
        alice.close()


def test_kafka_python_and_strom_see_each_others_acls(cluster, kafka_python, strom_admin):
    from kafka.admin import ACL as KafkaACL
    from kafka.admin import ACLFilter as KafkaACLFilter
    from kafka.admin import ACLOperation as KafkaOp
    from kafka.admin import ACLPermissionType as KafkaPermission
    from kafka.admin import ACLResourcePatternType as KafkaPatternType
    from kafka.admin import ResourcePattern as KafkaPattern
    from kafka.admin import ResourcePatternFilter as KafkaPatternFilter
    from kafka.admin import ResourceType as KafkaResourceType
    from kafka.errors import NoError

    # kafka-python creates, Strom sees
    group_acl = KafkaACL(
        "User:carol", "*", KafkaOp.READ, KafkaPermission.ALLOW,
        KafkaPattern(KafkaResourceType.GROUP, "payments", KafkaPatternType.LITERAL),
    )  # fmt: skip
    created = kafka_python.create_acls([group_acl])
    assert created["failed"] == [] and len(created["succeeded"]) == 1
    assert strom_acls(strom_admin, "payments") == {("User:carol", "*", "READ", "ALLOW", "LITERAL")}

    # Strom creates, kafka-python sees
    strom_admin.create_acls(
        [
            ACL(
                "User:dave", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "audit", ACLResourcePatternType.PREFIXED),
            )
        ]
    )  # fmt: skip
    every_for = KafkaACLFilter(
        principal="User:dave", host=None, operation=KafkaOp.ANY,
        permission_type=KafkaPermission.ANY,
        resource_pattern=KafkaPatternFilter(KafkaResourceType.ANY, None, KafkaPatternType.ANY),
    )  # fmt: skip
    found, error = kafka_python.describe_acls(every_for)
    assert error is NoError
    assert [
        (a.principal, a.operation, a.resource_pattern.resource_name,
         a.resource_pattern.pattern_type)
        for a in found
    ] == [("User:dave", KafkaOp.DESCRIBE, "audit", KafkaPatternType.PREFIXED)]  # fmt: skip

    # kafka-python deletes both; the answer names what each filter matched
    every_on = KafkaACLFilter(
        principal=None, host=None, operation=KafkaOp.ANY, permission_type=KafkaPermission.ANY,
        resource_pattern=KafkaPatternFilter(KafkaResourceType.GROUP, "payments",
                                            KafkaPatternType.MATCH),
    )  # fmt: skip
    results = kafka_python.delete_acls([every_for, every_on])
    assert [([a.principal for a in matched], error) for _, matched, error in results] == [
        (["User:dave"], NoError),
        (["User:carol"], NoError),
    ]
    assert strom_acls(strom_admin, "payments") == set()
    assert strom_acls(strom_admin, "audit") == set()


# --- SCRAM credentials ---------------------------------------------------------------------


def test_a_user_made_by_confluent_kafka_logs_in_with_scram(cluster, strom_admin):
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = librdkafka_admin(cluster)
    upsertion = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"carol-secret"
    )
    futures = admin.alter_user_scram_credentials([upsertion], request_timeout=TIMEOUT)
    assert futures["carol"].result(timeout=TIMEOUT) is None

    described = admin.describe_user_scram_credentials(["carol"], request_timeout=TIMEOUT)
    infos = described["carol"].result(timeout=TIMEOUT).scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_256, 8192)]
    seen = strom_admin.describe_user_scram_credentials(["carol"])["carol"].credential_infos
    assert [(i.mechanism, i.iterations) for i in seen] == [("SCRAM-SHA-256", 8192)]

    from confluent_kafka.admin import AdminClient as KafkaAdmin

    carol = KafkaAdmin(sasl_config(cluster, "carol", "carol-secret", "SCRAM-SHA-256"))
    carol.list_topics(timeout=TIMEOUT)  # raises when the login fails
    wrong = KafkaAdmin(sasl_config(cluster, "carol", "not-hers", "SCRAM-SHA-256"))
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException):
        wrong.list_topics(timeout=5)

    with pytest.raises(Exception) as unknown:
        admin.describe_user_scram_credentials(["ghost"], request_timeout=TIMEOUT)["ghost"].result(
            timeout=TIMEOUT
        )
    assert unknown.value.args[0].name() == "RESOURCE_NOT_FOUND"
    # Kafka's codes per user, as librdkafka reads them
    twice = [
        UserScramCredentialUpsertion(
            "ivy", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password
        )
        for password in (b"one", b"two")
    ]
    futures = admin.alter_user_scram_credentials(twice, request_timeout=TIMEOUT)
    with pytest.raises(Exception) as duplicate:
        futures["ivy"].result(timeout=TIMEOUT)
    assert duplicate.value.args[0].name() == "DUPLICATE_RESOURCE"


def test_kafka_python_gets_kafkas_errors_per_user(cluster, kafka_python):
    from kafka.admin import ScramMechanism, UserScramCredentialDeletion
    from kafka.admin import UserScramCredentialUpsertion as Upsertion

    answers = kafka_python.alter_user_scram_credentials(
        [
            Upsertion("erin", ScramMechanism.SCRAM_SHA_512, "erin-secret", iterations=4096),
            UserScramCredentialDeletion("frank", ScramMechanism.SCRAM_SHA_256),
            UserScramCredentialDeletion("gina", ScramMechanism.UNKNOWN),
            Upsertion("hal", ScramMechanism.SCRAM_SHA_256, "one", iterations=4096),
            Upsertion("hal", ScramMechanism.SCRAM_SHA_256, "two", iterations=4096),
        ]
    )
    assert answers["erin"] is None
    assert "does not exist" in answers["frank"]  # RESOURCE_NOT_FOUND
    assert answers["gina"].startswith("Unknown SCRAM mechanism 0")  # UNSUPPORTED_SASL_MECHANISM
    assert "cannot be altered twice" in answers["hal"]  # DUPLICATE_RESOURCE
    described = kafka_python.describe_user_scram_credentials(["erin", "nobody", "erin"])
    assert "does not exist" in described["nobody"]["error"]  # RESOURCE_NOT_FOUND
    assert "twice" in described["erin"]["error"]  # DUPLICATE_RESOURCE


def test_scram_apis_without_cluster_rights_are_refused(cluster):
    from kafka.admin import KafkaAdminClient, ScramMechanism
    from kafka.admin import UserScramCredentialUpsertion as Upsertion
    from kafka.errors import ClusterAuthorizationFailedError

    alice = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
        request_timeout_ms=TIMEOUT * 1000,
    )
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.describe_user_scram_credentials()
        answers = alice.alter_user_scram_credentials(
            [Upsertion("alice", ScramMechanism.SCRAM_SHA_256, "mine", iterations=4096)]
        )
        assert "may not ALTER Cluster" in answers["alice"]
    finally:
        alice.close()
