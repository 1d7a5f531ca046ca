"""Raw Kafka-protocol connections: a case's frames sent on one connection and its answers
read until the broker closes it or a deadline passes, and the one-request round trips the
checks make on connections of their own.

A case's connection is half-closed once its frames are sent, as a client that has nothing
more to say: the broker answers what it read, then sees the end between frames and closes,
so every case ends by itself without a wait. Frames are sent while answers are read (one
select loop): a broker holds back reading once five answers are unread, and a case's
frames may be larger than the socket buffers."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.index import load_request_schema

from tests.kafka_fuzz.wire import SIZE, framed, header, join, pieces

CONNECT_TIMEOUT_S = 2.0
SETTLE_POLL_S = 0.1
CLOSED, RESET, DEADLINE, REFUSED = "closed", "reset", "deadline", "refused"


@dataclass
class Exchange:
    """What came back on a case's connection."""

    answers: list[bytes] = field(default_factory=list)  # response frames without their size
    end: str = CLOSED  # CLOSED, RESET (by the broker), DEADLINE or REFUSED (no connection)
    torn: int = 0  # bytes after the last whole answer
    seconds: float = 0.0
    local: str = ""  # this end's address, as the node's log names the connection


def exchange(
    host: str,
    port: int,
    data: bytes,
    deadline_s: float,
    settled: Callable[[list[bytes]], bool] | None = None,
    settle_s: float = 0.0,
) -> Exchange:
    """Sends `data` (the case's frames) on a new connection, half-closes it and reads the
    answers until the broker closes the connection or `deadline_s` passes; or, once
    `settle_s` passed, as soon as `settled(answers so far)` says nothing more is owed."""
    started = time.monotonic()
    out = Exchange()
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError:
        out.end = REFUSED
        return out
    with sock:
        local_host, local_port = sock.getsockname()[:2]
        out.local = f"{local_host}:{local_port}"
        sock.setblocking(False)
        received = bytearray()
        out.end = _pump(sock, data, received, started + deadline_s, settled, started + settle_s)
        out.answers, out.torn = _frames(bytes(received))
    out.seconds = time.monotonic() - started
    return out


def _pump(
    sock: socket.socket,
    data: bytes,
    received: bytearray,
    deadline: float,
    settled: Callable[[list[bytes]], bool] | None,
    settle_at: float,
) -> str:
    pending = memoryview(data)
    sent = 0
    writing = bool(pending)
    if not writing:
        _half_close(sock)
    while True:
        now = time.monotonic()
        if now >= deadline:
            return DEADLINE
        if settled is not None and now >= settle_at and settled(_frames(bytes(received))[0]):
            return DEADLINE
        wait = deadline - now if settled is None else min(deadline - now, SETTLE_POLL_S)
        # poll(), not select(): a test process may hold more than FD_SETSIZE (1,024) files.
        poller = select.poll()
        poller.register(sock, select.POLLIN | (select.POLLOUT if writing else 0))
        events = dict(poller.poll(wait * 1000)).get(sock.fileno(), 0)
        readable = events & (select.POLLIN | select.POLLHUP | select.POLLERR)
        writable = writing and events & (select.POLLOUT | select.POLLERR)
        if writable:
            try:
                sent += sock.send(pending[sent:])
            except OSError:  # the broker closed while the frames were still coming
                writing = False
            else:
                if sent == len(pending):
                    _half_close(sock)
                    writing = False
        if readable:
            try:
                chunk = sock.recv(1 << 16)
            except ConnectionResetError:
                return RESET
            if not chunk:
                return CLOSED
            received += chunk


def _half_close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the broker may have closed it already
        sock.shutdown(socket.SHUT_WR)


def _frames(data: bytes) -> tuple[list[bytes], int]:
    """The whole response frames in `data`, without their sizes, and how many bytes follow
    the last."""
    frames, at = [], 0
    while at + SIZE.size <= len(data):
        (size,) = SIZE.unpack_from(data, at)
        if size < 0 or at + SIZE.size + size > len(data):
            break
        frames.append(data[at + SIZE.size : at + SIZE.size + size])
        at += SIZE.size + size
    return frames, len(data) - at


# Metadata v12 for no topics: the brokers and the controller only, the cheapest request
# that goes through a node's request path (its event loop), as a client's would.
PING_KEY, PING_VERSION = 3, 12
_PING_REQUEST = load_request_schema(PING_KEY, PING_VERSION)(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def request_frame(
    request: object, correlation_id: int, client_id: str = "strom-kafka-fuzz"
) -> bytes:
    key, version = request.__api_key__, request.__version__  # type: ignore[attr-defined]
    return framed(
        join(pieces(header(key, version, correlation_id, client_id))) + join(pieces(request))
    )


class Prober:
    """One long-lived connection to a node for ping round trips; reconnects after a
    failure."""

    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)
        self.sock: socket.socket | None = None
        self.correlation_id = 0

    def call(self, request: object, timeout_s: float) -> bytes:
        """The response frame (without its size) to `request`; raises OSError on a failure
        or after `timeout_s`."""
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=timeout_s)
        self.correlation_id += 1
        try:
            self.sock.settimeout(timeout_s)
            self.sock.sendall(request_frame(request, self.correlation_id))
            (size,) = SIZE.unpack(_read(self.sock, SIZE.size))
            answer = _read(self.sock, size)
            if struct.unpack_from(">i", answer)[0] != self.correlation_id:
                raise OSError("an answer to another request")
            return answer
        except OSError:
            self.close()
            raise

    def ping(self, timeout_s: float) -> float:
        """Seconds for a Metadata round trip; raises OSError past `timeout_s`."""
        started = time.monotonic()
        self.call(_PING_REQUEST, timeout_s)
        return time.monotonic() - started

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the node closed the connection")
        data += chunk
    return bytes(data)
