"""TLS material from PEM, as Kafka's `ssl.keystore.type=PEM` reads it, and the gRPC
credentials and channels made from it: shared by the nodes (their listeners and the
channels they open to each other) and the clients (Producer, Consumer, AdminClient, the
`strom` command).

- A keystore is one PEM text holding a private key and its certificate chain (leaf
  first), or the two apart (Kafka's `ssl.keystore.key` / `ssl.keystore.certificate.chain`,
  kafka-python's `ssl_keyfile` / `ssl_certfile`). An encrypted key (PKCS#8 "ENCRYPTED
  PRIVATE KEY") is decrypted with its password (`ssl.key.password`, `ssl_password`) by the
  `cryptography` package: gRPC takes only clear keys, which stay in memory, never on disk.
- A truststore is PEM CA certificates (`ssl.truststore.location` /
  `ssl.truststore.certificates`, `ssl_cafile`); without one, gRPC's bundled public roots.
- Hostname checking (Kafka's `ssl.endpoint.identification.algorithm=https`, the default;
  kafka-python's `ssl_check_hostname=True`): gRPC checks the target's host against the
  server certificate's SANs. gRPC has no switch to turn that off, so "no check" is done the
  way gRPC allows: the certificate is first fetched (verified against the truststore, its
  name not checked) and the name it carries is what the channel then expects.

Bad material is a TlsConfigError with one sentence naming the file or setting; a handshake
that fails is recognised in gRPC's error text (`handshake_failure`) so callers can say
"SSL handshake failed" with the cause instead of retrying into a timeout.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from strom_api.error_codes import ErrorCode
from strom_api.sasl_client import SASL_ATTRIBUTE, AioSasl, SaslLogin, sync_sasl_channel

_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"


class TlsConfigError(ValueError):
    """TLS material that cannot be used; the message names the setting or file."""


def _blocks(pem: bytes) -> list[tuple[str, bytes]]:
    """Each PEM block as (kind, canonical PEM). An inline value of server.properties has
    lost its line breaks (continued lines are joined), as in Kafka's inline PEM configs:
    the base64 body is wrapped again, so both forms read the same."""
    found = []
    for match in _BLOCK.finditer(pem):
        kind, body = match.group(1), match.group(2)
        if b":" in body:  # a traditional encrypted key's headers: kept as they are
            text = b"\n".join(line.strip() for line in body.strip().splitlines())
        else:
            flat = b"".join(body.split())
            text = b"\n".join(flat[i : i + 64] for i in range(0, len(flat), 64))
        block = b"-----BEGIN %s-----\n%s\n-----END %s-----\n" % (kind, text, kind)
        found.append((kind.decode(), block))
    return found


def read_pem(path: str, setting: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TlsConfigError(f"cannot read {setting} {path}: {exc.strerror}") from None


def certificates(pem: bytes, where: str) -> bytes:
    """The CERTIFICATE blocks of `pem`, each checked to be a certificate."""
    from cryptography import x509

    found = [block for kind, block in _blocks(pem) if kind == "CERTIFICATE"]
    if not found:
        raise TlsConfigError(f"{where} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    try:
        x509.load_pem_x509_certificates(b"".join(found))
    except ValueError as exc:
        raise TlsConfigError(f"{where} holds a certificate that cannot be read: {exc}") from None
    return b"".join(found)


def clear_private_key(pem: bytes, password: str | None, where: str, password_name: str) -> bytes:
    """The one private key of `pem` as clear PKCS#8 PEM, decrypted with `password`."""
    from cryptography.hazmat.primitives import serialization

    keys = [block for kind, block in _blocks(pem) if kind.endswith("PRIVATE KEY")]
    if len(keys) != 1:
        raise TlsConfigError(f"{where} must hold exactly one PEM private key, found {len(keys)}")
    encrypted = b"ENCRYPTED PRIVATE KEY" in keys[0] or b"Proc-Type: 4,ENCRYPTED" in keys[0]
    if encrypted and not password:
        raise TlsConfigError(f"the private key in {where} is encrypted: set {password_name}")
    if password and not encrypted:
        raise TlsConfigError(
            f"{password_name} is set but the private key in {where} is not encrypted"
        )
    try:
        key = serialization.load_pem_private_key(keys[0], password.encode() if password else None)
    except (ValueError, TypeError):
        raise TlsConfigError(
            f"the private key in {where} could not be decrypted with {password_name}: wrong "
            "password, or a key format that cannot be read"
        ) from None
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _check_pair(key_pem: bytes, chain_pem: bytes, where: str) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    leaf = x509.load_pem_x509_certificates(chain_pem)[0]
    key = serialization.load_pem_private_key(key_pem, None)
    raw = serialization.PublicFormat.SubjectPublicKeyInfo
    pem = serialization.Encoding.PEM
    if leaf.public_key().public_bytes(pem, raw) != key.public_key().public_bytes(pem, raw):
        raise TlsConfigError(
            f"the private key in {where} does not belong to its first certificate "
            f"({leaf.subject.rfc4514_string()})"
        )


