"""The client side of SASL over gRPC (proto/strom_api/v1/security.proto): a channel that
authenticates itself before its first call and carries the session token in every call's
metadata, for the clients (Producer, Consumer, AdminClient, the `strom` tools, the Spark
connector) and for nodes dialling each other's SASL listeners.

A channel's session belongs to its connection (the node binds the token to it): when gRPC
reconnects, or the node restarted, or the session expired (connections.max.reauth.ms), the
node refuses the token with the trailer `strom-sasl-reauthenticate`; the channel then
authenticates again and retries a unary call once. Streams open with the session as
explicit metadata (`stream_metadata`; gRPC's stream interceptors leave tasks pending when a
stream is cancelled), and a stream refused for a stale session drops it
(`stream_failed`), so the caller's own retry opens the next one with a new session. A failed
authentication (wrong password, unknown user, a mechanism the listener does not enable) is
an RPC error UNAUTHENTICATED whose details start with Kafka's SASL_AUTHENTICATION_FAILED
or UNSUPPORTED_SASL_MECHANISM, not retried by the clients.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from strom_api.oauthbearer import OAuthBearerError, client_initial_response
from strom_api.sasl_plain import plain_message
from strom_api.scram import ScramClient, ScramError
from strom_api.scram_credential import MECHANISMS
from strom_api.v1 import common_pb2, security_pb2

METADATA_KEY = "strom-sasl-session"
REAUTHENTICATE_TRAILER = "strom-sasl-reauthenticate"
_AUTH_METHOD = "/strom_api.v1.SecurityService/SaslAuthenticate"
OAUTHBEARER = "OAUTHBEARER"
MECHANISM_NAMES = (*MECHANISMS, "PLAIN", OAUTHBEARER)
AUTH_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SaslLogin:
    mechanism: str  # SCRAM-SHA-256, SCRAM-SHA-512, PLAIN or OAUTHBEARER
    username: str = ""
    password: str = ""
    # OAUTHBEARER: kafka-python's token provider, whose token() returns the JWT; asked at
    # every (re-)authentication, so that it can hand out a fresh one.
    token_provider: Any = None

    def __repr__(self) -> str:  # never the password in a log or a traceback
        return f"SaslLogin({self.mechanism}, {self.username!r})"


class _Exchange:
    """The client's side of one mechanism's messages."""

    def __init__(self, login: SaslLogin) -> None:
        self.login = login
        self.scram = (
            ScramClient(login.mechanism, login.username, login.password)
            if login.mechanism in MECHANISMS
            else None
        )

    def first(self) -> bytes:
        """The first message. OAUTHBEARER asks the token provider, which may block (an
        HTTP call to the identity provider): the asyncio channel calls this in a thread."""
        if self.login.mechanism == OAUTHBEARER:
            return _initial_response(self.login.token_provider)
        if self.scram is None:
            return plain_message(self.login.username, self.login.password)
        return self.scram.first_message()

    def next(self, step: int, server: bytes) -> bytes | None:
        """The reply to the server's message number `step` (0-based); None when done."""
        if self.scram is None:
            return None
        if step == 0:
            return self.scram.final_message(server)
        self.scram.verify_server_final(server)
        return None


def _initial_response(provider: Any) -> bytes:
    try:
        token = provider.token()
    except Exception as exc:  # the provider's own failure, whatever it is, ends the login
        raise _failure(
            f"SASL_AUTHENTICATION_FAILED: the OAUTHBEARER token provider failed: {exc}"
        ) from None
    if not isinstance(token, str):
        raise _failure(
            "SASL_AUTHENTICATION_FAILED: the OAUTHBEARER token provider's token() returned "
            f"{type(token).__name__}, not the JWT as a str"
        )
    try:
        return client_initial_response(token)
    except OAuthBearerError as exc:
        raise _failure(f"SASL_AUTHENTICATION_FAILED: {exc}") from None


def _failure(details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(),
        details,
    )


def _error_of(response: Any) -> grpc.aio.AioRpcError | None:
    if not response.HasField("error") or response.error.code == 0:
        return None
    name = common_pb2.ErrorCode.Name(response.error.code)
    message = response.error.message
    if response.enabled_mechanisms:
        message += f" (enabled: {', '.join(response.enabled_mechanisms)})"
    return _failure(f"{name}: {message}")


def _step(exchange: _Exchange, step: int, response: Any) -> tuple[bytes | None, bool]:
    """(the next client message or None, whether the exchange is complete)."""
    error = _error_of(response)
    if error is not None:
        raise error
    try:
        reply = exchange.next(step, response.auth_bytes)
    except ScramError as exc:
        raise _failure(f"SASL_AUTHENTICATION_FAILED: {exc}") from None
    return reply, bool(response.session_token)


