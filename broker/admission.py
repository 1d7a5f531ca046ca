"""Each listener's admission (broker/request_session.Admission): how the principal of a
call is established on it, by the listener's security protocol.

- PLAINTEXT: User:ANONYMOUS, as Kafka names unauthenticated connections.
- SSL: the client certificate the TLS handshake verified names the principal
  (broker/listener_security.ssl_principal: `User:<subject DN>` or what
  ssl.principal.mapping.rules make of it); without one (ssl.client.auth=none) ANONYMOUS.
"""

from __future__ import annotations

from typing import Any

from broker.listener_security import ssl_principal
from broker.request_session import Session, peer_host
from strom_api.acls import ANONYMOUS


class AnonymousAdmission:
    def __init__(self, listener: str) -> None:
        self.listener = listener

    async def admit(self, method: str, context: Any) -> Session:
        return Session(ANONYMOUS, peer_host(context), self.listener)


class CertificateAdmission:
    def __init__(self, listener: str) -> None:
        self.listener = listener

    async def admit(self, method: str, context: Any) -> Session:
        return Session(ssl_principal(context.auth_context()), peer_host(context), self.listener)
