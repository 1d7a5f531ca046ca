"""The session tokens a SASL listener hands out after a successful SASL exchange, and their
check on every later call (docs/architecture.md §11).

gRPC gives a servicer no hook on its connection, so a SASL session cannot live on the
connection as Kafka's does. Instead the node signs what it authenticated, and the client
carries the signature in each call's metadata (`strom-sasl-session`):

    token = base64url(json([version, principal, peer, expiry_ms])) "." base64url(HMAC-SHA-256)

- The HMAC key is 32 random bytes drawn when the node starts and kept only in its memory:
  a token is good on this node process only (a restarted node asks clients to
  authenticate again, as a new connection to Kafka would).
- `peer` is the connection's address as gRPC reports it (ipv4:10.0.0.7:53122): a token
  copied to another connection (another client, another port) is refused, so a token
  seen in transit or in a log cannot be replayed from elsewhere, nor moved to another
  principal (the principal is signed).
- `expiry_ms` is Kafka's session lifetime: `connections.max.reauth.ms` (KIP-368) after the
  exchange, or 0 for no expiry (Kafka's default). An expired session is refused and the
  client authenticates again, which re-checks the credential (a deleted user is out once
  the lifetime passes, as in Kafka).
The check is a constant-time HMAC compare and a JSON parse of a bounded string: a few
microseconds, no state per session on the node (nothing grows with the number of clients).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

METADATA_KEY = "strom-sasl-session"
MAX_TOKEN_CHARS = 4096
_VERSION = 1


class InvalidSession(Exception):
    """The token does not admit this call; the message says why (no secrets in it)."""


@dataclass(frozen=True)
class SessionToken:
    principal: str
    expiry_ms: int  # 0: no expiry


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionSigner:
    """Mints and checks this node's session tokens."""

    def __init__(self, clock_ms: Callable[[], int], key: bytes | None = None) -> None:
        self._key = os.urandom(32) if key is None else key
        self._clock_ms = clock_ms

    def _mac(self, payload: bytes) -> bytes:
        return hmac.digest(self._key, payload, hashlib.sha256)

    def mint(self, principal: str, peer: str, lifetime_ms: int) -> tuple[str, int]:
        """A token for `principal` on the connection `peer`, and its expiry (0: none)."""
        expiry = self._clock_ms() + lifetime_ms if lifetime_ms > 0 else 0
        payload = json.dumps([_VERSION, principal, peer, expiry], separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}", expiry

    def check(self, token: str, peer: str) -> SessionToken:
        """The session `token` proves on the connection `peer`; InvalidSession if none."""
        if len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
            raise InvalidSession("the SASL session token is malformed")
        body, mac = token.split(".")
        try:
            payload, signature = _unb64(body), _unb64(mac)
        except (binascii.Error, ValueError):
            raise InvalidSession("the SASL session token is malformed") from None
        if not hmac.compare_digest(signature, self._mac(payload)):
            raise InvalidSession(
                "the SASL session token was not issued by this node (it restarted, or the "
                "token was altered): authenticate again"
            )
        version, principal, bound_peer, expiry = json.loads(payload)
        if version != _VERSION or not hmac.compare_digest(str(bound_peer), peer):
            raise InvalidSession(
                "the SASL session token belongs to another connection: authenticate on this one"
            )
        if expiry and self._clock_ms() >= expiry:
            raise InvalidSession(
                "the SASL session expired (connections.max.reauth.ms): authenticate again"
            )
        return SessionToken(str(principal), int(expiry))
