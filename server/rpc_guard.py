"""What stands between a gRPC port and the servicers: malformed requests answered with a
clear status instead of a traceback, unexpected failures logged once per cause.

Anyone can send bytes to a port. Before this, a request that was not a valid protobuf made
grpc's server log a full traceback and answer UNKNOWN ("Unexpected DecodeError"), so 98,000
fuzzed requests grew one node's log from 61 KB to 15.6 MB. Now:
- `guarded(server)` is the server as the generated `add_*Servicer_to_server` functions see
  it: every method handler they register gets a deserializer that cannot raise (a request
  that does not parse becomes `Malformed`) and a behaviour that answers such a request with
  INVALID_ARGUMENT naming Kafka's CORRUPT_MESSAGE, and turns any exception a servicer lets
  escape into INTERNAL with one log line per cause. Kafka closes the connection on a
  request it cannot parse; over gRPC the status ends only that call.
- `guarded(server, admission)` also asks the listener's admission (server/admission.py) who
  the caller is before anything else is looked at, and serves the call with that Session
  set (server/request_session.py); a caller the admission refuses ends there.
- A request of THREAD_REQUEST_BYTES or more is parsed and checked on a worker thread once
  its handler runs (grpc calls the deserializer on the event loop), so the 100 MB a request
  may take cannot hold the loop for seconds.
- `quiet_grpc_server_log()` rate-limits grpc's own "Unexpected ... raised by servicer" log
  for the services not wrapped here (Raft's, whose handler reads messages itself, and
  health), keeping one traceback per cause a minute.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from operator import attrgetter
from typing import Any

import grpc
import grpc.aio

from raft.rate_limited_log import RateLimitedLog
from server.request_session import REAUTHENTICATE, Admission, current_session, enter, leave

log = logging.getLogger("strom.rpc")


class Malformed:
    """A request whose bytes did not parse as the method's message."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


_errors = RateLimitedLog(log)


# Kafka's STRING is length-prefixed by an int16: no name, id or key of a Kafka request is
# longer. Strom's requests keep that bound: a string field past it makes the request
# malformed. (Protobuf decodes a string field anew on every access, so one megabyte-long
# topic name read per partition once held a node's event loop for minutes.)
MAX_STRING_BYTES = 32_767


class StringTooLong(ValueError):
    """A string field of a request is longer than MAX_STRING_BYTES."""


# Per message type: (its string fields, its map fields, its message fields that can hold a
# string at any depth), so a request's walk skips whatever cannot (a Fetch's partitions).
_Plan = tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]
_plans: dict[Any, _Plan] = {}


def _plan(descriptor: Any) -> _Plan:
    plan = _plans.get(descriptor)
    if plan is None:
        _plans[descriptor] = ((), (), ())  # a placeholder while a recursive type is planned
        fields = descriptor.fields
        strings = tuple(f for f in fields if f.type == f.TYPE_STRING)
        maps = tuple(
            f for f in fields if f.type == f.TYPE_MESSAGE and f.message_type.GetOptions().map_entry
        )
        messages = tuple(
            f
            for f in fields
            if f.type == f.TYPE_MESSAGE and f not in maps and any(_plan(f.message_type))
        )
        plan = _plans[descriptor] = (strings, maps, messages)
    return plan


def _too_long(text: str) -> bool:
    # A str of n characters encodes to at most 4n bytes: most need no encoding to check.
    return len(text) > MAX_STRING_BYTES // 4 and len(text.encode()) > MAX_STRING_BYTES


def check_strings(message: Any) -> None:
    """Raises StringTooLong for a string field, at any depth, map entries included, over
    MAX_STRING_BYTES."""
    strings, maps, messages = _plan(message.DESCRIPTOR)
    for field in strings:
        values = getattr(message, field.name)
        if any(_too_long(v) for v in (values if field.is_repeated else (values,))):
            raise StringTooLong(
                f"field {field.full_name} is longer than Kafka's {MAX_STRING_BYTES}-byte "
                "string limit"
            )
    for field in maps:
        for key, value in getattr(message, field.name).items():
            if any(isinstance(t, str) and _too_long(t) for t in (key, value)):
                raise StringTooLong(f"an entry of {field.full_name} is too long")
    for field in messages:
        if field.is_repeated:
            _check_items(getattr(message, field.name), field.message_type)
        elif message.HasField(field.name):
            check_strings(getattr(message, field.name))


