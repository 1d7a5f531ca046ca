"""OAUTHBEARER tokens checked as Kafka's OAuthBearerValidatorCallbackHandler (KIP-768)
checks them: a JWT signed by a key of the configured JWKS, with Kafka's config names

    sasl.oauthbearer.jwks.endpoint.url=file:/etc/strom/jwks.json   # required
    sasl.oauthbearer.clock.skew.seconds=30
    sasl.oauthbearer.expected.audience=strom,kafka                  # any one of them
    sasl.oauthbearer.expected.issuer=https://issuer.example
    sasl.oauthbearer.sub.claim.name=sub                             # the principal User:<sub>

- Signature: the key is chosen by the token's `kid` (without one: the JWKS's only key of
  the algorithm's type). Only the asymmetric algorithms a JWKS key can verify are taken
  (RS256/384/512, PS256/384/512, ES256/384/512): `none` and the HMAC family are refused, so
  a token "signed" with the public key as an HMAC secret (the classic confusion) fails.
- Claims: `exp` is required; `exp`, `nbf` and `iat` are checked with the clock skew; the
  audience and issuer only when configured (as Kafka does).
- The JWKS is a `file:` URL, read again when the file changes (its mtime or size; a stat
  per authentication, as the TLS files are reloaded in strom_api/tls.py). A file that
  became unreadable or invalid keeps the keys last read, with a warning. `https:` JWKS
  endpoints are not fetched: Kubernetes users mount the issuer's JWKS as a file (a
  ConfigMap refreshed by a job), which keeps every authentication free of network I/O.

Failures are OAuthBearerRefused with a sentence that names the cause and never the token.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import jwt

log = logging.getLogger("strom.authentication")

ALGORITHMS = {
    "RS256": "RSA",
    "RS384": "RSA",
    "RS512": "RSA",
    "PS256": "RSA",
    "PS384": "RSA",
    "PS512": "RSA",
    "ES256": "EC",
    "ES384": "EC",
    "ES512": "EC",
}
MAX_JWKS_BYTES = 1 << 20


class OAuthBearerRefused(Exception):
    """The token is not accepted; the message says why, without the token."""


class JwksError(ValueError):
    """The JWKS file cannot be read or holds no usable key."""


@dataclass(frozen=True)
class JwksKey:
    kty: str  # RSA or EC
    alg: str  # the algorithm the JWK names ('' when it names none)
    key: Any  # the public key, as `cryptography` holds it


@dataclass(frozen=True)
class ValidatedToken:
    principal: str  # the value of the sub claim (sasl.oauthbearer.sub.claim.name)
    expires_at_s: float  # the exp claim, seconds since the epoch


def jwks_path(url: str) -> str:
    """The file a `file:` JWKS URL names; JwksError for any other scheme."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise JwksError(
            f"'{url}' is not a file: URL (Strom reads the JWKS from a file: mount the "
            "issuer's JWKS and name it file:/path/jwks.json)"
        )
    if parsed.netloc not in ("", "localhost") or not parsed.path:
        raise JwksError(f"'{url}' does not name a local file (file:/path/jwks.json)")
    return unquote(parsed.path)


