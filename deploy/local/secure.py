"""What `make run-secure` (deploy/local/cluster.py --secure) adds to `make run`'s cluster,
all under <dir> (.local-cluster-secure by default), made on first use and reused:

- <dir>/tls/: a CA and a keystore per node (deploy/local/certs.py), subject
  CN=strom-node-<i>, SANs 127.0.0.1 and localhost (the nodes dial each other by address and
  check it: ssl.endpoint.identification.algorithm stays https);
- <dir>/admin.password (0600): the admin user's password, random, made once; the user is
  created with it at format time (`strom storage format --add-scram`, as kafka-storage.sh
  bootstraps SCRAM users), so it exists before any node serves;
- <dir>/admin-client.properties (0600, it holds the password): Kafka's client properties
  (security.protocol=SASL_SSL, sasl.mechanism, sasl.jaas.config, ssl.truststore.location)
  for `--command-config` of every `strom` tool.

Each node's listeners, as Kafka's secured clusters split them:

    CLIENT       SASL_SSL  SCRAM-SHA-512, TLS without client certificates
    REPLICATION  SSL       inter.broker.listener.name: replica fetches, mTLS
    CONTROLLER   SSL       Raft, registrations, heartbeats, forwarding: mTLS

ssl.client.auth=required for every SSL listener (the nodes present their keystore to each
other), none for CLIENT (SASL names its callers). The authorizer is on with Kafka's
StandardAuthorizer semantics; super.users are the admin user and the nodes' certificate
principals (User:CN=strom-node-<i>: the DEFAULT principal mapping keeps the whole DN), and
allow.everyone.if.no.acl.found=false (Kafka's default): any other user needs ACLs
(`strom acls`).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from certs import ensure_node_certs, write

ADMIN_USER = "admin"
MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def node_name(node: int) -> str:
    return f"strom-node-{node}"


def node_principal(node: int) -> str:
    return f"User:CN={node_name(node)}"


@dataclass(frozen=True)
class Secured:
    ca: str  # the CA certificate: the clients' ssl.truststore.location
    keystores: dict[int, str]  # node -> its key and certificate chain
    admin_password: str
    client_config: str  # admin-client.properties


def admin_password(directory: str) -> str:
    """The password of <directory>/admin.password, made (random, 0600) on first use."""
    path = os.path.join(directory, "admin.password")
    if not os.path.exists(path):
        # URL-safe characters: nothing to quote in --add-scram's [name=...,password=...]
        # or in the JAAS config's "...".
        write(path, (secrets.token_urlsafe(24) + "\n").encode(), private=True)
    with open(path) as f:
        return f.read().strip()


def client_properties(password: str, ca: str) -> str:
    jaas = f'{SCRAM_MODULE} required username="{ADMIN_USER}" password="{password}";'
    return (
        "# The admin user of `make run-secure` (deploy/local/secure.py writes this): pass it\n"
        "# to any strom tool as --command-config.\n"
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={MECHANISM}\n"
        f"sasl.jaas.config={jaas}\n"
        f"ssl.truststore.location={ca}\n"
    )


def prepare(directory: str, nodes: Sequence[int]) -> Secured:
    directory = os.path.abspath(directory)
    made = ensure_node_certs(os.path.join(directory, "tls"), [node_name(i) for i in nodes])
    password = admin_password(directory)
    config = write(
        os.path.join(directory, "admin-client.properties"),
        client_properties(password, made.ca).encode(),
        private=True,
    )
    keystores = {i: made.keystores[node_name(i)] for i in nodes}
    return Secured(made.ca, keystores, password, config)


def add_scram(secured: Secured) -> str:
    """The --add-scram argument of `strom storage format` that creates the admin user."""
    return f"{MECHANISM}=[name={ADMIN_USER},password={secured.admin_password}]"


def server_properties(
    secured: Secured, node: int, ports: tuple[int, int, int], nodes: Sequence[int]
) -> list[str]:
    """The listener, TLS, SASL and authorizer lines of a node's server.properties; `ports`
    are its CLIENT, REPLICATION and CONTROLLER listeners'."""
    client, replication, controller = ports
    super_users = ";".join([f"User:{ADMIN_USER}", *(node_principal(i) for i in nodes)])
    return [
        f"listeners=CLIENT://127.0.0.1:{client},REPLICATION://127.0.0.1:{replication},"
        f"CONTROLLER://127.0.0.1:{controller}",
        "listener.security.protocol.map=CLIENT:SASL_SSL,REPLICATION:SSL,CONTROLLER:SSL",
        "inter.broker.listener.name=REPLICATION",
        "controller.listener.names=CONTROLLER",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={secured.keystores[node]}",
        f"ssl.truststore.location={secured.ca}",
        "# mTLS between nodes; clients authenticate with SASL instead.",
        "ssl.client.auth=required",
        "listener.name.client.ssl.client.auth=none",
        f"listener.name.client.sasl.enabled.mechanisms={MECHANISM}",
        f"authorizer.class.name={AUTHORIZER}",
        f"super.users={super_users}",
        "allow.everyone.if.no.acl.found=false",
    ]
