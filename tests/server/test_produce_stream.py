"""server/produce_stream.pipelined: the order and the bound of a ProduceStream's requests
(tests/data_plane/test_client_api.py runs it on a real cluster)."""

from __future__ import annotations

import asyncio
import functools

import pytest

from server.produce_stream import MAX_IN_FLIGHT, pipelined


def in_loop(test):
    """Runs the coroutine test in a loop of its own (the suite has no asyncio plugin)."""

    @functools.wraps(test)
    def run() -> None:
        asyncio.run(test())

    return run


class Requests:
    """An async iterator of requests 0..n-1 that records how many were read."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.read = 0

    def __aiter__(self) -> Requests:
        return self

    async def __anext__(self) -> int:
        if self.read == self.n:
            raise StopAsyncIteration
        self.read += 1
        return self.read - 1


class Handler:
    """Each request appends when told (`append[i]`) and is answered when told (`answer[i]`)."""

    def __init__(self, n: int) -> None:
        self.append = [asyncio.Event() for _ in range(n)]
        self.answer = [asyncio.Event() for _ in range(n)]
        self.started: list[int] = []

    async def __call__(self, request: int, ordered_part_done) -> str:
        self.started.append(request)
        await self.append[request].wait()
        ordered_part_done()
        await self.answer[request].wait()
        return f"answer {request}"


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def collect(stream, into: list[str]) -> None:
    async for response in stream:
        into.append(response)


@in_loop
async def test_the_next_request_is_read_once_the_one_before_appended():
    requests, handler, answers = Requests(3), Handler(3), []
    task = asyncio.create_task(collect(pipelined(requests, handler), answers))
    await turns()
    assert handler.started == [0] and requests.read == 1
    handler.append[0].set()
    await turns()
    assert handler.started == [0, 1]  # 0 still waits for its answer: their waits overlap
    handler.append[1].set()
    handler.append[2].set()
    await turns()
    assert handler.started == [0, 1, 2]
    for i in (2, 1, 0):  # answered last first: still sent in the requests' order
        handler.answer[i].set()
    await task
    assert answers == ["answer 0", "answer 1", "answer 2"]


@in_loop
async def test_no_more_than_max_in_flight_requests_are_read_unanswered():
    n = MAX_IN_FLIGHT + 3
    requests, handler, answers = Requests(n), Handler(n), []
    for event in handler.append:
        event.set()
    task = asyncio.create_task(collect(pipelined(requests, handler), answers))
    await turns(20)
    assert requests.read == MAX_IN_FLIGHT
    handler.answer[0].set()
    await turns(20)
    assert requests.read == MAX_IN_FLIGHT + 1 and answers == ["answer 0"]
    for event in handler.answer:
        event.set()
    await task
    assert answers == [f"answer {i}" for i in range(n)]


@in_loop
async def test_a_request_that_fails_before_appending_ends_the_stream_with_its_error():
    requests, answers, started = Requests(2), [], []

    async def handle(request: int, ordered_part_done) -> str:
        started.append(request)
        if request == 0:
            raise RuntimeError("a bug")
        ordered_part_done()
        return "fine"

    with pytest.raises(RuntimeError, match="a bug"):
        await collect(pipelined(requests, handle), answers)
    assert answers == [] and started[0] == 0


@in_loop
async def test_a_cancelled_stream_cancels_its_unanswered_requests():
    requests, handler, answers = Requests(2), Handler(2), []
    for event in handler.append:
        event.set()
    task = asyncio.create_task(collect(pipelined(requests, handler), answers))
    await turns(20)
    assert handler.started == [0, 1]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await turns()
    assert answers == []


@in_loop
async def test_a_request_that_cannot_be_read_ends_the_stream_at_once():
    """A malformed request or an expired session aborts the call while it is read (rpc_guard):
    the stream ends then, not once the requests before it are answered."""
    handler = Handler(1)
    handler.append[0].set()  # appended, waiting for its acks=all answer

    async def requests():
        yield 0
        await asyncio.sleep(0)
        raise PermissionError("the session expired")

    with pytest.raises(PermissionError):
        async with asyncio.timeout(5):
            await collect(pipelined(requests(), handler), [])
