"""The OAUTHBEARER client initial response (RFC 7628 §3.1), as Kafka's
OAuthBearerClientInitialResponse writes and reads it:

    n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01]*\\x01

The token is a compact JWT (base64url parts joined by dots). Extensions (other key=value
pairs, KIP-342) are read and returned; `auth` is reserved. Parsing is strict and bounded:
the message is checked against its full grammar before anything is taken from it, and a
failure never echoes the token. No I/O here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SEPARATOR = "\x01"
# Kafka's patterns (OAuthBearerClientInitialResponse).
_SASLNAME = r"(?:[\x02-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"  # no '=', ',' or separator
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_MESSAGE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>(?:{_KEY}={_VALUE}\x01)*)\x01"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
MAX_EXTENSIONS = 32


class OAuthBearerError(ValueError):
    """The initial response breaks RFC 7628's grammar; the message says where."""


@dataclass(frozen=True)
class InitialResponse:
    token: str
    authorization_id: str = ""
    extensions: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # never the token in a log or a traceback
        return f"InitialResponse(authzid={self.authorization_id!r})"


def client_initial_response(token: str) -> bytes:
    """The client's first message carrying `token` (no authzid, no extensions), as Kafka's
    clients send it."""
    if not _AUTH.fullmatch(f"Bearer {token}"):
        raise OAuthBearerError("the token is not a compact JWT (base64url parts joined by '.')")
    return f"n,,{SEPARATOR}auth=Bearer {token}{SEPARATOR}{SEPARATOR}".encode("ascii")


def parse_initial_response(data: bytes) -> InitialResponse:
    """The token, authzid and extensions of a client's first message; OAuthBearerError
    with a sentence that does not quote the token if it is malformed."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise OAuthBearerError("the OAUTHBEARER initial response is not ASCII") from None
    match = _MESSAGE.fullmatch(text)
    if match is None:
        raise OAuthBearerError(
            "the OAUTHBEARER initial response is malformed (expected RFC 7628's "
            "'n,,\\x01auth=Bearer <token>\\x01\\x01')"
        )
    pairs: dict[str, str] = {}
    for item in match.group("kvpairs").split(SEPARATOR)[:-1]:
        key, _, value = item.partition("=")
        if key in pairs:
            raise OAuthBearerError(f"the OAUTHBEARER initial response repeats the key {key!r}")
        pairs[key] = value
        if len(pairs) > MAX_EXTENSIONS + 1:
            raise OAuthBearerError(
                f"the OAUTHBEARER initial response has more than {MAX_EXTENSIONS} extensions"
            )
    auth = pairs.pop("auth", None)
    if auth is None:
        raise OAuthBearerError("the OAUTHBEARER initial response has no auth=Bearer <token>")
    bearer = _AUTH.fullmatch(auth)
    if bearer is None or bearer.group("scheme").lower() != "bearer":
        raise OAuthBearerError(
            "the OAUTHBEARER initial response's auth value is not 'Bearer <token>'"
        )
    authzid = (match.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    return InitialResponse(bearer.group("token"), authzid, pairs)
