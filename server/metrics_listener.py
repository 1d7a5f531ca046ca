"""The node's Prometheus HTTP listener (`prometheus.metrics.host`/`.port`): bound alone and
before anything else of the node starts, served once the node's metrics exist.

Bound alone, like every gRPC listener (raft/transport.EXCLUSIVE_PORT): never SO_REUSEPORT,
so a second process on the port is refused instead of sharing it. SO_REUSEADDR stays on (as
Java's server sockets have it on Linux): it lets a restarted node bind a port that
connections of its previous life still hold in TIME_WAIT, never one a process listens on.
Bound first: a port in use ends the node with one line (BindError, "Socket server failed to
bind to ...") and exit code 1 before it has joined the quorum or registered as a broker.
Scrapes that arrive before `serve` wait in the socket's backlog.
"""

from __future__ import annotations

import socket
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from raft.transport import BindError


class _Server(ThreadingMixIn, WSGIServer):
    allow_reuse_address = True  # TIME_WAIT only (module docstring)
    allow_reuse_port = False  # never share the port with another process
    daemon_threads = True  # a scrape in flight never holds the process at exit


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """One line per scrape would flood the node's log."""


def _not_yet(environ: Any, start_response: Any) -> list[bytes]:
    start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
    return [b"the node is starting\n"]


class MetricsListener:
    def __init__(self, host: str, port: int) -> None:
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
            server_class = type("MetricsServer", (_Server,), {"address_family": family})
            self._server: WSGIServer = make_server(
                host, port, _not_yet, server_class, _QuietHandler
            )
        except OSError as exc:
            raise BindError(
                f"Socket server failed to bind to {host}:{port} (prometheus.metrics.port): "
                f"{exc.strerror or exc}"
            ) from None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def serve(self, registry: CollectorRegistry) -> None:
        self._server.set_app(make_wsgi_app(registry))
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