def _request(mechanism: str, data: bytes) -> Any:
    return security_pb2.SaslAuthenticateRequest(mechanism=mechanism, auth_bytes=data)


class _Session:
    """The token of a channel and when to renew it."""

    def __init__(self, login: SaslLogin) -> None:
        self.login = login
        self.token = ""
        self.renew_at = 0.0  # monotonic seconds; 0: no expiry

    def usable(self) -> bool:
        return bool(self.token) and (not self.renew_at or time.monotonic() < self.renew_at)

    def accept(self, response: Any) -> None:
        self.token = response.session_token.decode()
        lifetime_s = response.session_lifetime_ms / 1000
        # Renewed at 85% of its lifetime, as Kafka's clients re-authenticate ahead of expiry.
        self.renew_at = time.monotonic() + 0.85 * lifetime_s if lifetime_s > 0 else 0.0

    def forget(self, token: str) -> None:
        if self.token == token:
            self.token = ""


def _with_token(details: Any, token: str) -> Any:
    metadata = list(details.metadata or ())
    metadata.append((METADATA_KEY, token))
    return details._replace(metadata=grpc.aio.Metadata(*metadata))


def _must_reauthenticate(trailing: Any) -> bool:
    return any(key == REAUTHENTICATE_TRAILER for key, _ in (trailing or ()))


# --- asyncio channels ------------------------------------------------------------------------


class AioSasl:
    """Authenticates an asyncio channel and hands out its token (one per channel)."""

    def __init__(self, login: SaslLogin) -> None:
        self.session = _Session(login)
        self.channel: grpc.aio.Channel | None = None
        self._lock: asyncio.Lock | None = None

    def interceptors(self) -> list[grpc.aio.ClientInterceptor]:
        # Unary calls only: gRPC's interceptors turn a stream's writes into an internal
        # generator and task that a cancelled stream leaves pending ("Task was destroyed
        # but it is pending"), so streams take the session as metadata (stream_metadata).
        return [_AioUnary(self)]

    async def token(self) -> str:
        if self.session.usable():
            return self.session.token
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self.session.usable():
                await self._authenticate()
        return self.session.token

    async def _authenticate(self) -> None:
        assert self.channel is not None
        exchange = _Exchange(self.session.login)
        call: Any = self.channel.stream_stream(
            _AUTH_METHOD,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=_parse_response,
        )(timeout=AUTH_TIMEOUT_S)
        try:
            await self._exchange(call, exchange)
        except asyncio.InvalidStateError:
            # The call ended before a write or read (the node is unreachable): its status.
            raise grpc.aio.AioRpcError(
                await call.code(), grpc.aio.Metadata(), grpc.aio.Metadata(), await call.details()
            ) from None
        finally:
            call.cancel()

    async def _exchange(self, call: Any, exchange: _Exchange) -> None:
        first = await _first_message(exchange)
        await call.write(_request(self.session.login.mechanism, first))
        step = 0
        while True:
            response = await call.read()
            if response is grpc.aio.EOF:
                code = await call.code()
                if code != grpc.StatusCode.OK:
                    raise grpc.aio.AioRpcError(
                        code, grpc.aio.Metadata(), grpc.aio.Metadata(), await call.details()
                    )
                raise _failure("SASL_AUTHENTICATION_FAILED: the node ended the exchange")
            reply, done = _step(exchange, step, response)
            if done:
                if reply is not None:
                    raise _failure("ILLEGAL_SASL_STATE: the exchange ended early")
                self.session.accept(response)
                return
            if reply is None:
                raise _failure("ILLEGAL_SASL_STATE: the node sent no session")
            await call.write(_request("", reply))
            step += 1


async def _first_message(exchange: _Exchange) -> bytes:
    if exchange.login.mechanism != OAUTHBEARER:
        return exchange.first()
    try:  # the provider may block: in a thread, and bounded
        async with asyncio.timeout(AUTH_TIMEOUT_S):
            return await asyncio.to_thread(exchange.first)
    except TimeoutError:
        raise _failure(
            "SASL_AUTHENTICATION_FAILED: the OAUTHBEARER token provider gave no token within "
            f"{AUTH_TIMEOUT_S:.0f} s"
        ) from None


def _parse_response(data: bytes) -> Any:
    return security_pb2.SaslAuthenticateResponse.FromString(data)


