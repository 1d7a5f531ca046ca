"""A certificate authority and node certificates made on this machine with `cryptography`
(nothing fetched): what `make run-secure` (deploy/local/cluster.py --secure) generates on
first use and reuses afterwards, and what tests/tls_certs.py builds its test certificates
from.

    python deploy/local/certs.py DIR NAME [NAME ...] [--san HOST ...]

writes DIR/ca.pem (the CA certificate: a truststore), DIR/ca-key.pem, and DIR/<NAME>.pem
for each NAME (a PEM keystore as Kafka's ssl.keystore.type=PEM reads it: the private key,
then the certificate chain; subject CN=<NAME>; SANs 127.0.0.1, localhost and every --san),
keys 0600. Files already there are kept; a node certificate that expires within
RENEW_BEFORE is made again with the same CA. `ensure_node_certs` does the same from Python.

EC P-256 keys (generated in milliseconds, unlike RSA), SHA-256 signatures; the CA is valid
CA_DAYS, node certificates NODE_DAYS (browsers' and Go's 825-day limit for leaf
certificates).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
NODE_DAYS = 825
RENEW_BEFORE = datetime.timedelta(days=30)
LOOPBACK = ("127.0.0.1", "localhost")

Issuer = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def name(subject: str) -> x509.Name:
    """A common name, or a whole distinguished name in RFC 4514 form ("CN=a,O=b")."""
    if "=" in subject:
        return x509.Name.from_rfc4514_string(subject)
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def alt_name(host: str) -> x509.GeneralName:
    """An IP address SAN for an address, a DNS name SAN otherwise."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: Issuer | None,
    sans: Sequence[x509.GeneralName] = (),
    days: int = NODE_DAYS,
) -> x509.Certificate:
    """A CA certificate (self-signed) when `issuer` is None, else a leaf certificate it
    signs, for TLS servers and clients alike (nodes are both to each other: mTLS)."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name(subject))
        .issuer_name(issuer[0].subject if issuer else name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # clocks a little apart
        .not_valid_after(now + datetime.timedelta(days=days))
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


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    """PKCS#8, encrypted with `password` when given (Kafka's ssl.key.password)."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def write(path: str, data: bytes, private: bool = False) -> str:
    """Writes `data` to `path` (created 0600 when `private`, never readable by others in
    between) and returns the path."""
    mode = 0o600 if private else 0o644
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)  # an older file keeps its mode through O_CREAT
    return path


@dataclass(frozen=True)
class NodeCerts:
    ca: str  # the CA certificate (ssl.truststore.location)
    keystores: dict[str, str]  # name -> key + chain (ssl.keystore.location)


def _load_ca(directory: str) -> Issuer | None:
    cert_path, key_path = os.path.join(directory, "ca.pem"), os.path.join(directory, "ca-key.pem")
    if not (os.path.exists(cert_path) and os.path.exists(key_path)):
        return None
    with open(cert_path, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    with open(key_path, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey), key_path
    return cert, key


def _still_good(path: str, ca: x509.Certificate) -> bool:
    """Whether the keystore at `path` holds a certificate of this CA that is valid for
    longer than RENEW_BEFORE."""
    try:
        with open(path, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())  # the first certificate
    except (OSError, ValueError):
        return False
    left = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    return cert.issuer == ca.subject and left > RENEW_BEFORE


def ensure_node_certs(
    directory: str, names: Sequence[str], sans: Sequence[str] = LOOPBACK
) -> NodeCerts:
    """The CA of `directory` (made on first use) and a keystore per name, made when
    missing, expiring, or from another CA; everything else is kept as it is."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    ca = _load_ca(directory)
    if ca is None:
        key = new_key()
        ca = (certificate("Strom local CA", key, None, days=CA_DAYS), key)
        write(os.path.join(directory, "ca-key.pem"), key_pem(key), private=True)
        write(os.path.join(directory, "ca.pem"), cert_pem(ca[0]))
    keystores = {}
    for node in names:
        path = os.path.join(directory, f"{node}.pem")
        if not _still_good(path, ca[0]):
            key = new_key()
            cert = certificate(node, key, ca, [alt_name(h) for h in sans])
            write(path, key_pem(key) + cert_pem(cert) + cert_pem(ca[0]), private=True)
        keystores[node] = path
    return NodeCerts(os.path.join(directory, "ca.pem"), keystores)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("names", nargs="+", metavar="NAME", help="a keystore CN=NAME per name")
    parser.add_argument(
        "--san", action="append", default=[], metavar="HOST", help="a DNS name or IP (repeatable)"
    )
    args = parser.parse_args(argv)
    made = ensure_node_certs(args.directory, args.names, [*LOOPBACK, *args.san])
    print(f"CA: {made.ca}")
    for node, path in made.keystores.items():
        print(f"{node}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
