"""Each listener's admission (server/request_session.Admission): how the principal of a
call is established on it, by the listener's security protocol.

- PLAINTEXT: User:ANONYMOUS, as Kafka names unauthenticated connections.
- SASL_PLAINTEXT / SASL_SSL: the session the client authenticated on this connection
  with SecurityService.SaslAuthenticate (server/sasl_service.py), whose token it carries in
  every call (server/sasl_sessions.py): `User:<SASL user name>`. A call without a valid
  token is refused UNAUTHENTICATED with SASL_AUTHENTICATION_FAILED and a sentence; when the
  token is merely stale (another connection, expired, a restarted node) the trailer
  `strom-sasl-reauthenticate` tells the client to authenticate again. The handshake itself
  and the health service are the only calls served without a session.
- SSL: the client certificate the TLS handshake verified names the principal
  (server/listener_security.ssl_principal: `User:<subject DN>` or what
  ssl.principal.mapping.rules make of it); without one (ssl.client.auth=none) ANONYMOUS.

A broker listener admits no call at all before the broker has caught up with the metadata
log (CaughtUpAdmission): Kafka's broker enables request processing only once its initial
catch-up is acknowledged and its first metadata image published. Until then a restarted
broker's image lacks what the cluster did while it was down (topics, ACLs, SCRAM users), and
its answers would say so: a topic "unknown" (with the authorizer on, a producer allowed to
write it was refused TOPIC_AUTHORIZATION_FAILED for not being allowed to CREATE it), a new
user's login refused. The call is refused UNAVAILABLE, which clients treat as a broker they
cannot reach yet (they ask another and retry); the health service is not gated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from server.listener_security import ListenerTls
from server.principal_mapping import NoMatchingRule
from server.request_session import REAUTHENTICATE, Admission, Session, peer_host
from server.sasl_sessions import METADATA_KEY, InvalidSession, SessionSigner
from strom_api.acls import ANONYMOUS


class AnonymousAdmission:
    def __init__(self, listener: str) -> None:
        self.listener = listener

    async def admit(self, method: str, context: Any) -> Session:
        return Session(ANONYMOUS, peer_host(context), self.listener)


class CertificateAdmission:
    """The certificate's DN through the listener's ssl.principal.mapping.rules; a DN no rule
    maps is refused, as Kafka fails the authentication of that connection."""

    def __init__(self, listener: str, tls: ListenerTls) -> None:
        self.listener = listener
        self.tls = tls

    async def admit(self, method: str, context: Any) -> Session:
        try:
            principal = self.tls.principal(context.auth_context())
        except NoMatchingRule as exc:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                f"SSL_AUTHENTICATION_FAILED: the client certificate's name maps to no "
                f"principal on listener {self.listener}: {exc}",
            )
            raise
        return Session(principal, peer_host(context), self.listener)


_HANDSHAKE_SERVICE = "/strom_api.v1.SecurityService/"


class SaslAdmission:
    def __init__(self, listener: str, protocol: str, signer: SessionSigner) -> None:
        self.listener = listener
        self.protocol = protocol
        self.signer = signer

    async def admit(self, method: str, context: Any) -> Session:
        host = peer_host(context)
        if method.startswith(_HANDSHAKE_SERVICE):
            return Session(ANONYMOUS, host, self.listener)
        token = next((v for k, v in context.invocation_metadata() if k == METADATA_KEY), None)
        if token is None:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                f"SASL_AUTHENTICATION_FAILED: listener {self.listener} is {self.protocol}: "
                "authenticate with SASL first (security.protocol, sasl.mechanism and the "
                "credentials in the client's settings)",
                trailing_metadata=REAUTHENTICATE,
            )
        try:
            session = self.signer.check(str(token), str(context.peer()))
        except InvalidSession as exc:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                f"SASL_AUTHENTICATION_FAILED: {exc}",
                trailing_metadata=REAUTHENTICATE,
            )
            raise  # abort raises; this keeps the type checker informed
        return Session(session.principal, host, self.listener, session.expiry_ms)


class CaughtUpAdmission:
    """`inner`'s admission, once `caught_up()`; before, every call refused UNAVAILABLE."""

    def __init__(self, inner: Admission, caught_up: Callable[[], bool]) -> None:
        self.inner = inner
        self.caught_up = caught_up

    async def admit(self, method: str, context: Any) -> Session:
        if not self.caught_up():
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                "the broker is starting: it serves requests once it has caught up with the "
                "metadata log",
            )
        return await self.inner.admit(method, context)
