"""The asyncio server of one Kafka listener (server/listeners.py: kafka.listener.names).

Bound when the broker starts (a port in use stops the node then, as for its gRPC
listeners), it accepts connections only once the broker serves: Kafka's broker opens its
acceptors (enableRequestProcessing) after its first catch-up with the metadata log, and
until then its image would answer topics it does not know yet. Connections made before
wait in the socket's backlog."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from server.kafka.connection import Observe, serve_connection
from server.kafka.handlers import KafkaApis
from server.kafka.sasl_api import ConnectionAuthentication
from server.listeners import Listener
from server.principal_mapping import NoMatchingRule
from server.sasl_exchange import SaslListener
from strom_api.acls import ANONYMOUS

log = logging.getLogger("strom.kafka")

BACKLOG = 50  # Kafka's acceptors use the JVM's default backlog, 50
# A client that opens a TLS connection and stalls holds a slot no longer than this.
SSL_HANDSHAKE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class KafkaListenerTls:
    """An SSL Kafka listener: the context its handshakes use (ServerTls.ssl_context, the
    material of the listener's ssl.* settings, rotated as the gRPC listeners' is) and the
    principal a client certificate names (ListenerTls.certificate_principal, the same rule
    as the gRPC listeners': ssl.principal.mapping.rules)."""

    context: ssl.SSLContext
    principal: Callable[[bytes | None], str]


class KafkaListener:
    def __init__(
        self,
        listener: Listener,
        apis: KafkaApis,
        max_request_bytes: int,
        observe: Observe,
        tls: KafkaListenerTls | None = None,
        sasl: SaslListener | None = None,
    ) -> None:
        self.listener = listener
        self.tls = tls
        self.sasl = sasl  # SASL_PLAINTEXT / SASL_SSL: a connection authenticates first
        self.apis = apis
        self.max_request_bytes = max_request_bytes  # socket.request.max.bytes
        self.observe = observe
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()

    async def bind(self) -> int:
        """Binds (not yet accepting); returns the port."""
        # Listening from now on (asyncio would listen only once it serves): a client that
        # connects early waits in the backlog, as on Kafka's not yet accepting acceptor.
        sock = socket.create_server(
            (self.listener.host, self.listener.port), backlog=BACKLOG, reuse_port=False
        )
        try:
            self.server = await asyncio.start_server(
                self._connected,
                sock=sock,
                start_serving=False,
                backlog=BACKLOG,
                ssl=None if self.tls is None else self.tls.context,
                ssl_handshake_timeout=None if self.tls is None else SSL_HANDSHAKE_TIMEOUT_S,
            )
        except BaseException:
            sock.close()
            raise
        return int(sock.getsockname()[1])

    async def start_serving(self) -> None:
        assert self.server is not None
        await self.server.start_serving()
        log.info("Kafka protocol listener %s serving on %s", self.listener.name, self.address)

    @property
    def address(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def stop(self) -> None:
        if self.server is None:
            return
        self.server.close()
        for task in list(self.connections):
            task.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)
        await self.server.wait_closed()

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            peer = writer.get_extra_info("peername")
            host = peer[0] if isinstance(peer, tuple) else ""
            if self.sasl is not None:  # nobody until the SASL exchange says who
                auth = ConnectionAuthentication(None, self.sasl, host)
            else:
                principal = self._principal(writer)
                if principal is None:
                    writer.close()
                    return
                auth = ConnectionAuthentication(principal, None, host)
            await serve_connection(
                reader, writer, self.apis, self.max_request_bytes, self.observe, auth
            )
        finally:
            self.connections.discard(task)

    def _principal(self, writer: asyncio.StreamWriter) -> str | None:
        """Who the connection is: User:ANONYMOUS on PLAINTEXT (as Kafka names it), the
        verified client certificate's principal on SSL; None (logged) when the
        certificate's name maps to no principal, whose connection Kafka fails too."""
        if self.tls is None:
            return ANONYMOUS
        ssl_object = writer.get_extra_info("ssl_object")
        der = None if ssl_object is None else ssl_object.getpeercert(binary_form=True)
        try:
            return self.tls.principal(der)
        except NoMatchingRule as exc:
            peer = writer.get_extra_info("peername")
            log.info(
                "Failed authentication with /%s (listener %s, SSL): the client certificate's "
                "name maps to no principal: %s",
                peer[0] if isinstance(peer, tuple) else peer,
                self.listener.name,
                exc,
            )
            return None
