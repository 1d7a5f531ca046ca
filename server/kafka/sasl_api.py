"""Who a Kafka connection is, and its SASL exchange: SaslHandshake (key 17, v1) and
SaslAuthenticate (key 36, v1-v2), as Kafka's SaslServerAuthenticator serves them, on the
rules of server/sasl_exchange.py that the gRPC listeners share.

- On a SASL_PLAINTEXT / SASL_SSL listener a connection is nobody until it authenticates:
  before that it may send ApiVersions, SaslHandshake and SaslAuthenticate only; another
  request closes it ("Unexpected Kafka request ... during SASL handshake", as Kafka). Its
  principal is then `User:<SASL user>`.
- SaslHandshake names the mechanism; one the listener does not enable is answered
  UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the connection closed. Each
  SaslAuthenticate carries one client message; a refusal is answered with Kafka's error
  and a sentence, then the connection is closed, as Kafka does. After a v0 SaslHandshake
  (before KIP-152; served as Kafka 4 serves it: Debian 12's kcat, on librdkafka 2.0.2,
  turns SASL on only when the broker's range includes v0) the client's messages come as
  bare size-prefixed tokens, answered the same way; a refused one closes the connection,
  since a bare token carries no error.
- KIP-368: a session of connections.max.reauth.ms (or an OAUTHBEARER token's remaining
  life) tells the client its lifetime; the client re-authenticates on the same connection
  before it ends (SaslHandshake + SaslAuthenticate again, as the same principal; another
  principal is refused). A request after the session ended closes the connection.
- On a PLAINTEXT or SSL listener the principal is the listener's (ANONYMOUS or the
  client certificate's), and SaslHandshake is answered ILLEGAL_SASL_STATE, as Kafka's
  KafkaApis answers it on such a listener.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode

from server.kafka.apis import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, SERVED
from server.kafka.error_codes import kafka_error_code
from server.kafka.frames import Request, UnsupportedApiVersions
from server.kafka.versioned import build
from server.sasl_exchange import Authenticated, SaslExchange, SaslListener, SaslRefused
from strom_api.error_codes import ErrorCode

BEFORE_AUTHENTICATION = frozenset((API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE))


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class ConnectionAuthentication:
    """One connection's identity. `principal` is set from the start on a PLAINTEXT or SSL
    listener; on a SASL listener (`sasl` given) once an exchange succeeds."""

    def __init__(
        self,
        principal: str | None,
        sasl: SaslListener | None,
        host: str,
        clock_ms: Callable[[], int] = _monotonic_ms,
    ) -> None:
        self.principal = principal
        self.sasl = sasl
        self.host = host
        self.clock_ms = clock_ms
        self.expires_at_ms = 0  # 0: the session does not end
        self._exchange: SaslExchange | None = None
        self.raw_tokens = False  # a v0 handshake's exchange is under way

    def frame_limit(self, max_request_bytes: int) -> tuple[int, str]:
        """The largest frame the connection may send now, and the setting that says so. A
        connection still authenticating may send at most sasl.server.max.receive.size, as
        Kafka's SaslServerAuthenticator reads it: nobody may make the broker buffer
        socket.request.max.bytes before saying who they are."""
        if self.principal is None and self.sasl is not None:
            limit = self.sasl.settings.max_receive_bytes
            if limit < max_request_bytes:
                return limit, "sasl.server.max.receive.size, before authentication"
        return max_request_bytes, "socket.request.max.bytes"

    def refusal(self, request: Request | UnsupportedApiVersions) -> str | None:
        """Why `request` closes the connection before it is served, or None."""
        api_key = getattr(request, "api_key", API_VERSIONS)
        if api_key in BEFORE_AUTHENTICATION:
            return None
        name = SERVED[api_key].name if api_key in SERVED else str(api_key)
        if self.principal is None:
            return f"Unexpected Kafka request of type {name} during SASL handshake"
        if self.expires_at_ms and self.clock_ms() >= self.expires_at_ms:
            return (
                f"the SASL session expired (connections.max.reauth.ms) before request {name}: "
                "the client did not re-authenticate"
            )
        return None

    def handle(self, request: Request) -> tuple[Any, bool]:
        """The response to a SaslHandshake or SaslAuthenticate, and whether the connection
        closes once it is sent."""
        if request.api_key == SASL_HANDSHAKE:
            return self._handshake(request)
        return self._authenticate(request)

    def _handshake(self, request: Request) -> tuple[Any, bool]:
        response = load_response_schema(SASL_HANDSHAKE, request.api_version)
        if self.sasl is None:
            refused = build(response, error_code=KafkaErrorCode.illegal_sasl_state, mechanisms=())
            return refused, False
        mechanisms = self.sasl.settings.mechanisms
        exchange = self.sasl.exchange(self.host)
        try:
            exchange.choose(request.body.mechanism)
        except SaslRefused as exc:
            error = kafka_error_code(ErrorCode(exc.code))
            return build(response, error_code=error, mechanisms=mechanisms), True
        self._exchange = exchange
        # v0: the client's SASL messages follow as bare size-prefixed tokens, not as
        # SaslAuthenticate requests (Kafka's handshake before KIP-152).
        self.raw_tokens = request.api_version == 0
        return build(response, error_code=KafkaErrorCode.none, mechanisms=mechanisms), False

    def raw_token(self, data: bytes) -> tuple[bytes | None, bool]:
        """After a v0 handshake: the server's token for the client's (None: nothing to
        send), and whether the exchange failed and the connection closes (a bare token
        cannot carry an error: Kafka closes, and the failure is logged)."""
        exchange = self._exchange
        assert exchange is not None and self.raw_tokens
        try:
            answer = exchange.step(data)
        except SaslRefused:
            self._exchange, self.raw_tokens = None, False
            return None, True
        if not isinstance(answer, Authenticated):
            return answer, False
        self._exchange, self.raw_tokens = None, False
        if self.principal is not None and answer.principal != self.principal:
            exchange.abandon(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                "Cannot change principals during re-authentication from "
                f"{self.principal}: {answer.principal}",
            )
            return None, True
        self.principal = answer.principal
        now = self.clock_ms()
        self.expires_at_ms = now + answer.lifetime_ms if answer.lifetime_ms else 0
        return answer.last, False

    def _authenticate(self, request: Request) -> tuple[Any, bool]:
        exchange, self._exchange = self._exchange, None
        if exchange is None:
            refused = SaslRefused(
                ErrorCode.ILLEGAL_SASL_STATE,
                "SaslAuthenticate before a SaslHandshake named the mechanism"
                if self.sasl is not None
                else "this listener does not authenticate with SASL",
            )
            return self._failed(request, refused), True
        try:
            answer = exchange.step(request.body.auth_bytes)
        except SaslRefused as exc:
            return self._failed(request, exc), True
        if not isinstance(answer, Authenticated):
            self._exchange = exchange  # the exchange goes on (SCRAM's second message)
            return self._answer(request, auth_bytes=answer), False
        if self.principal is not None and answer.principal != self.principal:
            refused = exchange.abandon(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                "Cannot change principals during re-authentication from "
                f"{self.principal}: {answer.principal}",
            )
            return self._failed(request, refused), True
        self.principal = answer.principal
        now = self.clock_ms()
        self.expires_at_ms = now + answer.lifetime_ms if answer.lifetime_ms else 0
        return self._answer(request, auth_bytes=answer.last, lifetime_ms=answer.lifetime_ms), False

    def _failed(self, request: Request, exc: SaslRefused) -> Any:
        return self._answer(
            request, error=kafka_error_code(ErrorCode(exc.code)), message=exc.message
        )

    @staticmethod
    def _answer(
        request: Request,
        auth_bytes: bytes = b"",
        lifetime_ms: int = 0,
        error: KafkaErrorCode = KafkaErrorCode.none,
        message: str | None = None,
    ) -> Any:
        return build(
            load_response_schema(SASL_AUTHENTICATE, request.api_version),
            error_code=error,
            error_message=message,
            auth_bytes=auth_bytes,
            session_lifetime=datetime.timedelta(milliseconds=lifetime_ms),
        )
