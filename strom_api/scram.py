"""The SCRAM-SHA-256 / SCRAM-SHA-512 exchange (RFC 5802, RFC 7677) as Kafka's
ScramSaslClient and ScramSaslServer run it. No I/O: each side turns the peer's message
(bytes) into its next message, or raises ScramError, whose text is what the peer is told.

    client-first  n,,n=<saslname>,r=<client nonce>[,<ext>=<value>...]
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=<base64 gs2 header>,r=<nonce>[,<ext>...],p=<base64 proof>
    server-final  v=<base64 server signature>      (or e=<error> from another server)

The state machine, one per side, forward only; any error ends it (FAILED), and a step
taken out of order raises ScramStateError:

    server  CLIENT_FIRST -> CLIENT_FINAL -> COMPLETE        any -> FAILED
    client  START -> SERVER_FIRST -> SERVER_FINAL -> COMPLETE  any -> FAILED

Rules, Kafka's unless said otherwise:
- gs2 header `n,,` or `y,,` (the client could bind but thinks the server cannot); `p=`
  (channel binding) is refused. An authzid (`n,a=<name>,`) must equal the user name.
- No SASLprep (Kafka does none): names and passwords are their UTF-8 bytes. Unlike Kafka
  (ASCII names only), a name may hold any UTF-8 except NUL, as RFC 5802 allows; `,` and
  `=` travel as `=2C` and `=3D`, any other `=` is malformed.
- Extensions after the nonce: `tokenauth=true` (a delegation token) is refused, Strom has
  none; any other is ignored. A mandatory extension (`m=`) is refused (RFC 5802 §5.1).
- No user enumeration: an unknown user gets a server-first like a known one (a fake salt
  stable per server secret and name, the default iteration count) and fails at the final
  step with the same sentence as a wrong password.
- Every message at most MAX_MESSAGE_BYTES, strict UTF-8; the client refuses iteration
  counts outside Kafka's bounds (a malicious server could otherwise make it spin). A stored
  credential outside them (none is ever written) is treated as no credential.
- A malformed message is told what is malformed (never echoed back): Kafka sends its
  generic sentence there too, but nothing about credentials depends on the form.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Callable
from enum import Enum

from strom_api.scram_credential import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SALT_BYTES,
    ScramCredential,
    client_key,
    hash_name,
    salted_password,
    server_key,
    stored_key,
)

MAX_MESSAGE_BYTES = 8192
NONCE_BYTES = 24  # 32 characters of URL-safe base64: printable, never a comma
TOKEN_AUTH = "tokenauth"
# Keys unknown users' fake salts when the server is given no secret. One per process, not
# per exchange: a fake salt that changed from one attempt to the next would give the
# unknown user away (a real salt does not change).
_PROCESS_SECRET = secrets.token_bytes(32)


def invalid_credentials(mechanism: str) -> str:
    """What Kafka's broker tells a client whose SCRAM credentials failed, whatever failed."""
    return (
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )


AUTHZID_MISMATCH = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


class ScramError(Exception):
    """The exchange failed; str(error) is the sentence for the peer."""


class ScramStateError(ScramError):
    """A step taken out of order (Kafka's IllegalSaslStateException)."""


class _State(Enum):
    START = "START"
    CLIENT_FIRST = "CLIENT_FIRST"
    CLIENT_FINAL = "CLIENT_FINAL"
    SERVER_FIRST = "SERVER_FIRST"
    SERVER_FINAL = "SERVER_FINAL"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


# --- message pieces ------------------------------------------------------------------


def _decode(message: bytes, what: str) -> str:
    if not isinstance(message, (bytes, bytearray)):
        raise ScramError(f"Invalid SCRAM {what} message: expected bytes")
    if len(message) > MAX_MESSAGE_BYTES:
        raise ScramError(
            f"Invalid SCRAM {what} message: {len(message)} bytes, more than the "
            f"{MAX_MESSAGE_BYTES} allowed"
        )
    try:
        text = bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"Invalid SCRAM {what} message: not UTF-8") from None
    if "\x00" in text:
        raise ScramError(f"Invalid SCRAM {what} message: contains NUL")
    return text


