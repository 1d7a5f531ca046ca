"""A secured cluster for the chaos runs, as an operator would deploy one (README, Security):

    listeners=CLIENT://...,REPLICATION://...,CONTROLLER://...
    listener.security.protocol.map=CLIENT:SASL_SSL,REPLICATION:SSL,CONTROLLER:SSL
    inter.broker.listener.name=REPLICATION
    ssl.client.auth=required                      # mTLS between the nodes
    sasl.enabled.mechanisms=SCRAM-SHA-512         # clients log in with SCRAM users
    connections.max.reauth.ms=3000                # sessions expire many times in a run
    authorizer.class.name=...StandardAuthorizer
    super.users=User:CN=strom-node;User:CN=strom-client;User:admin

The SCRAM users come with the cluster (`strom storage format --add-scram`): `admin`, a
super user the admin churn runs as, and `chaos`, the producers' and readers' user, which
the admin grants only what they need by ACLs (WRITE and READ on the topic, READ on the
groups named `chaos-*`). The harness itself (topic creation, leader look-ups, the replicas'
reads) calls the controller listener with the client certificate CN=strom-client and the
brokers as the SCRAM admin.
"""

from __future__ import annotations

import os
from typing import Any

import grpc

from strom.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    AdminClient,
    ResourcePattern,
    ResourceType,
)
from strom_api.sasl_client import SaslLogin
from strom_api.tls import SaslSecurity, client_tls
from tests.data_plane.data_client import DataClient
from tests.node_integration.node_cluster import NodeCluster
from tests.raft_integration.process_cluster import free_ports, wait_until
from tests.tls_certs import make_certs

MECHANISM = "SCRAM-SHA-512"
ADMIN = ("admin", "admin-secret")
WORKLOAD = ("chaos", "chaos-secret")
REAUTH_MS = 3000
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class SecuredCluster(NodeCluster):
    """NodeCluster with the settings above; `replication_port` is each broker's
    inter-broker listener (`broker_port` stays the client one)."""

    def __init__(self, base: str, nodes: int = 3, brokers: int = 0, **options: Any) -> None:
        self.certs = make_certs(os.path.join(base, "certs"))
        self.replication_port = dict(
            zip(range(1, nodes + brokers + 1), free_ports(nodes + brokers), strict=True)
        )
        users = [f"{MECHANISM}=[name={u},password={p}]" for u, p in (ADMIN, WORKLOAD)]
        format_args = [arg for user in users for arg in ("--add-scram", user)]
        super().__init__(base, nodes, brokers=brokers, format_args=format_args, **options)

    def _write_config(self, node: int) -> None:
        super()._write_config(node)
        host = self.host[node]
        listeners = []
        if not self.split or node not in self.controller_ids:
            listeners += [
                f"CLIENT://{host}:{self.broker_port[node]}",
                f"REPLICATION://{host}:{self.replication_port[node]}",
            ]
        if node in self.controller_ids:
            listeners.append(f"CONTROLLER://{host}:{self.controller_port[node]}")
        lines = {
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:SSL,CONTROLLER:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.certs.node_keystore,
            "ssl.truststore.location": self.certs.ca,
            "ssl.client.auth": "required",
            "sasl.enabled.mechanisms": MECHANISM,
            "connections.max.reauth.ms": str(REAUTH_MS),
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:CN=strom-node;User:CN=strom-client;User:{ADMIN[0]}",
        }
        if not self.split or node not in self.controller_ids:
            lines["inter.broker.listener.name"] = "REPLICATION"
        with open(self.config_path(node), "a") as f:  # later lines win
            f.writelines(f"{k}={v}\n" for k, v in lines.items())

    def channel(self, target: str) -> grpc.Channel:
        """The harness's channel to a controller listener: mTLS as CN=strom-client."""
        pem = self.certs.read(self.certs.client_keystore)
        split = pem.index(b"-----BEGIN CERTIFICATE-----")
        credentials = grpc.ssl_channel_credentials(
            self.certs.read(self.certs.ca), pem[:split], pem[split:]
        )
        return grpc.secure_channel(target, credentials)

    def client_settings(self, user: tuple[str, str] = WORKLOAD) -> dict[str, Any]:
        """kafka-python's settings of a client logging in as `user` over SASL_SSL."""
        return {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": self.certs.ca,
            "sasl_mechanism": MECHANISM,
            "sasl_plain_username": user[0],
            "sasl_plain_password": user[1],
        }

    def broker_security(self, user: tuple[str, str] = ADMIN) -> SaslSecurity:
        """How tests/data_plane's DataClient dials the client listeners, as `user`."""
        return SaslSecurity(client_tls(self.certs.ca), SaslLogin(MECHANISM, *user))

    def grant_workload(self, addresses: dict[int, str], topic: str, group_prefix: str) -> None:
        """The workload user's ACLs, created by the admin: produce to and read `topic`, and
        consume in the groups whose names start with `group_prefix`."""
        bootstrap = ",".join(addresses.values())
        principal = f"User:{WORKLOAD[0]}"
        topic_pattern = ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL)
        groups = ResourcePattern(ResourceType.GROUP, group_prefix, ACLResourcePatternType.PREFIXED)
        acls = [
            ACL(principal, "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, topic_pattern),
            ACL(principal, "*", ACLOperation.READ, ACLPermissionType.ALLOW, topic_pattern),
            ACL(principal, "*", ACLOperation.READ, ACLPermissionType.ALLOW, groups),
        ]
        with AdminClient(bootstrap, **self.client_settings(ADMIN)) as admin:
            answer = admin.create_acls(acls)
        assert not answer["failed"], answer
        # Every broker's authorizer replays them from the metadata log: wait until each
        # lets the user see the topic, so the workload starts with its grants everywhere.
        as_workload = DataClient(addresses, self.broker_security(WORKLOAD))
        for broker in addresses:

            def granted(broker: int = broker) -> bool:
                try:
                    meta = as_workload.metadata([topic], broker=broker)
                except AssertionError:
                    return False
                return meta.topics[0].error.code == 0

            wait_until(granted, 20, f"broker {broker} applying the workload's ACLs")