@dataclass(frozen=True)
class KeyPair:
    """A clear private key and its certificate chain, both PEM."""

    key: bytes
    chain: bytes


def key_pair(
    key_pem: bytes, chain_pem: bytes, password: str | None, where: str, password_name: str
) -> KeyPair:
    key = clear_private_key(key_pem, password, where, password_name)
    chain = certificates(chain_pem, where)
    _check_pair(key, chain, where)
    return KeyPair(key, chain)


# --- sources that can be read again (certificate rotation) ------------------------------


@dataclass(frozen=True)
class KeystoreSource:
    """Where a keystore comes from: a PEM file (read again when it changes) or inline
    PEM text (Kafka's ssl.keystore.key + ssl.keystore.certificate.chain)."""

    path: str | None = None
    key_path: str | None = None  # a separate key file (kafka-python's ssl_keyfile)
    inline_key: bytes | None = None
    inline_chain: bytes | None = None
    password: str | None = None
    password_name: str = "ssl.key.password"
    setting: str = "ssl.keystore.location"

    def load(self) -> KeyPair:
        if self.path is None:
            assert self.inline_key is not None and self.inline_chain is not None
            return key_pair(
                self.inline_key,
                self.inline_chain,
                self.password,
                "ssl.keystore.key",
                self.password_name,
            )
        chain = read_pem(self.path, self.setting)
        key = chain if self.key_path is None else read_pem(self.key_path, "ssl_keyfile")
        # the setting the key came from: a separate key file is kafka-python's ssl_keyfile
        where = (
            f"{self.setting} {self.path}"
            if self.key_path is None
            else f"ssl_keyfile {self.key_path}"
        )
        return key_pair(key, chain, self.password, where, self.password_name)

    def files(self) -> tuple[str, ...]:
        return tuple(p for p in (self.path, self.key_path) if p is not None)


@dataclass(frozen=True)
class TruststoreSource:
    path: str | None = None
    inline: bytes | None = None
    setting: str = "ssl.truststore.location"

    def load(self) -> bytes | None:
        if self.path is not None:
            return certificates(read_pem(self.path, self.setting), f"{self.setting} {self.path}")
        if self.inline is not None:
            return certificates(self.inline, "ssl.truststore.certificates")
        return None

    def files(self) -> tuple[str, ...]:
        return (self.path,) if self.path is not None else ()


# --- the side that dials ------------------------------------------------------------------


