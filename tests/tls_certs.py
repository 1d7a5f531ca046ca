"""Certificates for the TLS tests, made at test time with `cryptography` (nothing checked
in, nothing fetched): a CA, node and client certificates it signs, and a second CA with a
client certificate of its own (one the nodes must refuse).

    certs = make_certs(tmp_dir)
    certs.ca                 # ca.pem: the CA certificate (a truststore)
    certs.node_keystore      # node.pem: key + chain, SAN 127.0.0.1 and localhost
    certs.client_keystore    # client.pem: key + chain (mTLS client), CN=strom-client
    certs.alice_keystore     # alice.pem: another client of the same CA, CN=alice
    certs.encrypted_node_keystore, ENCRYPTED_PASSWORD   # the node key, PKCS#8 encrypted
    certs.other_ca, certs.other_client_keystore         # signed by another CA
    certs.service_client_keystore   # subject CN=Duke,OU=ServiceUsers,O=Org,C=US (mapping rules)

EC P-256 keys: generated in milliseconds, unlike RSA.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

# The generator of `make run-secure` (deploy/local/certs.py), loaded from its file: deploy/
# is not a package.
_spec = importlib.util.spec_from_file_location(
    "strom_local_certs", Path(__file__).resolve().parents[1] / "deploy" / "local" / "certs.py"
)
assert _spec is not None and _spec.loader is not None
local_certs = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = local_certs  # its dataclasses look their module up there
_spec.loader.exec_module(local_certs)

ENCRYPTED_PASSWORD = "keypass-123"
_key = local_certs.new_key
_pem = local_certs.cert_pem
_key_pem = local_certs.key_pem


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    sans: list[x509.GeneralName] = (),  # type: ignore[assignment]
) -> x509.Certificate:
    """Test certificates live two days."""
    return local_certs.certificate(subject, key, issuer, sans, days=2)


SERVICE_CLIENT_DN = "CN=Duke,OU=ServiceUsers,O=Org,C=US"
LOOPBACK = [local_certs.alt_name(h) for h in local_certs.LOOPBACK]


@dataclass(frozen=True)
class Certs:
    directory: str
    ca: str
    node_keystore: str
    encrypted_node_keystore: str
    client_keystore: str
    other_ca: str
    other_client_keystore: str
    other_node_keystore: str  # signed by the other CA, SAN 127.0.0.1 (rotation tests)
    service_client_keystore: str  # signed by the CA, a DN of several parts
    alice_keystore: str  # a second client of the cluster's CA (authorization tests)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()


def _write(directory: str, name: str, data: bytes) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def keystore(
    subject: str,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    password: str | None = None,
) -> bytes:
    """A PEM keystore as Kafka reads it: the private key, then the certificate chain."""
    key = _key()
    cert = _cert(subject, key, issuer, LOOPBACK)
    return _key_pem(key, password) + _pem(cert) + _pem(issuer[0])


def make_certs(directory: str) -> Certs:
    os.makedirs(directory, exist_ok=True)
    ca_key, other_key = _key(), _key()
    ca = (_cert("Strom Test CA", ca_key, None), ca_key)
    other = (_cert("Another CA", other_key, None), other_key)
    node_key = _key()
    node_cert = _cert("strom-node", node_key, ca, LOOPBACK)
    return Certs(
        directory=directory,
        ca=_write(directory, "ca.pem", _pem(ca[0])),
        node_keystore=_write(directory, "node.pem", _key_pem(node_key) + _pem(node_cert)),
        encrypted_node_keystore=_write(
            directory,
            "node-encrypted.pem",
            _key_pem(node_key, ENCRYPTED_PASSWORD) + _pem(node_cert),
        ),
        client_keystore=_write(directory, "client.pem", keystore("strom-client", ca)),
        other_ca=_write(directory, "other-ca.pem", _pem(other[0])),
        other_client_keystore=_write(directory, "other-client.pem", keystore("intruder", other)),
        other_node_keystore=_write(directory, "other-node.pem", keystore("other-node", other)),
        service_client_keystore=_write(
            directory, "service-client.pem", keystore(SERVICE_CLIENT_DN, ca)
        ),
        alice_keystore=_write(directory, "alice.pem", keystore("alice", ca)),
    )