def escape_name(name: str) -> str:
    """RFC 5802 saslname: `=` as `=3D`, `,` as `=2C`."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(saslname: str, what: str) -> str:
    out, i = [], 0
    while i < len(saslname):
        char = saslname[i]
        if char == "=":
            code = saslname[i + 1 : i + 3]
            if code not in ("2C", "3D"):
                raise ScramError(f"Invalid SCRAM {what} message: malformed user name escape")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(char)
            i += 1
    if not out:
        raise ScramError(f"Invalid SCRAM {what} message: empty user name")
    return "".join(out)


def _is_printable_nonce(nonce: str) -> bool:
    # RFC 5802: printable = %x21-2B / %x2D-7E (visible ASCII except the comma).
    return bool(nonce) and all("\x21" <= c <= "\x7e" and c != "," for c in nonce)


def _b64decode(value: str, what: str, field: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ScramError(f"Invalid SCRAM {what} message: {field} is not base64") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _attribute(part: str, name: str, what: str) -> str:
    if not part.startswith(name + "="):
        raise ScramError(f"Invalid SCRAM {what} message: expected {name}= attribute")
    return part[len(name) + 1 :]


def _extensions(parts: list[str], what: str) -> dict[str, str]:
    """Kafka's `,<ALPHA>=<value>` extensions (the value visible ASCII, no comma)."""
    found = {}
    for part in parts:
        key, eq, value = part.partition("=")
        if not (eq and key.isascii() and key.isalpha() and value and value.isascii()):
            raise ScramError(f"Invalid SCRAM {what} message: malformed extension")
        found[key] = value
    return found


def _nonce() -> str:
    return secrets.token_urlsafe(NONCE_BYTES)


def _checked_nonce(nonce: str | None) -> str:
    nonce = _nonce() if nonce is None else nonce
    if not _is_printable_nonce(nonce):
        raise ValueError("a SCRAM nonce is visible ASCII without commas")
    return nonce


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class _ClientFirst:
    """A parsed client-first message."""

    def __init__(self, message: bytes) -> None:
        what = "client first"
        text = _decode(message, what)
        parts = text.split(",")
        if len(parts) < 4:
            raise ScramError(f"Invalid SCRAM {what} message: too few attributes")
        cbind, authzid = parts[0], parts[1]
        if cbind.startswith("p="):
            raise ScramError(
                "Authentication failed: channel binding is not supported (gs2 header p=)"
            )
        if cbind not in ("n", "y"):
            raise ScramError(f"Invalid SCRAM {what} message: gs2 header must be n or y")
        self.authzid = unescape_name(_attribute(authzid, "a", what), what) if authzid else ""
        self.gs2_header = f"{cbind},{authzid},"
        rest = parts[2:]
        if rest[0].startswith("m="):
            raise ScramError("Authentication failed: mandatory SCRAM extensions are not supported")
        self.bare = ",".join(rest)
        self.username = unescape_name(_attribute(rest[0], "n", what), what)
        self.nonce = _attribute(rest[1], "r", what)
        if not _is_printable_nonce(self.nonce):
            raise ScramError(f"Invalid SCRAM {what} message: nonce is not printable ASCII")
        self.extensions = _extensions(rest[2:], what)


class _ClientFinal:
    """A parsed client-final message."""

    def __init__(self, message: bytes) -> None:
        what = "client final"
        text = _decode(message, what)
        without_proof, sep, proof = text.rpartition(",p=")
        if not sep:
            raise ScramError(f"Invalid SCRAM {what} message: no proof (p=)")
        parts = without_proof.split(",")
        if len(parts) < 2:
            raise ScramError(f"Invalid SCRAM {what} message: too few attributes")
        self.without_proof = without_proof
        self.channel_binding = _b64decode(_attribute(parts[0], "c", what), what, "c=")
        self.nonce = _attribute(parts[1], "r", what)
        _extensions(parts[2:], what)  # ignored, as Kafka does, but well formed
        self.proof = _b64decode(proof, what, "p=")