@dataclass(frozen=True)
class ClientTls:
    """What a dialling side trusts and presents; loaded once (a client's lifetime)."""

    ca: bytes | None  # None: gRPC's bundled public roots
    pair: KeyPair | None  # None: no certificate presented
    check_hostname: bool = True

    @staticmethod
    def load(
        truststore: TruststoreSource, keystore: KeystoreSource | None, check_hostname: bool
    ) -> ClientTls:
        pair = keystore.load() if keystore is not None else None
        return ClientTls(truststore.load(), pair, check_hostname)

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca,
            private_key=self.pair.key if self.pair else None,
            certificate_chain=self.pair.chain if self.pair else None,
        )

    def options(self, target: str) -> list[tuple[str, Any]]:
        if self.check_hostname:
            return []
        name = presented_name(target, self.ca)
        return [] if name is None else [("grpc.ssl_target_name_override", name)]


def client_tls(
    cafile: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    check_hostname: bool = True,
    password_name: str = "ssl_password",
    cert_setting: str = "ssl_certfile",
    ca_setting: str = "ssl_cafile",
) -> ClientTls:
    """kafka-python's ssl_* settings (and the client properties read into them): the key
    may be in `certfile` itself when `keyfile` is None."""
    if keyfile is not None and certfile is None:
        raise TlsConfigError(f"ssl_keyfile is set without {cert_setting}")
    keystore = (
        KeystoreSource(
            path=certfile,
            key_path=keyfile,
            password=password,
            password_name=password_name,
            setting=cert_setting,
        )
        if certfile is not None
        else None
    )
    return ClientTls.load(
        TruststoreSource(path=cafile, setting=ca_setting), keystore, check_hostname
    )


def presented_name(target: str, ca: bytes | None, timeout_s: float = 5.0) -> str | None:
    """The name the server at `target` presents (its first DNS or IP SAN, else its CN),
    its certificate verified against `ca` but its name not checked; None when it cannot
    be reached now (the channel then expects the target's own host)."""
    host, _, port = target.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    if ca is not None:
        context.load_verify_locations(cadata=ca.decode())
    else:
        context.load_default_certs()
    context.set_alpn_protocols(["h2"])
    try:
        with (
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as raw,
            context.wrap_socket(raw) as tls,
        ):
            cert: dict[str, Any] = dict(tls.getpeercert() or {})
    except (OSError, ValueError):
        return None
    for kind, value in cert.get("subjectAltName", ()):
        if kind in ("DNS", "IP Address"):
            return str(value)
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


@dataclass(frozen=True)
class SaslSecurity:
    """A SASL_PLAINTEXT (tls None) or SASL_SSL channel's settings; the clients pass it where
    they pass a ClientTls."""

    tls: ClientTls | None
    login: SaslLogin


ChannelSecurity = ClientTls | SaslSecurity | None


def tls_part(security: ChannelSecurity) -> ClientTls | None:
    return security.tls if isinstance(security, SaslSecurity) else security


def aio_channel(
    target: str,
    security: ChannelSecurity,
    options: Sequence[tuple[str, Any]] = (),
    sasl: SaslLogin | None = None,
) -> grpc.aio.Channel:
    """An asyncio channel to `target`: TLS with a ClientTls, plaintext without; with SASL
    (strom_api/sasl_client.py) for a SaslSecurity or when `sasl` is given."""
    tls = tls_part(security)
    if isinstance(security, SaslSecurity):
        sasl = security.login
    auth = None if sasl is None else AioSasl(sasl)
    interceptors = None if auth is None else auth.interceptors()
    if tls is None:
        channel = grpc.aio.insecure_channel(
            target, options=list(options), interceptors=interceptors
        )
    else:
        channel = grpc.aio.secure_channel(
            target,
            tls.credentials(),
            options=[*options, *tls.options(target)],
            interceptors=interceptors,
        )
    if auth is not None:
        auth.channel = channel
        setattr(channel, SASL_ATTRIBUTE, auth)  # for its streams (stream_metadata)
    return channel


def sync_channel(
    target: str, security: ChannelSecurity, options: Sequence[tuple[str, Any]] = ()
) -> grpc.Channel:
    tls = tls_part(security)
    if tls is None:
        channel = grpc.insecure_channel(target, options=list(options))
    else:
        channel = grpc.secure_channel(
            target, tls.credentials(), options=[*options, *tls.options(target)]
        )
    if isinstance(security, SaslSecurity):
        return sync_sasl_channel(channel, security.login)
    return channel


