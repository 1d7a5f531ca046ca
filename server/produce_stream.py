"""ProduceStream (proto/strom_api/v1/client.proto): a producer's Produce requests pipelined on
one gRPC stream, as Kafka's producers pipeline them on one connection. The rules are those of
the Kafka listener's connection (server/kafka/connection.py), so both front ends order a
producer's requests alike:
- requests are answered in the order sent, one response each (acks=0 too: an empty one);
- the next request is read only once the one before it has done its ordered part: its
  batches are appended (ReplicaManager.produce's `appended`), or it failed before any append.
  A partition's batches are thus appended in the stream's order, which an idempotent
  producer's sequence numbers rely on, while the acks=all replication waits of several
  requests overlap;
- at most MAX_IN_FLIGHT requests of a stream are unanswered; the stream's next request stays
  unread, held back by HTTP/2 flow control, until one is answered.

Why a stream next to the unary Produce: grpc.aio spends about twice the CPU on a unary call
as on a message of an open stream (bench/produce_consume.py's gRPC ceiling: 425-451 against
195-216 us per 64 KiB message, client and server together). Strom's producer sends every
request here (strom/produce_stream.py); the unary Produce stays for other clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

# Requests of one stream unanswered at once: Kafka's idempotent producers send at most 5
# per connection (max.in.flight.requests.per.connection); more would only hold more request
# memory per stream. The Kafka listener's connections have the same bound.
MAX_IN_FLIGHT = 5

# handle(request, ordered_part_done) -> response
Handle = Callable[[Any, Callable[[], None]], Coroutine[Any, Any, Any]]


async def pipelined(requests: AsyncIterator[Any], handle: Handle) -> AsyncIterator[Any]:
    """The responses to `requests`, in order, each from `handle`, at most MAX_IN_FLIGHT
    handled at once and each started once the one before it has done its ordered part."""
    loop = asyncio.get_running_loop()
    room = asyncio.Semaphore(MAX_IN_FLIGHT)  # taken before a request is read, given back
    handled: asyncio.Queue[asyncio.Task[Any] | None] = asyncio.Queue()  # once it is answered

    async def read() -> None:
        try:
            iterator = aiter(requests)
            while True:
                await room.acquire()
                try:
                    request = await anext(iterator)
                except StopAsyncIteration:
                    return
                ordered: asyncio.Future[None] = loop.create_future()
                done = functools.partial(_settle, ordered)
                task: asyncio.Task[Any] = asyncio.create_task(handle(request, done))
                task.add_done_callback(done)  # it ended before appending anything
                handled.put_nowait(task)
                await ordered
        finally:
            handled.put_nowait(None)

    reader = asyncio.create_task(read())
    try:
        while (task := await handled.get()) is not None:
            if not task.done():
                await asyncio.wait((task, reader), return_when=asyncio.FIRST_COMPLETED)
            if not task.done() and reader.done() and reader.exception() is not None:
                # The reading stopped on an error (a malformed request, an expired session,
                # both aborting the call): the call ends now, whatever is unanswered.
                raise reader.exception()  # type: ignore[misc]
            response = await task
            room.release()
            yield response
        await reader  # what stopped the reading is raised here
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
        while not handled.empty():  # the call ended with requests unanswered
            task = handled.get_nowait()
            if task is not None:
                task.cancel()


def _settle(ordered: asyncio.Future[None], *_: object) -> None:
    if not ordered.done():
        ordered.set_result(None)
