"""A NodeCluster whose every listener is SSL with ssl.client.auth=required (client
listeners, the inter-broker one, the controller one), certificates from tests/tls_certs.py.
Node 1's key is encrypted (ssl.key.password)."""

from __future__ import annotations

import grpc
from node_cluster import NodeCluster

from tests.tls_certs import ENCRYPTED_PASSWORD, Certs


class TlsCluster(NodeCluster):
    certs: Certs

    def _write_config(self, node: int) -> None:
        super()._write_config(node)
        certs = self.certs
        keystore = certs.encrypted_node_keystore if node == 1 else certs.node_keystore
        lines = {
            "listeners": f"SSL://127.0.0.1:{self.broker_port[node]},"
            f"CONTROLLER://127.0.0.1:{self.controller_port[node]}",
            "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": keystore,
            "ssl.truststore.location": certs.ca,
            "ssl.client.auth": "required",
        }
        if node == 1:
            lines["ssl.key.password"] = ENCRYPTED_PASSWORD
        with open(self.config_path(node), "a") as f:  # later lines win
            f.writelines(f"{k}={v}\n" for k, v in lines.items())

    def channel(self, target: str, keystore: str | None = None) -> grpc.Channel:
        """A channel presenting the client certificate of `keystore` (default: the
        certs' client keystore)."""
        certs = self.certs
        pem = certs.read(keystore or certs.client_keystore)
        split = pem.index(b"-----BEGIN CERTIFICATE-----")
        credentials = grpc.ssl_channel_credentials(certs.read(certs.ca), pem[:split], pem[split:])
        return grpc.secure_channel(target, credentials)