def refused_authentication(why: str | None, security: ChannelSecurity, address: str) -> bool:
    """Whether `why` (handshake_failure's answer for `address`) is a refused
    authentication, which the clients raise at once (Kafka's SslAuthenticationException is
    not retriable): a failed TLS handshake of a TLS client, or a SASL refusal.

    One answer is ambiguous: a TLS connection closed during the handshake is how a server
    refuses a client certificate, and also what a node killed mid-handshake leaves. The
    two differ in whether the address still listens: a refusing node does, a dead one
    refuses the connection. So that close counts as a refusal only when a fresh TCP
    connection to `address` is accepted (blocking for at most a second; it runs only on
    this failure path)."""
    if why is None:
        return False
    if why.startswith(_SASL_REFUSALS):
        return True
    if tls_part(security) is None:
        return False
    return not why.startswith(_CLOSED_DURING_HANDSHAKE) or still_listening(address)


def still_listening(address: str, timeout_s: float = 1.0) -> bool:
    """Whether `address` ("host:port", IPv6 hosts in brackets) accepts a TCP connection."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


_SASL_REFUSALS = (
    ErrorCode.SASL_AUTHENTICATION_FAILED,
    ErrorCode.UNSUPPORTED_SASL_MECHANISM,
    ErrorCode.ILLEGAL_SASL_STATE,
)

_CLOSED_DURING_HANDSHAKE = (
    "SSL handshake failed: the server closed the connection during the TLS handshake"
)

_HANDSHAKE = re.compile(
    r"ssl|tls|handshake|certificate|tsi_|wrong_version|peer name|alpn|verification",
    re.IGNORECASE,
)


def handshake_failure(
    details: str | None, tls: ClientTls | SaslSecurity | bool | None
) -> str | None:
    """Kafka's "SSL handshake failed" sentence when gRPC's error text says the TLS
    handshake failed, else None. `tls` None or False: the client spoke plaintext.

    What gRPC reports: a CA that does not sign the server's certificate or a name it does
    not carry is named ("Tls handshake failed ... CERTIFICATE_VERIFY_FAILED", "Hostname
    Verification Check failed"); a server that refuses the client's certificate (none
    given where one is required, or one from a CA it does not trust) just closes the
    connection, which the client sees as "Socket closed" (refused_authentication tells that
    from a node killed during the handshake)."""
    text = " ".join((details or "").split())
    if isinstance(tls, SaslSecurity):
        tls = tls.tls
    if text.startswith(_SASL_REFUSALS):
        return text  # the SASL exchange was refused (strom_api/sasl_client.py)
    if tls and _HANDSHAKE.search(text):
        return f"SSL handshake failed: {text}"
    if tls and "socket closed" in text.lower():
        return (
            f"{_CLOSED_DURING_HANDSHAKE}: it requires a client certificate "
            "(ssl.client.auth=required) and was given none, or one signed by a CA it does not "
            f"trust ({text})"
        )
    if not tls and "socket closed" in text.lower():
        # A TLS listener closes a connection that opens in plaintext at once.
        return (
            "the connection was closed as it opened: the listener probably expects SSL "
            f"(security_protocol='SSL' / security.protocol=SSL) ({text})"
        )
    return None


# --- the side that listens ----------------------------------------------------------------


class ServerTls:
    """A listener's TLS: its keystore, the truststore its clients' certificates are checked
    against, and whether a client must present one. Files are read again when they change
    (cert-manager rewrites them in place): the next TLS handshake after a change uses the
    new certificate, without a restart; a change that cannot be read is logged by
    `on_reload_error` and the previous material stays in use."""

    def __init__(
        self,
        keystore: KeystoreSource,
        truststore: TruststoreSource,
        require_client_auth: bool,
        on_reload_error: Callable[[str], None] | None = None,
    ) -> None:
        self.keystore = keystore
        self.truststore = truststore
        self.require_client_auth = require_client_auth
        self.on_reload_error = on_reload_error
        self.pair = keystore.load()
        self.ca = truststore.load()
        if require_client_auth and self.ca is None:
            raise TlsConfigError(
                "ssl.client.auth=required needs a truststore (ssl.truststore.location or "
                "ssl.truststore.certificates) to check client certificates against"
            )
        self._lock = threading.Lock()
        self._stamp = self._file_stamp()
        self.reloads = 0

    def _file_stamp(self) -> tuple[tuple[float, int] | None, ...]:
        stamps: list[tuple[float, int] | None] = []
        for path in (*self.keystore.files(), *self.truststore.files()):
            try:
                st = os.stat(path)
                stamps.append((st.st_mtime, st.st_size))
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def _configuration(self) -> Any:
        return grpc.ssl_server_certificate_configuration(
            [(self.pair.key, self.pair.chain)], root_certificates=self.ca
        )

    def _reload(self) -> bool:
        """Before each handshake: reads the material again when its files changed (a stat
        per handshake, no read otherwise); whether there is new material to use."""
        with self._lock:
            stamp = self._file_stamp()
            if stamp == self._stamp:
                return False
            self._stamp = stamp
            try:
                pair, ca = self.keystore.load(), self.truststore.load()
            except TlsConfigError as exc:
                if self.on_reload_error is not None:
                    self.on_reload_error(str(exc))
                return False
            self.pair, self.ca = pair, ca
            self.reloads += 1
            return True

    def _fetch(self) -> Any:
        """gRPC asks before each handshake: a new configuration, or None to keep its own."""
        return self._configuration() if self._reload() else None

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._configuration(),
            self._fetch,
            require_client_authentication=self.require_client_auth,
        )

    def ssl_context(self, request_client_cert: bool = False) -> ssl.SSLContext:
        """The same material for a listener served with Python's ssl (the Kafka protocol
        listener, on asyncio streams), rotated the same way: each handshake first looks
        for changed files and, if there are, switches to a context made from them (the
        SNI callback runs before the server picks its certificate). A client certificate
        is required as for gRPC, or with `request_client_cert` asked for and taken when
        given (Kafka's ssl.client.auth=requested, which gRPC cannot do)."""
        verify = (
            ssl.CERT_REQUIRED
            if self.require_client_auth
            else ssl.CERT_OPTIONAL
            if request_client_cert and self.ca is not None
            else ssl.CERT_NONE
        )
        current = [self._python_context(verify)]

        def rotate(connection: Any, server_name: str | None, context: ssl.SSLContext) -> None:
            if self._reload():
                current[0] = self._python_context(verify)
            if connection.context is not current[0]:
                connection.context = current[0]

        current[0].sni_callback = rotate
        return current[0]

    def _python_context(self, verify: ssl.VerifyMode) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2  # Kafka's ssl.enabled.protocols
        _load_pair(context, self.pair)
        context.verify_mode = verify
        if self.ca is not None and verify != ssl.CERT_NONE:
            context.load_verify_locations(cadata=self.ca.decode())
        return context

    def client(self, check_hostname: bool = True) -> ClientTls:
        """What this node presents and trusts when it dials a listener of the same name on
        another node (Kafka uses the listener's own ssl.* settings for that too)."""
        return ClientTls(self.ca, self.pair, check_hostname)


def _load_pair(context: ssl.SSLContext, pair: KeyPair) -> None:
    """Python's ssl loads a key and chain from files only: they go through an anonymous
    in-memory file (memfd), so the clear key never reaches a disk, as with gRPC."""
    fd = os.memfd_create("strom-tls-keystore", os.MFD_CLOEXEC)
    try:
        os.write(fd, pair.chain + pair.key)
        context.load_cert_chain(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
