"""SecurityService.SaslAuthenticate on a SASL listener: one stream is one SASL exchange
(Kafka's SaslHandshake + SaslAuthenticate), ending in a session token
(server/sasl_sessions.py) or Kafka's error with a sentence.

Every step is bounded before work is done: the mechanism must be one the listener enables
(UNSUPPORTED_SASL_MECHANISM, listing them), each message at most
sasl.server.max.receive.size bytes (Kafka's limit on a SASL frame), each step answered
within AUTH_STEP_TIMEOUT_S, and the exchange is two messages at most (OAUTHBEARER: one,
the client's RFC 7628 initial response; its session ends no later than the token's `exp`,
so the client re-authenticates with a fresh token, as KIP-368 has Kafka's clients do).
A failure is counted and logged at INFO, once per cause and interval, with the client's
host and the mechanism (Kafka's "Failed authentication with /10.0.0.7 (...)"), never with
a password or a token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from raft.rate_limited_log import RateLimitedLog
from server.listener_sasl import ListenerSasl
from server.oauthbearer_validator import OAuthBearerRefused
from server.request_session import peer_host
from server.sasl_sessions import SessionSigner
from strom_api.error_codes import ErrorCode
from strom_api.oauthbearer import OAuthBearerError, parse_initial_response
from strom_api.sasl_plain import PlainError, PlainServer, users_check
from strom_api.scram import ScramError, ScramServer
from strom_api.scram_credential import ScramCredential
from strom_api.v1 import common_pb2, security_pb2, security_pb2_grpc

log = logging.getLogger("strom.authentication")
_failures = RateLimitedLog(log)

AUTH_STEP_TIMEOUT_S = 10.0

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


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _error(code: str, message: str) -> Any:
    return security_pb2.SaslAuthenticateResponse(error=common_pb2.Error(code=code, message=message))


class SaslServicer(security_pb2_grpc.SecurityServiceServicer):
    def __init__(
        self,
        settings: ListenerSasl,
        signer: SessionSigner,
        credentials: CredentialLookup,
        counts: AuthenticationCounts,
    ) -> None:
        self.settings = settings
        self.signer = signer
        self.credentials = credentials
        self.counts = counts
        # PLAIN's users from the JAAS config, compared in constant time (unknown names too).
        self._plain_check = users_check(settings.plain_users)

    async def SaslAuthenticate(
        self, requests: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        mechanism = ""
        try:
            first = await self._next(requests)
            mechanism = first.mechanism.upper()
            if mechanism not in self.settings.mechanisms:
                self.counts.count(self.settings.name, False)
                yield security_pb2.SaslAuthenticateResponse(
                    error=common_pb2.Error(
                        code=common_pb2.ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                        message=f"Unsupported SASL mechanism {first.mechanism[:64]!r} on "
                        f"listener {self.settings.name}",
                    ),
                    enabled_mechanisms=list(self.settings.mechanisms),
                )
                return
            lifetime_ms = self.settings.reauth_ms
            last = b""
            if mechanism == "PLAIN":
                user = PlainServer(self._plain_check).authenticate(self._bytes(first))
            elif mechanism == "OAUTHBEARER":
                user, lifetime_ms = self._oauthbearer(self._bytes(first))
            else:
                server = ScramServer(mechanism, lambda name: self.credentials(name, mechanism))
                yield security_pb2.SaslAuthenticateResponse(
                    auth_bytes=server.server_first(self._bytes(first))
                )
                final = await self._next(requests)
                last = server.server_final(self._bytes(final))
                user = server.username or ""
        except (ScramError, PlainError) as exc:
            yield self._failed(context, mechanism, ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
            return
        except _Refused as exc:
            yield self._failed(context, mechanism, exc.code, exc.message)
            return
        token, expiry = self.signer.mint(f"User:{user}", str(context.peer()), lifetime_ms)
        self.counts.count(self.settings.name, True)
        yield security_pb2.SaslAuthenticateResponse(
            auth_bytes=last,
            session_token=token.encode(),
            session_lifetime_ms=lifetime_ms if expiry else 0,
        )

    def _oauthbearer(self, data: bytes) -> tuple[str, int]:
        """(the token's principal name, the session's lifetime in ms): the token's
        remaining life, or connections.max.reauth.ms if that is shorter."""
        validator = self.settings.oauthbearer
        assert validator is not None  # listener_sasl builds it when OAUTHBEARER is enabled
        try:
            response = parse_initial_response(data)
            token = validator.validate(response.token)
        except (OAuthBearerError, OAuthBearerRefused) as exc:
            raise _Refused(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from None
        if response.authorization_id and response.authorization_id != token.principal:
            raise _Refused(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                "the client asked for an authorization id other than the token's principal",
            )
        remaining_ms = max(1, int((token.expires_at_s - validator.clock()) * 1000))
        reauth_ms = self.settings.reauth_ms
        return token.principal, min(reauth_ms, remaining_ms) if reauth_ms else remaining_ms

    async def _next(self, requests: AsyncIterator[Any]) -> Any:
        try:
            return await asyncio.wait_for(anext(requests), AUTH_STEP_TIMEOUT_S)
        except StopAsyncIteration:
            raise _Refused(ErrorCode.ILLEGAL_SASL_STATE, "the client ended the exchange") from None
        except TimeoutError:
            raise _Refused(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"no SASL message within {AUTH_STEP_TIMEOUT_S:.0f} s",
            ) from None

    def _bytes(self, request: Any) -> bytes:
        data: bytes = request.auth_bytes
        if len(data) > self.settings.max_receive_bytes:
            raise _Refused(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"a SASL message of {len(data)} bytes is larger than "
                f"sasl.server.max.receive.size ({self.settings.max_receive_bytes})",
            )
        return data

    def _failed(self, context: Any, mechanism: str, code: str, message: str) -> Any:
        self.counts.count(self.settings.name, False)
        host = peer_host(context)
        _failures.log(
            (host, code, mechanism),
            logging.INFO,
            "Failed authentication with /%s (listener %s, mechanism %s): %s",
            host,
            self.settings.name,
            mechanism or "none",
            message,
        )
        return _error(code, message)
