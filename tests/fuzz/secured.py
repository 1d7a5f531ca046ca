"""The secured cluster the fuzzer also runs against (issue 18): three combined nodes whose
every listener is SASL_SSL — the broker listener (clients, replica fetches) and the
controller listener (Raft, registration, heartbeats, forwarding) — with server-side TLS
from certificates made at run time (tests/tls_certs.py).

- The nodes log in to each other with PLAIN (users declared in the listeners' JAAS config,
  as Kafka's PlainLoginModule declares them: the controller listener must authenticate
  before any metadata, hence any SCRAM credential, exists); the checks' own calls log in as
  the PLAIN user `admin`.
- The fuzzer's authenticated calls log in as `fuzz`, an ordinary SCRAM-SHA-512 user of the
  metadata log (`strom storage format --add-scram`), so SCRAM sessions are what they ride.
"""

from __future__ import annotations

import os

import grpc

from strom_api.sasl_client import SaslLogin
from strom_api.tls import ClientTls, SaslSecurity, client_tls, sync_channel
from tests.fuzz.sasl import USER
from tests.node_integration.node_cluster import NodeCluster
from tests.tls_certs import make_certs

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
PLAIN_USERS = {"broker": "broker-fuzz-secret", "admin": "admin-fuzz-secret"}
USER_PASSWORD = "fuzz-user-secret"
JAAS = (
    f'{PLAIN_MODULE} required username="broker" password="{PLAIN_USERS["broker"]}" '
    + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    + ";"
)
ADMIN = SaslLogin("PLAIN", "admin", PLAIN_USERS["admin"])
FUZZ_USER = SaslLogin("SCRAM-SHA-512", USER, USER_PASSWORD)


class SecuredCluster(NodeCluster):
    """A NodeCluster with every listener SASL_SSL; `channel()` (the test helpers'
    controller calls) logs in as the admin."""

    def __init__(self, base: str, **options: object) -> None:
        self.certs = make_certs(os.path.join(base, "certs"))
        self.tls: ClientTls = client_tls(self.certs.ca)
        super().__init__(
            base,
            3,
            format_args=["--add-scram", f"SCRAM-SHA-512=[name={USER},password={USER_PASSWORD}]"],
            **options,  # type: ignore[arg-type]
        )

    def _write_config(self, node: int) -> None:
        super()._write_config(node)
        lines = {
            "listeners": f"CLIENT://127.0.0.1:{self.broker_port[node]},"
            f"CONTROLLER://127.0.0.1:{self.controller_port[node]}",
            "listener.security.protocol.map": "CLIENT:SASL_SSL,CONTROLLER:SASL_SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.certs.node_keystore,
            "ssl.truststore.location": self.certs.ca,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.client.plain.sasl.jaas.config": JAAS,
            "listener.name.controller.plain.sasl.jaas.config": JAAS,
        }
        with open(self.config_path(node), "a") as f:  # later lines win
            f.writelines(f"{k}={v}\n" for k, v in lines.items())

    def admin(self) -> SaslSecurity:
        return SaslSecurity(self.tls, ADMIN)

    def user(self) -> SaslSecurity:
        return SaslSecurity(self.tls, FUZZ_USER)

    def channel(self, target: str) -> grpc.Channel:
        return sync_channel(target, self.admin())

    def client_settings(self) -> dict[str, object]:
        """The fuzz user's settings for strom.Producer / Consumer (kafka-python's names)."""
        return {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": self.certs.ca,
            "sasl_mechanism": FUZZ_USER.mechanism,
            "sasl_plain_username": FUZZ_USER.username,
            "sasl_plain_password": FUZZ_USER.password,
        }