def _check_items(items: Any, descriptor: Any) -> None:
    """check_strings of each item of a repeated field. Items holding only single strings
    (a commit's partitions, with their metadata) are measured a field at a time, with no
    Python call per item: 100,000 partitions took 167 ms one call each, on the event loop."""
    strings, maps, messages = _plan(descriptor)
    if not maps and not messages and not any(f.is_repeated for f in strings):
        longest = max(
            (max(map(len, map(attrgetter(f.name), items)), default=0) for f in strings),
            default=0,
        )
        if longest <= MAX_STRING_BYTES // 4:  # as _too_long: no need to encode any
            return
    for item in items:
        check_strings(item)


# A request of at least this many bytes is parsed and checked on a worker thread, not in
# grpc's deserializer on the event loop: checking the strings of a 100 MB request
# (socket.request.max.bytes) naming millions of partitions takes seconds of Python. On a
# thread the loop still runs between the interpreter's switches (5 ms). Smaller requests
# (a producer's, of a few batches) stay on the loop, where the hop would cost more.
THREAD_REQUEST_BYTES = 1 << 20


class _Unparsed:
    """A request of THREAD_REQUEST_BYTES or more, parsed once its handler runs."""

    __slots__ = ("data", "deserialize")

    def __init__(self, data: bytes, deserialize: Callable[[bytes], Any]) -> None:
        self.data = data
        self.deserialize = deserialize


def _parse(deserialize: Callable[[bytes], Any], data: bytes) -> Any:
    """The message, or Malformed."""
    try:
        message = deserialize(data)
        if len(data) > MAX_STRING_BYTES:  # else no string in it can be longer
            check_strings(message)
        return message
    except Exception as exc:  # protobuf's DecodeError, StringTooLong, anything a parser raises
        return Malformed(exc)


