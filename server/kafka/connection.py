"""One client connection of a Kafka listener: frames in, responses out, in order.

Requests are answered in the order sent (Kafka's protocol guarantee, which producers'
sequence numbers and every client's correlation rely on). As Kafka's SocketServer, the
next frame is read only once the request before it has done its ordered part, so a client
that sends faster is held back by TCP. That ordered part is the whole request, except for
a Produce: there it ends once its batches are appended (ReplicaManager.produce's
`appended`), so the acks=all waits of up to MAX_IN_FLIGHT produce requests of one
connection overlap, while their appends, like their responses, keep the connection's order.
(Kafka's broker serves a connection strictly one request at a time; with acks=all its
replication wait is short. Strom's follower fetch round trip is longer, so a producer
with several requests in flight, as librdkafka's idempotent producer sends up to 5, was
held to one replication round trip per request.)

A frame that breaks the protocol (a negative or larger than socket.request.max.bytes size,
a connection ending inside a frame, a request that does not parse or that this listener
does not serve) closes this connection only, with a log line saying why, once the answers
to the requests before it are written. A handler may also answer with no response (None)
or by closing the connection (CloseConnection), as Kafka does for an acks=0 Produce
(server/kafka/no_response.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from kio.serial.errors import OutOfBoundValue

from server.kafka.apis import API_VERSIONS, CONNECTION_APIS, SERVED
from server.kafka.frames import (
    SIZE,
    InvalidRequest,
    Request,
    UnsupportedApiVersions,
    fitted,
    holds_many,
    parse_request,
    response_frame,
)
from server.kafka.handlers import KafkaApis
from server.kafka.no_response import CloseConnection
from server.kafka.ordering import ORDERED_PART_DONE
from server.kafka.sasl_api import ConnectionAuthentication
from server.request_session import Session, enter, leave
from strom_api.acls import ANONYMOUS

log = logging.getLogger("strom.kafka")

# request name, version, seconds from the frame read to the response written
Observe = Callable[[str, int, float], None]

# Requests of one connection whose replication waits may overlap: Kafka's producers send
# at most 5 at once with idempotence (max.in.flight.requests.per.connection); more would
# only hold more request memory per connection.
MAX_IN_FLIGHT = 5

# A frame at least this large is decoded, and its response encoded, on a worker thread: kio
# decodes about a microsecond per item (an OffsetCommit of 100,000 partitions, 1.8 MB, took
# 88 ms), and the bounds walk before it as much again, so a frame of socket.request.max.bytes
# (100 MB) naming millions would hold the node's event loop for seconds. On a thread the
# loop still runs between the interpreter's switches (5 ms); a smaller frame costs less than
# the hop. A response of THREAD_RESPONSE_ITEMS items or more is encoded there too, whatever
# the request's size (a Metadata request of 900 KB named 112,500 topics).
THREAD_FRAME_BYTES = 256 << 10
THREAD_RESPONSE_ITEMS = 1_000

AnyRequest = Request | UnsupportedApiVersions


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
    answers = _Answers(writer, apis.listener_name, observe)
    try:
        while not answers.closing:
            why = await _serve_one(reader, apis, max_request_bytes, auth, answers)
            if why is not None:
                await answers.drain()  # what came before is answered first
                if why:
                    log.info(
                        "Closing socket connection to %s on listener %s due to invalid request: %s",
                        where,
                        apis.listener_name,
                        why,
                    )
                return
        await answers.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        return  # the client went away while its answer was written
    finally:
        answers.cancel()
        writer.close()


async def _serve_one(
    reader: asyncio.StreamReader,
    apis: KafkaApis,
    max_request_bytes: int,
    auth: ConnectionAuthentication,
    answers: _Answers,
) -> str | None:
    """Reads one request and starts it; returns once its ordered part is done: None to
    go on, "" when the client closed between frames, else why the connection is closed."""
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
    limit, setting = auth.frame_limit(max_request_bytes)
    if size > limit:
        return f"Invalid receive (size = {size} larger than {limit}, {setting})"
    try:
        frame = await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        return f"the connection ended inside a frame: {len(exc.partial)} of {size} bytes came"
    start = time.perf_counter()
    if auth.raw_tokens:  # after a v0 SaslHandshake: a bare SASL token, not a request
        token, failed = auth.raw_token(frame)
        if token is not None:
            answers.writer.write(SIZE.pack(len(token)) + token)
            await answers.flush()
        return "" if failed else None  # a refused exchange was logged by sasl_exchange
    large = size >= THREAD_FRAME_BYTES
    try:
        request = await asyncio.to_thread(parse_request, frame) if large else parse_request(frame)
    except InvalidRequest as exc:
        return str(exc)
    refused = auth.refusal(request)
    if refused is not None:
        return refused
    if isinstance(request, Request) and request.api_key in CONNECTION_APIS:
        # They change who the connection is: every request before them is answered first.
        await answers.drain()
        response, close = auth.handle(request)
        answers.write(request, response, start)
        await answers.flush()
        return "" if close else None  # a refused exchange was logged by sasl_exchange
    # Before a SASL login only ApiVersions comes here (refusal() admits nothing else).
    session = Session(auth.principal or ANONYMOUS, auth.host, apis.listener_name)
    await answers.room()
    ordered = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(_handle(apis, request, session, ordered))
    answers.add(request, task, start, large)
    await asyncio.wait((ordered, task), return_when=asyncio.FIRST_COMPLETED)
    return None


async def _handle(
    apis: KafkaApis, request: AnyRequest, session: Session, ordered: asyncio.Future[None]
) -> Any:
    def ordered_part_done() -> None:
        if not ordered.done():
            ordered.set_result(None)

    ORDERED_PART_DONE.set(ordered_part_done)  # this task's own context
    token = enter(session)
    try:
        return await apis.handle(request)
    finally:
        leave(token)
        ordered_part_done()


class _Answers:
    """The connection's requests in progress, answered in the order they came: each
    response is written once those before it are."""

    def __init__(self, writer: asyncio.StreamWriter, listener_name: str, observe: Observe):
        self.writer = writer
        self.listener_name = listener_name
        self.observe = observe
        self.pending: list[asyncio.Task[None]] = []
        self.handlers: set[asyncio.Task[Any]] = set()
        self.closing = False  # a handler closed the connection, or failed

    async def room(self) -> None:
        """Waits until fewer than MAX_IN_FLIGHT requests are unanswered."""
        while len(self.pending) >= MAX_IN_FLIGHT:
            await asyncio.wait(self.pending[:1])
            self._forget_done()

    def add(
        self, request: AnyRequest, handler: asyncio.Task[Any], start: float, large: bool
    ) -> None:
        """`large`: the request came in a frame of THREAD_FRAME_BYTES or more, so its
        response, as long, is encoded on a worker thread."""
        before = self.pending[-1] if self.pending else None
        self.handlers.add(handler)
        handler.add_done_callback(self.handlers.discard)
        answer = self._answer(before, request, handler, start, large)
        self.pending.append(asyncio.create_task(answer))

    async def _answer(
        self,
        before: asyncio.Task[None] | None,
        request: AnyRequest,
        handler: asyncio.Task[Any],
        start: float,
        large: bool,
    ) -> None:
        if before is not None:
            with contextlib.suppress(Exception):
                await before
        try:
            response = await handler
        except CloseConnection as exc:
            log.info(
                "Closing socket connection on listener %s after request %d: %s",
                self.listener_name,
                request.correlation_id,
                exc,
            )
            self._close()
            return
        except Exception as exc:  # a bug or a collaborator's failure: this connection only
            self._close_after(request, "failed", exc)
            return
        if self.closing:
            return  # an earlier request closed the connection: nothing more is said
        frame = None
        if response is not None:
            # Encoded here, where a failure closes the connection: unanswered, the request
            # would leave the next request's answer in its place (a 32,767-byte topic name
            # quoted in an error message over a legacy string's bound did).
            try:
                if large or holds_many(response, THREAD_RESPONSE_ITEMS):
                    frame = await asyncio.to_thread(
                        response_frame, request.correlation_id, response
                    )
                else:
                    frame = response_frame(request.correlation_id, response)
            except OutOfBoundValue:  # an error message quoting a long name: cut to fit
                try:
                    frame = response_frame(request.correlation_id, fitted(response))
                except Exception as exc:
                    self._close_after(request, "was answered with what could not be encoded", exc)
                    return
            except Exception as exc:
                self._close_after(request, "was answered with what could not be encoded", exc)
                return
            if self.closing:
                return
        self.write(request, response, start, frame)
        await self.flush()

    def _close_after(self, request: AnyRequest, what: str, exc: Exception) -> None:
        log.error(
            "Closing socket connection on listener %s: request %d (api key %d v%d) %s: %s: %s",
            self.listener_name,
            request.correlation_id,
            getattr(request, "api_key", API_VERSIONS),
            request.api_version,
            what,
            type(exc).__name__,
            exc,
        )
        self._close()

    def write(
        self, request: AnyRequest, response: Any, start: float, frame: bytes | None = None
    ) -> None:
        """Writes `response` (`frame`: already encoded), unless the connection is closing:
        the client went away meanwhile (uvloop's transport raised RuntimeError on the write,
        a traceback logged: the Kafka-protocol fuzzer, seed 6 case 1966)."""
        if self.writer.is_closing():
            return
        if frame is not None:
            self.writer.write(frame)
        elif response is not None:  # None: the request takes no response (acks=0)
            self.writer.write(response_frame(request.correlation_id, response))
        if isinstance(request, Request):
            name, version = SERVED[request.api_key].name, request.api_version
        else:
            name, version = SERVED[API_VERSIONS].name, request.api_version
        self.observe(name, version, time.perf_counter() - start)

    async def flush(self) -> None:
        try:
            await self.writer.drain()
        except ConnectionError:
            self._close()  # the client went away: its other answers have nowhere to go

    async def drain(self) -> None:
        """Until every request so far is answered (or the connection is closing)."""
        while self.pending:
            await asyncio.wait(self.pending)
            self._forget_done()

    def _forget_done(self) -> None:
        self.pending = [t for t in self.pending if not t.done()]

    def _close(self) -> None:
        self.closing = True
        self.writer.close()  # the reader's next read ends too

    def cancel(self) -> None:
        for task in (*self.pending, *self.handlers):
            task.cancel()