def read_jwks(path: str) -> dict[str, list[JwksKey]]:
    """The usable (RSA, EC) public keys of the JWKS file at `path`, by kid ('' for a key
    without one)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_JWKS_BYTES + 1)
    except OSError as exc:
        raise JwksError(f"cannot read the JWKS file {path}: {exc.strerror}") from None
    if len(data) > MAX_JWKS_BYTES:
        raise JwksError(f"the JWKS file {path} is larger than {MAX_JWKS_BYTES} bytes")
    try:
        document = json.loads(data)
        entries = document["keys"]
        if not isinstance(entries, list):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise JwksError(
            f'the JWKS file {path} is not a JSON Web Key Set ({{"keys": [...]}})'
        ) from None
    keys: dict[str, list[JwksKey]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC"):
            continue  # symmetric and unknown key types are never used to verify
        if entry.get("use", "sig") != "sig" or "d" in entry:
            continue  # an encryption key, or a private key published by mistake
        try:
            key = jwt.PyJWK(entry).key
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue
        found = JwksKey(entry["kty"], str(entry.get("alg", "")), key)
        keys.setdefault(str(entry.get("kid", "")), []).append(found)
    if not keys:
        raise JwksError(f"the JWKS file {path} holds no RSA or EC signing key")
    return keys


class JwksFile:
    """The keys of a JWKS file, read again when the file changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.reloads = 0
        self._stamp = self._file_stamp()
        self.keys = read_jwks(path)  # JwksError at startup: the listener does not start

    def _file_stamp(self) -> tuple[float, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime, st.st_size

    def current(self) -> dict[str, list[JwksKey]]:
        stamp = self._file_stamp()
        if stamp is not None and stamp != self._stamp:
            self._stamp = stamp
            try:
                self.keys = read_jwks(self.path)
                self.reloads += 1
            except JwksError as exc:
                log.warning("%s; the keys read before stay in use", exc)
        return self.keys


@dataclass(frozen=True)
class OAuthBearerSettings:
    jwks_url: str
    clock_skew_s: int = 30
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str = ""
    sub_claim_name: str = "sub"


class OAuthBearerValidator:
    def __init__(
        self, settings: OAuthBearerSettings, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings
        self.jwks = JwksFile(jwks_path(settings.jwks_url))
        self.clock = clock

    def validate(self, token: str) -> ValidatedToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise OAuthBearerRefused("the token is not a well-formed JWT") from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise OAuthBearerRefused(
                f"the token's algorithm {str(algorithm)[:16]!r} is not accepted "
                f"(only {', '.join(ALGORITHMS)})"
            )
        key = self._key(header, algorithm)
        claims = self._claims(token, key, algorithm)
        principal = claims.get(self.settings.sub_claim_name)
        if not isinstance(principal, str) or not principal.strip():
            raise OAuthBearerRefused(
                f"the token has no '{self.settings.sub_claim_name}' claim naming its principal "
                "(sasl.oauthbearer.sub.claim.name)"
            )
        return ValidatedToken(principal, float(claims["exp"]))

    def _key(self, header: dict[str, Any], algorithm: str) -> Any:
        kid = header.get("kid")
        keys = self.jwks.current()
        kind = ALGORITHMS[algorithm]

        def fits(k: JwksKey) -> bool:  # a JWK that names its algorithm verifies that one only
            return k.kty == kind and k.alg in ("", algorithm)

        if kid is None:
            candidates = [k for ks in keys.values() for k in ks if fits(k)]
            if len(candidates) != 1:
                raise OAuthBearerRefused(
                    "the token names no key id (kid) and the JWKS does not have exactly one "
                    f"{algorithm} key"
                )
            return candidates[0].key
        candidates = [k for k in keys.get(str(kid), ()) if fits(k)]
        if not candidates:
            raise OAuthBearerRefused(
                f"the token's key id {str(kid)[:64]!r} is not a {algorithm} key of the JWKS "
                "(sasl.oauthbearer.jwks.endpoint.url)"
            )
        return candidates[0].key

    def _claims(self, token: str, key: Any, algorithm: str) -> dict[str, Any]:
        s = self.settings
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=list(s.expected_audience) or None,
                issuer=s.expected_issuer or None,
                leeway=s.clock_skew_s,
                options={"require": ["exp"], "verify_aud": bool(s.expected_audience)},
            )
        except jwt.ExpiredSignatureError:
            raise OAuthBearerRefused(
                f"the token expired (exp, with sasl.oauthbearer.clock.skew.seconds "
                f"{s.clock_skew_s})"
            ) from None
        except jwt.ImmatureSignatureError:
            raise OAuthBearerRefused(
                "the token is not valid yet (nbf or iat is in the future, beyond "
                f"sasl.oauthbearer.clock.skew.seconds {s.clock_skew_s})"
            ) from None
        except jwt.MissingRequiredClaimError as exc:
            raise OAuthBearerRefused(f"the token has no '{exc.claim}' claim") from None
        except jwt.InvalidAudienceError:
            raise OAuthBearerRefused(
                "the token's audience (aud) is not one of sasl.oauthbearer.expected.audience"
            ) from None
        except jwt.InvalidIssuerError:
            raise OAuthBearerRefused(
                "the token's issuer (iss) is not sasl.oauthbearer.expected.issuer"
            ) from None
        except jwt.InvalidSignatureError:
            raise OAuthBearerRefused("the token's signature does not verify") from None
        except jwt.InvalidTokenError:
            raise OAuthBearerRefused("the token is not a well-formed JWT") from None
        return claims
