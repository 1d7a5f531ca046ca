"""SecurityService.SaslAuthenticate on a SASL listener: one stream is one SASL exchange
(Kafka's SaslHandshake + SaslAuthenticate; the rules are server/sasl_exchange.py's, which
the Kafka listener shares), ending in a session token (server/sasl_sessions.py) or Kafka's
error with a sentence. Each of the client's messages must come within AUTH_STEP_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from server.listener_sasl import ListenerSasl
from server.request_session import peer_host
from server.sasl_exchange import (
    Authenticated,
    AuthenticationCounts,
    CredentialLookup,
    SaslExchange,
    SaslListener,
    SaslRefused,
)
from server.sasl_sessions import SessionSigner
from strom_api.error_codes import ErrorCode
from strom_api.v1 import common_pb2, security_pb2, security_pb2_grpc

AUTH_STEP_TIMEOUT_S = 10.0


def _error(exc: SaslRefused, enabled: tuple[str, ...] = ()) -> Any:
    return security_pb2.SaslAuthenticateResponse(
        error=common_pb2.Error(code=exc.code, message=exc.message),
        enabled_mechanisms=list(enabled),
    )


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
        self.listener = SaslListener(settings, credentials, counts)

    async def SaslAuthenticate(
        self, requests: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        exchange = self.listener.exchange(peer_host(context))
        try:
            first = await self._next(requests, exchange)
            try:
                exchange.choose(first.mechanism)
            except SaslRefused as exc:
                yield _error(exc, self.settings.mechanisms)
                return
            answer = exchange.step(first.auth_bytes)
            while not isinstance(answer, Authenticated):
                yield security_pb2.SaslAuthenticateResponse(auth_bytes=answer)
                answer = exchange.step((await self._next(requests, exchange)).auth_bytes)
        except SaslRefused as exc:
            yield _error(exc)
            return
        token, expiry = self.signer.mint(answer.principal, str(context.peer()), answer.lifetime_ms)
        yield security_pb2.SaslAuthenticateResponse(
            auth_bytes=answer.last,
            session_token=token.encode(),
            session_lifetime_ms=answer.lifetime_ms if expiry else 0,
        )

    async def _next(self, requests: AsyncIterator[Any], exchange: SaslExchange) -> Any:
        try:
            async with asyncio.timeout(AUTH_STEP_TIMEOUT_S):
                return await anext(requests)
        except StopAsyncIteration:
            raise exchange.abandon(
                ErrorCode.ILLEGAL_SASL_STATE, "the client ended the exchange"
            ) from None
        except TimeoutError:
            raise exchange.abandon(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"no SASL message within {AUTH_STEP_TIMEOUT_S:.0f} s",
            ) from None
