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

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ENCRYPTED_PASSWORD = "keypass-123"


def _name(subject: str) -> x509.Name:
    """A common name, or a whole distinguished name in RFC 4514 form ("CN=a,O=b")."""
    if "=" in subject:
        return x509.Name.from_rfc4514_string(subject)
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    sans: list[x509.GeneralName] = (),  # type: ignore[assignment]
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer[0].subject if issuer else _name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    else:
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
        builder = builder.add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            False,
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


SERVICE_CLIENT_DN = "CN=Duke,OU=ServiceUsers,O=Org,C=US"
LOOPBACK = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]


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
