"""An SSL Kafka listener (listener.security.protocol.map KAFKA:SSL): librdkafka and
kafka-python connect with TLS; with ssl.client.auth=required a client certificate is the
connection's principal through ssl.principal.mapping.rules, as on Strom's gRPC listeners,
and the authorizer sees it: the super user's certificate lists the topic, alice's (same
CA, no ACLs) sees none, and clients without a certificate or of another CA are refused
at the handshake."""

from __future__ import annotations

import os

import pytest

from strom.admin import AdminClient, NewTopic
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.kafka_cluster import KafkaCluster
from tests.node_integration.node_cluster import wait_until
from tests.tls_certs import Certs, make_certs

TOPIC = "secrets"


class KafkaSslCluster(KafkaCluster):
    certs: Certs

    def _write_config(self, node: int) -> None:
        super()._write_config(node)
        lines = {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,KAFKA:SSL,CONTROLLER:PLAINTEXT",
            "listener.name.kafka.ssl.keystore.location": self.certs.node_keystore,
            "listener.name.kafka.ssl.truststore.location": self.certs.ca,
            "listener.name.kafka.ssl.client.auth": "required",
            "listener.name.kafka.ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # The nodes talk PLAINTEXT gRPC among themselves (ANONYMOUS); the Kafka listener
            # takes no connection without a certificate, so no Kafka client is ANONYMOUS.
            "super.users": "User:ANONYMOUS;User:strom-client",
        }
        with open(self.config_path(node), "a") as f:  # later lines win
            f.writelines(f"{k}={v}\n" for k, v in lines.items())


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, certs):
    KafkaSslCluster.certs = certs
    cluster = KafkaSslCluster(str(tmp_path_factory.mktemp("kafka-ssl")), 1)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        with AdminClient(bootstrap(cluster)) as admin:
            admin.create_topics([NewTopic(TOPIC, 2, replication_factor=1)])
        yield cluster
    finally:
        cluster.stop_all()


def split_keystore(certs: Certs, keystore: str, directory: str) -> tuple[str, str]:
    """librdkafka takes the key and the certificate as two files."""
    pem = certs.read(keystore)
    at = pem.index(b"-----BEGIN CERTIFICATE-----")
    name = os.path.basename(keystore)
    key, chain = os.path.join(directory, f"{name}.key"), os.path.join(directory, f"{name}.crt")
    with open(key, "wb") as f:
        f.write(pem[:at])
    with open(chain, "wb") as f:
        f.write(pem[at:])
    return key, chain


def librdkafka_topics(
    cluster: KafkaSslCluster, certs: Certs, tmp_path, keystore: str | None, timeout_s: float
) -> list[str]:
    from confluent_kafka.admin import AdminClient as KafkaAdmin

    config = {
        "bootstrap.servers": cluster.kafka_bootstrap(),
        "security.protocol": "SSL",
        "ssl.ca.location": certs.ca,
        "ssl.endpoint.identification.algorithm": "https",
    }
    if keystore is not None:
        config["ssl.key.location"], config["ssl.certificate.location"] = split_keystore(
            certs, keystore, str(tmp_path)
        )
    metadata = KafkaAdmin(config).list_topics(timeout=timeout_s)
    return sorted(metadata.topics)


def test_a_client_certificate_names_the_principal_the_authorizer_sees(cluster, certs, tmp_path):
    # The super user's certificate (CN=strom-client -> User:strom-client) sees the topic
    # (every broker's image has it once the broker answers; retried until then).
    wait_until(
        lambda: TOPIC in librdkafka_topics(cluster, certs, tmp_path, certs.client_keystore, 10),
        30,
        "the super user to see the topic over SSL",
    )
    # alice (CN=alice -> User:alice, no ACLs) authenticates but may describe nothing.
    assert TOPIC not in librdkafka_topics(cluster, certs, tmp_path, certs.alice_keystore, 10)


def test_a_client_without_an_accepted_certificate_is_refused(cluster, certs, tmp_path):
    from confluent_kafka import KafkaException

    for keystore in (None, certs.other_client_keystore):
        with pytest.raises(KafkaException):
            librdkafka_topics(cluster, certs, tmp_path, keystore, 3)


def test_kafka_python_connects_with_its_ssl_settings(cluster, certs, tmp_path):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(),
        security_protocol="SSL",
        ssl_cafile=certs.ca,
        ssl_certfile=certs.client_keystore,
        request_timeout_ms=10_000,
    )
    try:
        assert TOPIC in admin.list_topics()
    finally:
        admin.close()
