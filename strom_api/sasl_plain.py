"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer checks it. No I/O.

    message = [authzid] NUL authcid NUL passwd        (UTF-8; each field at most 255 bytes)

- Exactly two NULs (Kafka's own split quietly truncates a password holding a third; here
  that message is malformed). User name and password must not be empty.
- The password is checked first, then the authzid, which must be empty or the user name
  (Kafka's order: a mismatch is only told to a client that knew the password).
- `users_check(users)` is the check for users declared in a JAAS config
  (`user_<name>="<password>"`, strom_api.jaas.plain_users): constant-time, and an unknown
  name costs what a known one does.
PLAIN sends the password itself: Kafka, and Strom, meant it for tests or for TLS
listeners only (SASL_SSL).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

MECHANISM = "PLAIN"
MAX_FIELD_BYTES = 255  # RFC 4616: a server MUST accept up to 255 octets per field
MAX_MESSAGE_BYTES = 3 * MAX_FIELD_BYTES + 2

INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"
AUTHZID_MISMATCH = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


class PlainError(Exception):
    """The exchange failed; str(error) is the sentence for the peer."""


def plain_message(username: str, password: str, authzid: str = "") -> bytes:
    """The client's one message."""
    return f"{authzid}\x00{username}\x00{password}".encode()


def _fields(message: bytes) -> tuple[str, str, str]:
    if not isinstance(message, (bytes, bytearray)):
        raise PlainError("Invalid SASL/PLAIN response: expected bytes")
    if len(message) > MAX_MESSAGE_BYTES:
        raise PlainError(
            f"Invalid SASL/PLAIN response: {len(message)} bytes, more than the "
            f"{MAX_MESSAGE_BYTES} allowed"
        )
    parts = bytes(message).split(b"\x00")
    if len(parts) != 3:
        raise PlainError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
    for name, part in zip(("authorization id", "username", "password"), parts, strict=True):
        if len(part) > MAX_FIELD_BYTES:
            raise PlainError(
                f"Invalid SASL/PLAIN response: {name} longer than {MAX_FIELD_BYTES} bytes"
            )
    try:
        authzid, username, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise PlainError("Invalid SASL/PLAIN response: not UTF-8") from None
    if not username:
        raise PlainError("Authentication failed: username not specified")
    if not password:
        raise PlainError("Authentication failed: password not specified")
    return authzid, username, password


class PlainServer:
    """The broker's side: `check(username, password)` says whether they match."""

    def __init__(self, check: Callable[[str, str], bool]) -> None:
        self._check = check

    def authenticate(self, message: bytes) -> str:
        """The authenticated user name, or PlainError with the sentence for the client."""
        authzid, username, password = _fields(message)
        if not self._check(username, password):
            raise PlainError(INVALID_CREDENTIALS)
        if authzid and authzid != username:
            raise PlainError(AUTHZID_MISMATCH)
        return username


def users_check(users: Mapping[str, str]) -> Callable[[str, str], bool]:
    """A check against declared passwords, comparing in constant time; an unknown user is
    compared against a dummy so that the time taken does not tell names apart."""
    encoded = {name: password.encode() for name, password in users.items()}
    dummy = b"\x00" * MAX_FIELD_BYTES

    def check(username: str, password: str) -> bool:
        expected = encoded.get(username)
        same = hmac.compare_digest(password.encode(), dummy if expected is None else expected)
        return same and expected is not None

    return check
