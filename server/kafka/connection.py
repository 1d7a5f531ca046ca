"""One client connection of a Kafka listener: frames in, responses out, in order.

As Kafka's SocketServer, a connection has one request in progress at a time: the next
frame is read once the previous response is written, so pipelined requests are answered
in the order sent, and a client that sends faster is held back by TCP. A frame that breaks
the protocol (a negative or larger than socket.request.max.bytes size, a connection ending
inside a frame, a request that does not parse or that this listener does not serve) closes
this connection only, with a log line saying why. A handler may also answer with no
response (None) or by closing the connection (CloseConnection), as Kafka does for an
acks=0 Produce (server/kafka/no_response.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from server.kafka.apis import API_VERSIONS, CONNECTION_APIS, SERVED
from server.kafka.frames import (
    SIZE,
    InvalidRequest,
    Request,
    UnsupportedApiVersions,
    parse_request,
    response_frame,
)
from server.kafka.handlers import KafkaApis
from server.kafka.no_response import CloseConnection
from server.kafka.sasl_api import ConnectionAuthentication
from server.request_session import Session, enter, leave
from strom_api.acls import ANONYMOUS

log = logging.getLogger("strom.kafka")

# request name, version, seconds from the frame read to the response written
Observe = Callable[[str, int, float], None]


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    apis: KafkaApis,
    max_request_bytes: int,
    observe: Observe,
    auth: ConnectionAuthentication,
) -> None:
    """Serves the connection until it ends; `auth` says who it is (the listener's
    principal on PLAINTEXT and SSL, the SASL exchange's on SASL listeners)."""
    peer = writer.get_extra_info("peername")
    where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
    try:
        while True:
            why = await _serve_one(reader, writer, apis, max_request_bytes, observe, auth)
            if why is not None:
                if why:
                    log.info(
                        "Closing socket connection to %s on listener %s due to invalid request: %s",
                        where,
                        apis.listener_name,
                        why,
                    )
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return  # the client went away while its answer was written
    finally:
        writer.close()


async def _serve_one(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    apis: KafkaApis,
    max_request_bytes: int,
    observe: Observe,
    auth: ConnectionAuthentication,
) -> str | None:
    """Serves one request; returns None to go on, "" when the client closed between
    frames, else why the connection is closed."""
    try:
        head = await reader.readexactly(SIZE.size)
    except asyncio.IncompleteReadError as exc:
        return (
            f"the connection ended inside a frame's size ({len(exc.partial)} of 4 bytes)"
            if (exc.partial)
            else ""
        )
    (size,) = SIZE.unpack(head)
    if size < 0:
        return f"Invalid receive (size = {size})"
    if size > max_request_bytes:
        return (
            f"Invalid receive (size = {size} larger than {max_request_bytes}, "
            "socket.request.max.bytes)"
        )
    try:
        frame = await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        return f"the connection ended inside a frame: {len(exc.partial)} of {size} bytes came"
    start = time.perf_counter()
    try:
        request = parse_request(frame)
    except InvalidRequest as exc:
        return str(exc)
    refused = auth.refusal(request)
    if refused is not None:
        return refused
    close = False
    if isinstance(request, Request) and request.api_key in CONNECTION_APIS:
        response, close = auth.handle(request)
        _reply(writer, request, response)
        await writer.drain()
        _observed(observe, request, start)
        return "" if close else None  # a refused exchange was logged by sasl_exchange
    # Before a SASL login only ApiVersions comes here (refusal() admits nothing else).
    token = enter(Session(auth.principal or ANONYMOUS, auth.host, apis.listener_name))
    try:
        response = await apis.handle(request)
    except CloseConnection as exc:
        log.info(
            "Closing socket connection on listener %s after request %d: %s",
            apis.listener_name,
            request.correlation_id,
            exc,
        )
        return ""  # logged above
    except Exception as exc:  # a bug or a collaborator's failure: this connection only
        log.error(
            "Closing socket connection on listener %s: request %d (api key %d v%d) failed: %s: %s",
            apis.listener_name,
            request.correlation_id,
            getattr(request, "api_key", API_VERSIONS),
            request.api_version,
            type(exc).__name__,
            exc,
        )
        return ""  # logged above
    finally:
        leave(token)
    if response is not None:  # None: the request takes no response (acks=0)
        _reply(writer, request, response)
        await writer.drain()
    _observed(observe, request, start)
    return None


def _reply(
    writer: asyncio.StreamWriter, request: Request | UnsupportedApiVersions, response: Any
) -> None:
    writer.write(response_frame(request.correlation_id, response))


def _observed(observe: Observe, request: Request | UnsupportedApiVersions, start: float) -> None:
    if isinstance(request, Request):
        name, version = SERVED[request.api_key].name, request.api_version
    else:
        name, version = SERVED[API_VERSIONS].name, request.api_version
    observe(name, version, time.perf_counter() - start)
