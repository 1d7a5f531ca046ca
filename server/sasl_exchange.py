"""One SASL exchange on a listener, message by message, for both front ends: the gRPC
SecurityService.SaslAuthenticate stream (server/sasl_service.py) and the Kafka listener's
SaslHandshake + SaslAuthenticate (server/kafka/sasl_api.py). The rules live here once:

- the mechanism must be one the listener enables (UNSUPPORTED_SASL_MECHANISM, listing them);
- each message is at most sasl.server.max.receive.size bytes (Kafka's limit on a SASL frame);
- PLAIN and OAUTHBEARER take one message (OAUTHBEARER: the client's RFC 7628 initial
  response; the session ends no later than the token's `exp`, so the client
  re-authenticates with a fresh token, as KIP-368 has Kafka's clients do), SCRAM two;
- a success's session lasts connections.max.reauth.ms (0: no end; KIP-368);
- a failure is counted and logged at INFO, once per cause and interval, with the client's
  host and the mechanism (Kafka's "Failed authentication with /10.0.0.7 (...)"), never with
  a password or a token; a success is counted (Kafka's socket-server-metrics
  successful/failed-authentication-total, per listener).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from raft.rate_limited_log import RateLimitedLog
from server.listener_sasl import ListenerSasl
from server.oauthbearer_validator import OAuthBearerRefused
from strom_api.error_codes import ErrorCode
from strom_api.oauthbearer import OAuthBearerError, parse_initial_response
from strom_api.sasl_plain import PlainError, PlainServer, users_check
from strom_api.scram import ScramError, ScramServer
from strom_api.scram_credential import ScramCredential

log = logging.getLogger("strom.authentication")
_failures = RateLimitedLog(log)

# (user, mechanism) -> the user's SCRAM credential from the metadata image, or None.
CredentialLookup = Callable[[str, str], ScramCredential | None]


class AuthenticationCounts:
    """Kafka's socket-server-metrics successful/failed-authentication-total, per listener."""

    def __init__(self) -> None:
        self.succeeded: dict[str, int] = {}
        self.failed: dict[str, int] = {}

    def count(self, listener: str, ok: bool) -> None:
        counts = self.succeeded if ok else self.failed
        counts[listener] = counts.get(listener, 0) + 1


class SaslRefused(Exception):
    """The exchange failed: Kafka's error name and a sentence (no secret in it)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Authenticated:
    principal: str  # User:<name>
    lifetime_ms: int  # 0: the session does not end
    last: bytes  # the server's final message (SCRAM's server-final), else empty


class SaslListener:
    """What a listener's exchanges share: its settings, the credentials, the counts."""

    def __init__(
        self, settings: ListenerSasl, credentials: CredentialLookup, counts: AuthenticationCounts
    ) -> None:
        self.settings = settings
        self.credentials = credentials
        self.counts = counts
        # PLAIN's users from the JAAS config, compared in constant time (unknown names too).
        self.plain_check = users_check(settings.plain_users)

    def exchange(self, host: str) -> SaslExchange:
        return SaslExchange(self, host)


class SaslExchange:
    """One exchange of a client at `host`: `choose` the mechanism, then `step` with each of
    the client's messages until it returns Authenticated. Any SaslRefused ends it (counted
    and logged once, here)."""

    def __init__(self, listener: SaslListener, host: str) -> None:
        self.listener = listener
        self.host = host
        self.mechanism = ""
        self._scram: ScramServer | None = None
        self.done = False

    @property
    def enabled(self) -> tuple[str, ...]:
        return self.listener.settings.mechanisms

    def choose(self, mechanism: str) -> None:
        self.mechanism = mechanism.upper()
        if self.mechanism not in self.enabled:
            self._refuse(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"Unsupported SASL mechanism {mechanism[:64]!r} on listener "
                f"{self.listener.settings.name}",
            )

    def step(self, data: bytes) -> bytes | Authenticated:
        """The server's answer to the client's next message: bytes to send back (the
        exchange goes on), or Authenticated."""
        if self.done or not self.mechanism:
            self._refuse(ErrorCode.ILLEGAL_SASL_STATE, "no SASL exchange is in progress")
        limit = self.listener.settings.max_receive_bytes
        if len(data) > limit:
            self._refuse(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"a SASL message of {len(data)} bytes is larger than "
                f"sasl.server.max.receive.size ({limit})",
            )
        settings = self.listener.settings
        try:
            if self.mechanism == "PLAIN":
                user = PlainServer(self.listener.plain_check).authenticate(data)
                return self._authenticated(user, settings.reauth_ms, b"")
            if self.mechanism == "OAUTHBEARER":
                user, lifetime_ms = self._oauthbearer(data)
                return self._authenticated(user, lifetime_ms, b"")
            if self._scram is None:
                mechanism = self.mechanism
                self._scram = ScramServer(
                    mechanism, lambda name: self.listener.credentials(name, mechanism)
                )
                return self._scram.server_first(data)
            last = self._scram.server_final(data)
            return self._authenticated(self._scram.username or "", settings.reauth_ms, last)
        except (ScramError, PlainError) as exc:
            self._refuse(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
        except SaslRefused as exc:
            self._refuse(exc.code, exc.message)

    def abandon(self, code: str, message: str) -> SaslRefused:
        """The front end ends the exchange (the client went quiet or away): counted and
        logged as a failure; the error to answer with."""
        try:
            self._refuse(code, message)
        except SaslRefused as exc:
            return exc

    def _authenticated(self, user: str, lifetime_ms: int, last: bytes) -> Authenticated:
        self.done = True
        self.listener.counts.count(self.listener.settings.name, True)
        return Authenticated(f"User:{user}", lifetime_ms, last)

    def _oauthbearer(self, data: bytes) -> tuple[str, int]:
        """(the token's principal name, the session's lifetime in ms): the token's
        remaining life, or connections.max.reauth.ms if that is shorter."""
        validator = self.listener.settings.oauthbearer
        assert validator is not None  # listener_sasl builds it when OAUTHBEARER is enabled
        try:
            response = parse_initial_response(data)
            token = validator.validate(response.token)
        except (OAuthBearerError, OAuthBearerRefused) as exc:
            raise SaslRefused(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from None
        if response.authorization_id and response.authorization_id != token.principal:
            raise SaslRefused(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                "the client asked for an authorization id other than the token's principal",
            )
        remaining_ms = max(1, int((token.expires_at_s - validator.clock()) * 1000))
        reauth_ms = self.listener.settings.reauth_ms
        return token.principal, min(reauth_ms, remaining_ms) if reauth_ms else remaining_ms

    def _refuse(self, code: str, message: str) -> NoReturn:
        self.done = True
        self.listener.counts.count(self.listener.settings.name, False)
        _failures.log(
            (self.host, code, self.mechanism),
            logging.INFO,
            "Failed authentication with /%s (listener %s, mechanism %s): %s",
            self.host,
            self.listener.settings.name,
            self.mechanism or "none",
            message,
        )
        raise SaslRefused(code, message)