class _AioUnary(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, sasl: AioSasl) -> None:
        self.sasl = sasl

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        for attempt in (0, 1):
            token = await self.sasl.token()
            call = await continuation(_with_token(details, token), request)
            try:
                return await call
            except grpc.aio.AioRpcError as exc:
                if attempt == 0 and _must_reauthenticate(exc.trailing_metadata()):
                    self.sasl.session.forget(token)
                    continue
                raise
        raise AssertionError("unreachable")


SASL_ATTRIBUTE = "strom_sasl"  # the AioSasl an asyncio channel authenticates with


async def stream_metadata(channel: Any) -> tuple[tuple[str, str], ...]:
    """The metadata a stream opened on `channel` carries: its session token on a SASL
    channel, nothing otherwise. When no session can be had (the node is down, the
    credentials are refused) the stream opens without one and fails as any call to that
    node does (UNAVAILABLE, or the node's UNAUTHENTICATED), which the callers' retry loops
    know."""
    sasl: AioSasl | None = getattr(channel, SASL_ATTRIBUTE, None)
    if sasl is None:
        return ()
    try:
        return ((METADATA_KEY, await sasl.token()),)
    except grpc.aio.AioRpcError:
        return ()


def stream_failed(channel: Any, error: BaseException) -> bool:
    """After a stream on `channel` failed: a session the node called stale is dropped, so
    the caller's next stream authenticates again. Whether that was the cause (a stream ends
    so when its session expires, connections.max.reauth.ms): the caller may then open the
    next stream at once, as nothing is wrong with the node."""
    stale = isinstance(error, grpc.aio.AioRpcError) and _must_reauthenticate(
        error.trailing_metadata()
    )
    sasl: AioSasl | None = getattr(channel, SASL_ATTRIBUTE, None)
    if stale and sasl is not None:
        sasl.session.token = ""
    return stale


# --- blocking channels -------------------------------------------------------------------------


class _SyncSession:
    def __init__(self, login: SaslLogin) -> None:
        self.session = _Session(login)
        self.channel: grpc.Channel | None = None  # the raw channel: no interception
        self._lock = threading.Lock()

    def token(self) -> str:
        with self._lock:
            if not self.session.usable():
                self._authenticate()
            return self.session.token

    def _authenticate(self) -> None:
        assert self.channel is not None
        self.session.accept(sync_authenticate(self.channel, self.session.login))


def sync_authenticate(channel: grpc.Channel, login: SaslLogin) -> Any:
    """One SASL exchange over a blocking `channel` (not intercepted): the last
    SaslAuthenticateResponse, whose session_token the channel's calls then carry."""
    exchange = _Exchange(login)
    outgoing: queue.Queue[Any] = queue.Queue()

    def requests() -> Iterator[Any]:
        while (item := outgoing.get()) is not None:
            yield item

    outgoing.put(_request(login.mechanism, exchange.first()))
    responses = channel.stream_stream(
        _AUTH_METHOD,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=_parse_response,
    )(requests(), timeout=AUTH_TIMEOUT_S)
    try:
        for step, response in enumerate(responses):
            reply, done = _step(exchange, step, response)
            if done:
                return response
            if reply is None:
                raise _failure("ILLEGAL_SASL_STATE: the node sent no session")
            outgoing.put(_request("", reply))
        raise _failure("SASL_AUTHENTICATION_FAILED: the node ended the exchange")
    finally:
        outgoing.put(None)
        responses.cancel()


class _SyncInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def __init__(self, sasl: _SyncSession) -> None:
        self.sasl = sasl

    def _details(self, details: Any, token: str) -> Any:
        metadata = [*(details.metadata or ()), (METADATA_KEY, token)]
        return _SyncDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        for attempt in (0, 1):
            token = self.sasl.token()
            outcome = continuation(self._details(details, token), request)
            if (
                attempt == 0
                and outcome.code() == grpc.StatusCode.UNAUTHENTICATED
                and _must_reauthenticate(outcome.trailing_metadata())
            ):
                self.sasl.session.forget(token)
                continue
            return outcome
        raise AssertionError("unreachable")

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details, self.sasl.token()), request)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details, self.sasl.token()), requests)


class _SyncDetails(grpc.ClientCallDetails):
    def __init__(
        self,
        method: Any,
        timeout: Any,
        metadata: Any,
        credentials: Any,
        wait_for_ready: Any,
        compression: Any,
    ) -> None:
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


def sync_sasl_channel(channel: grpc.Channel, login: SaslLogin) -> grpc.Channel:
    """`channel` authenticating with `login` before its first call."""
    sasl = _SyncSession(login)
    sasl.channel = channel
    return grpc.intercept_channel(channel, _SyncInterceptor(sasl))
