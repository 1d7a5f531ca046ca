"""Each listener's admission (broker/request_session.Admission): how the principal of a
call is established on it, by the listener's security protocol.

- PLAINTEXT: User:ANONYMOUS, as Kafka names unauthenticated connections.
- SASL_PLAINTEXT / SASL_SSL: the session the client authenticated on this connection
  with SecurityService.SaslAuthenticate (broker/sasl_service.py), whose token it carries in
  every call (broker/sasl_sessions.py): `User:<SASL user name>`. A call without a valid
  token is refused UNAUTHENTICATED with SASL_AUTHENTICATION_FAILED and a sentence; when the
  token is merely stale (another connection, expired, a restarted node) the trailer
  `strom-sasl-reauthenticate` tells the client to authenticate again. The handshake itself
  and the health service are the only calls served without a session.
- SSL: the client certificate the TLS handshake verified names the principal
  (broker/listener_security.ssl_principal: `User:<subject DN>` or what
  ssl.principal.mapping.rules make of it); without one (ssl.client.auth=none) ANONYMOUS.
"""

from __future__ import annotations

from typing import Any

import grpc

from broker.listener_security import ListenerTls
from broker.principal_mapping import NoMatchingRule
from broker.request_session import Session, peer_host
from broker.sasl_sessions import METADATA_KEY, InvalidSession, SessionSigner
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
REAUTHENTICATE = (("strom-sasl-reauthenticate", "1"),)


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
        return Session(session.principal, host, self.listener)