# --- server --------------------------------------------------------------------------


class ScramServer:
    """The broker's side of one SCRAM exchange. `lookup(name)` gives the user's stored
    credential for this mechanism, or None; `secret` keys the fake salts of unknown
    users: the same for every exchange a node runs (by default one random secret per
    process; a secret shared by the cluster's brokers also hides unknown users from a
    client comparing brokers)."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        nonce: str | None = None,
        secret: bytes | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._hash = hash_name(mechanism)
        self._lookup = lookup
        self._server_nonce = _checked_nonce(nonce)
        self._secret = _PROCESS_SECRET if secret is None else secret
        self._state = _State.CLIENT_FIRST
        self._username: str | None = None
        self._candidate = ""
        self._known = False
        self._credential: ScramCredential | None = None
        self._auth_prefix = ""
        self._gs2_header = ""
        self._nonce = ""

    @property
    def username(self) -> str | None:
        """The authenticated SCRAM user name; None until the exchange has succeeded."""
        return self._username

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def _step(self, expected: _State) -> None:
        if self._state is not expected:
            raise ScramStateError(f"Unexpected SCRAM message in server state {self._state.value}")

    def _fail(self) -> None:
        self._state = _State.FAILED
        self._credential = None

    def server_first(self, client_first: bytes) -> bytes:
        self._step(_State.CLIENT_FIRST)
        try:
            return self._server_first(client_first)
        except ScramError:
            self._fail()
            raise

    def _server_first(self, client_first: bytes) -> bytes:
        first = _ClientFirst(client_first)
        # Checked before the lookup: the answer does not depend on whether the user exists.
        if first.authzid and first.authzid != first.username:
            raise ScramError(AUTHZID_MISMATCH)
        if first.extensions.get(TOKEN_AUTH, "").lower() == "true":
            raise ScramError("Authentication failed: delegation tokens are not supported")
        credential = self._lookup(first.username)
        self._known = (
            credential is not None
            and credential.mechanism == self.mechanism
            and MIN_ITERATIONS <= credential.iterations <= MAX_ITERATIONS
        )
        if not self._known:
            credential = self._fake_credential(first.username)
        assert credential is not None
        self._credential = credential
        self._candidate = first.username
        self._gs2_header = first.gs2_header
        self._nonce = first.nonce + self._server_nonce
        server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._auth_prefix = f"{first.bare},{server_first},"
        self._state = _State.CLIENT_FINAL
        return server_first.encode()

    def _fake_credential(self, username: str) -> ScramCredential:
        """What an unknown user is answered with: stable for this server secret and name
        (asking twice reveals nothing), and no proof can match it."""

        def derive(label: str, size: int) -> bytes:
            data = f"{label}\x00{self.mechanism}\x00{username}".encode()
            return hmac.digest(self._secret, data, self._hash)[:size]

        digest_size = len(hmac.digest(b"", b"", self._hash))
        return ScramCredential(
            self.mechanism,
            derive("salt", SALT_BYTES),
            derive("stored", digest_size),
            derive("server", digest_size),
            DEFAULT_ITERATIONS,
        )

    def server_final(self, client_final: bytes) -> bytes:
        self._step(_State.CLIENT_FINAL)
        try:
            answer = self._server_final(client_final)
        except ScramError:
            self._fail()
            raise
        self._state = _State.COMPLETE
        self._username = self._candidate
        self._credential = None
        return answer

    def _server_final(self, client_final: bytes) -> bytes:
        final = _ClientFinal(client_final)
        credential = self._credential
        assert credential is not None
        if final.nonce != self._nonce:
            raise ScramError(
                "Authentication failed: Invalid client nonce in the final client message"
            )
        if final.channel_binding != self._gs2_header.encode():
            raise ScramError(
                "Authentication failed: channel binding c= does not match the gs2 header"
            )
        auth_message = (self._auth_prefix + final.without_proof).encode()
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        matches = len(final.proof) == len(signature) and hmac.compare_digest(
            stored_key(self.mechanism, _xor(final.proof, signature)), credential.stored_key
        )
        if not (matches and self._known):
            raise ScramError(invalid_credentials(self.mechanism))
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        return f"v={_b64(server_signature)}".encode()


# --- client --------------------------------------------------------------------------


class ScramClient:
    """The client's side of one SCRAM exchange (Kafka's ScramSaslClient)."""

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: str | None = None
    ) -> None:
        self.mechanism = mechanism
        self._hash = hash_name(mechanism)
        if not username or "\x00" in username:
            raise ValueError("a SCRAM user name is non-empty and has no NUL")
        self._username = username
        self._password = password
        self._nonce = _checked_nonce(nonce)
        self._state = _State.START
        self._bare = f"n={escape_name(username)},r={self._nonce}"
        self._gs2_header = "n,,"
        self._server_signature = b""

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def _step(self, expected: _State) -> None:
        if self._state is not expected:
            raise ScramStateError(f"Unexpected SCRAM message in client state {self._state.value}")

    def first_message(self) -> bytes:
        self._step(_State.START)
        self._state = _State.SERVER_FIRST
        return (self._gs2_header + self._bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        self._step(_State.SERVER_FIRST)
        try:
            answer = self._final_message(server_first)
        except ScramError:
            self._state = _State.FAILED
            raise
        self._state = _State.SERVER_FINAL
        return answer

    def _final_message(self, server_first: bytes) -> bytes:
        what = "server first"
        text = _decode(server_first, what)
        parts = text.split(",")
        if parts and parts[0].startswith("m="):
            raise ScramError("mandatory SCRAM extensions are not supported")
        if len(parts) < 3:
            raise ScramError(f"Invalid SCRAM {what} message: too few attributes")
        nonce = _attribute(parts[0], "r", what)
        salt = _b64decode(_attribute(parts[1], "s", what), what, "s=")
        iterations_text = _attribute(parts[2], "i", what)
        _extensions(parts[3:], what)
        if not (nonce.startswith(self._nonce) and len(nonce) > len(self._nonce)):
            raise ScramError("Invalid server nonce: does not start with client nonce")
        if not _is_printable_nonce(nonce):
            raise ScramError(f"Invalid SCRAM {what} message: nonce is not printable ASCII")
        if not salt:
            raise ScramError(f"Invalid SCRAM {what} message: empty salt")
        if (
            not (iterations_text.isascii() and iterations_text.isdigit())
            or len(iterations_text) > 9
        ):
            raise ScramError(f"Invalid SCRAM {what} message: invalid iterations")
        iterations = int(iterations_text)
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ScramError(
                f"Requested iterations {iterations} is outside {MIN_ITERATIONS}.."
                f"{MAX_ITERATIONS} for {self.mechanism}"
            )
        salted = salted_password(self.mechanism, self._password.encode(), salt, iterations)
        key = client_key(self.mechanism, salted)
        without_proof = f"c={_b64(self._gs2_header.encode())},r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key(self.mechanism, key), auth_message, self._hash)
        self._server_signature = hmac.digest(
            server_key(self.mechanism, salted), auth_message, self._hash
        )
        return f"{without_proof},p={_b64(_xor(key, signature))}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        self._step(_State.SERVER_FINAL)
        try:
            self._verify(server_final)
        except ScramError:
            self._state = _State.FAILED
            raise
        self._state = _State.COMPLETE

    def _verify(self, server_final: bytes) -> None:
        what = "server final"
        text = _decode(server_final, what)
        first, *extensions = text.split(",")
        if first.startswith("e="):
            raise ScramError(
                f"Sasl authentication using {self.mechanism} failed with error: {first[2:]}"
            )
        _extensions(extensions, what)
        signature = _b64decode(_attribute(first, "v", what), what, "v=")
        if not hmac.compare_digest(signature, self._server_signature):
            raise ScramError("Invalid server signature in server final message")