def _lenient(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def parse(data: bytes) -> Any:
        if len(data) >= THREAD_REQUEST_BYTES:
            return _Unparsed(data, deserialize)
        return _parse(deserialize, data)

    return parse


async def _parsed(request: Any) -> Any:
    if isinstance(request, _Unparsed):
        return await asyncio.to_thread(_parse, request.deserialize, request.data)
    return request


class _Refused(Exception):
    """A request of a stream that ends the call: raised where the requests are read, the
    call aborted by its own task (stream_stream), between two of its writes. A servicer may
    read ahead in a task of its own (server/produce_stream.py) while a response is being
    written; an abort from there raced that write (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS: the
    fuzzer's seed 58), and 5 streams of 200 then hung until their deadline."""

    def __init__(
        self, code: grpc.StatusCode, details: str, trailing: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
        self.trailing = trailing


def _malformed(method: str, request: Malformed) -> _Refused:
    _errors.log(
        (method, "malformed"),
        logging.WARNING,
        "refused a malformed %s request: %s",
        method,
        request.error,
    )
    return _Refused(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"CORRUPT_MESSAGE: the request is not a valid message of {method}: {request.error}",
    )


async def _abort(context: Any, refused: _Refused) -> None:
    await context.abort(refused.code, refused.details, trailing_metadata=refused.trailing)


async def _failed(method: str, exc: Exception, context: Any) -> None:
    """A servicer let an exception escape: a bug, logged with its traceback once per cause."""
    _errors.log(
        (method, type(exc).__name__),
        logging.ERROR,
        "%s failed: %s: %s",
        method,
        type(exc).__name__,
        exc,
        exc_info=exc,
    )
    await context.abort(
        grpc.StatusCode.INTERNAL,
        f"UNKNOWN_SERVER_ERROR: {method} failed on the server ({type(exc).__name__}); "
        "the error is in the server's log.",
    )


async def _checked(method: str, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
    async for unparsed in requests:
        request = await _parsed(unparsed)
        if isinstance(request, Malformed):
            raise _malformed(method, request)
        session = current_session()
        if session is not None and session.expired(time.time() * 1000):
            raise _Refused(
                grpc.StatusCode.UNAUTHENTICATED,
                f"SASL_AUTHENTICATION_FAILED: the SASL session of this {method} stream "
                "expired (connections.max.reauth.ms): authenticate again",
                REAUTHENTICATE,
            )
        yield request


def _guard_handler(method: str, handler: Any, admission: Admission | None) -> Any:
    """The handler with a lenient deserializer and a behaviour that admits the caller, then
    refuses what did not parse. Only async servicers (this node's own) are wrapped; others
    pass unchanged."""
    if handler is None:
        return None
    if not handler.request_streaming and not handler.response_streaming:
        behaviour = handler.unary_unary
        if not inspect.iscoroutinefunction(behaviour):
            return handler

        async def unary_unary(request: Any, context: Any) -> Any:
            session = None if admission is None else enter(await admission.admit(method, context))
            try:
                request = await _parsed(request)
                if isinstance(request, Malformed):
                    await _abort(context, _malformed(method, request))
                return await behaviour(request, context)
            except (grpc.aio.AbortError, grpc.aio.UsageError):
                raise
            except Exception as exc:
                await _failed(method, exc, context)
            finally:
                if session is not None:
                    leave(session)

        return handler._replace(
            unary_unary=unary_unary, request_deserializer=_lenient(handler.request_deserializer)
        )
    if handler.request_streaming and handler.response_streaming:
        behaviour = handler.stream_stream
        if not inspect.isasyncgenfunction(behaviour):
            return handler  # reads with context.read(): it sees the raw parse

        async def stream_stream(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            # Set for the call's own task (grpc.aio serves each call in a task of its own),
            # which iterates this generator to its end: nothing to reset.
            if admission is not None:
                enter(await admission.admit(method, context))
            try:
                async for response in behaviour(_checked(method, requests, context), context):
                    yield response
            except _Refused as refused:
                await _abort(context, refused)
            except (grpc.aio.AbortError, grpc.aio.UsageError):
                raise
            except Exception as exc:
                await _failed(method, exc, context)

        return handler._replace(
            stream_stream=stream_stream,
            request_deserializer=_lenient(handler.request_deserializer),
        )
    return handler  # unary-stream and stream-unary: none of this node's services has one


class _GuardedGeneric(grpc.GenericRpcHandler):
    def __init__(self, inner: grpc.GenericRpcHandler, admission: Admission | None) -> None:
        self.inner = inner
        self.admission = admission

    def service(self, handler_call_details: Any) -> Any:
        handler = self.inner.service(handler_call_details)
        return _guard_handler(handler_call_details.method, handler, self.admission)


class _GuardedServer:
    """Passes everything to the server, wrapping the handlers registered through it."""

    def __init__(self, server: Any, admission: Admission | None) -> None:
        self._server = server
        self._admission = admission

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self._server.add_generic_rpc_handlers(
            tuple(_GuardedGeneric(h, self._admission) for h in handlers)
        )

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self._server.add_registered_method_handlers(
            service,
            {
                name: _guard_handler(f"/{service}/{name}", h, self._admission)
                for name, h in handlers.items()
            },
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


def guarded(server: Any, admission: Admission | None = None) -> Any:
    """`server` for registering servicers whose requests are to be guarded, each call
    admitted by `admission` first (None: calls carry no Session)."""
    return _GuardedServer(server, admission)


_GRPC_UNEXPECTED = re.compile(
    r"(?:Unexpected \[(\w+)\]|(\w+)) raised (?:in core )?by servicer method \[([^\]]*)\]"
)
# Not a server bug: the client's bytes did not parse, or the client left (its deadline
# passed, it cancelled) before the answer could be sent. Logged without a traceback.
_CLIENT_CAUSED = frozenset({"DecodeError", "ExecuteBatchError"})


class _GrpcLogLimit(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.limit = RateLimitedLog(logging.getLogger("grpc._cython.cygrpc"))

    def filter(self, record: logging.LogRecord) -> bool:
        match = _GRPC_UNEXPECTED.search(record.getMessage())
        if match is None:
            return True
        error = match.group(1) or match.group(2)
        allowed, held_back = self.limit.allow((error, match.group(3)))
        if allowed and held_back:
            record.msg = f"{record.getMessage()} ({held_back} more like it not logged)"
            record.args = ()
        if allowed and error in _CLIENT_CAUSED:
            record.exc_info = None  # the client's bytes, not a server bug: no traceback
            record.exc_text = None
        return allowed


def quiet_grpc_server_log() -> None:
    """Installs the rate limit on grpc's server log (idempotent)."""
    logger = logging.getLogger("grpc._cython.cygrpc")
    if not any(isinstance(f, _GrpcLogLimit) for f in logger.filters):
        logger.addFilter(_GrpcLogLimit())
