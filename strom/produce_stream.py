"""The producer's side of ProduceStream (server/produce_stream.py): one stream per broker
address, opened at its first request, on which requests are written in the order they are
given and answered in that order, as on a Kafka producer's connection.

A stream that fails (the broker gone, a reset, a refused session) fails every request still
unanswered on it, with the stream's gRPC error, and the next request opens a new one. A
request left unanswered for its timeout closes its stream the same way, as Kafka's
NetworkClient closes a connection whose request timed out: an answer that might still come
could no longer be matched to the requests after it.

A server that answers ProduceStream UNIMPLEMENTED (a Strom broker older than it, or another
server of ClientService) is sent unary Produce calls instead, as Kafka's clients fall back to
the API versions a broker has.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

import grpc
import grpc.aio

from strom.cluster import Cluster
from strom.errors import StromError
from strom_api.error_codes import ErrorCode
from strom_api.sasl_client import stream_failed, stream_metadata
from strom_api.v1 import client_pb2_grpc


class _Stream:
    """One ProduceStream: a writer task sends the queued requests in order, a reader task
    hands each response to the oldest unanswered request."""

    def __init__(self, address: str, channel: grpc.aio.Channel) -> None:
        self.address = address
        self.channel = channel
        self.broken = False
        self.answered = False  # whether any response came on it
        self._call: Any = None
        self._opened = asyncio.Event()
        self._unanswered: deque[asyncio.Future[Any]] = deque()
        self._outbox: asyncio.Queue[Any] = asyncio.Queue()
        self._writer = asyncio.create_task(self._write())
        self._reader = asyncio.create_task(self._read())

    def send(self, request: Any) -> asyncio.Future[Any]:
        """Queues `request` (before any await: callers' order is the stream's order)."""
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._unanswered.append(answer)
        self._outbox.put_nowait(request)
        return answer

    async def _write(self) -> None:
        try:
            stub = client_pb2_grpc.ClientServiceStub(self.channel)  # type: ignore[no-untyped-call]
            self._call = stub.ProduceStream(metadata=await stream_metadata(self.channel))
            self._opened.set()
            while True:
                await self._call.write(await self._outbox.get())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the reader usually sees the call's status first
            self.fail(await self._ended(exc))

    async def _ended(self, failed_write: Exception) -> Exception:
        """Why the stream ended when a write failed: the call's own status, if it has one
        within a second. A failed write is often the echo of the call's end: a server
        without ProduceStream answers UNIMPLEMENTED, and a write racing that answer fails
        INTERNAL ("Failed execute_batch"); taken as a network error, the request was sent
        on new streams again and again instead of unary (a CI run under load)."""
        call = self._call
        if call is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    code = await call.code()
                if code is not None and code != grpc.StatusCode.OK:
                    return grpc.aio.AioRpcError(
                        code,
                        await call.initial_metadata(),
                        await call.trailing_metadata(),
                        await call.details(),
                    )
        return _lost(self.address, failed_write)

    async def _read(self) -> None:
        try:
            await self._opened.wait()
            while True:
                response = await self._call.read()
                if response is grpc.aio.EOF:
                    raise ConnectionError("the broker ended the stream")
                self.answered = True
                if self._unanswered:
                    answer = self._unanswered.popleft()
                    if not answer.done():  # its caller may have stopped waiting
                        answer.set_result(response)
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as exc:
            self.fail(exc)
        except Exception as exc:
            self.fail(_lost(self.address, exc))

    def fail(self, error: Exception) -> None:
        """Ends the stream: every unanswered request fails with `error`."""
        if not self.broken:
            self.broken = True
            if self._call is not None:
                self._call.cancel()
            stream_failed(self.channel, error)
            current = asyncio.current_task()
            for task in (self._writer, self._reader):
                if task is not current:
                    task.cancel()
        while self._unanswered:
            answer = self._unanswered.popleft()
            if not answer.done():
                answer.set_exception(error)

    async def closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(self._writer, self._reader, return_exceptions=True)


def _lost(address: str, exc: BaseException) -> StromError:
    why = str(exc) or type(exc).__name__
    return StromError(
        ErrorCode.NETWORK_EXCEPTION, f"the produce stream to {address} failed: {why}", True
    )


class ProduceStreams:
    """The producer's streams, by broker address."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._streams: dict[str, _Stream] = {}
        self._unary: set[str] = set()  # addresses that serve no ProduceStream

    async def produce(self, leader: int, request: Any, timeout_s: float) -> Any:
        """The leader's answer to `request`. Raises grpc.aio.AioRpcError or StromError
        (NETWORK_EXCEPTION, retriable) when its stream failed or it went unanswered for
        `timeout_s`."""
        stub = self.cluster.stub(leader)  # BROKER_NOT_AVAILABLE when the metadata lacks it
        address = self.cluster.brokers[leader]
        if address in self._unary:
            return await stub.Produce(request, timeout=timeout_s)
        stream = self._streams.get(address)
        if stream is None or stream.broken:
            stream = self._streams[address] = _Stream(address, self.cluster.channel(leader))
        answer = stream.send(request)
        try:
            async with asyncio.timeout(timeout_s):
                return await answer
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                # A server without ProduceStream (a Strom broker older than it): the request
                # was not taken, so it goes unary, as every later one to that address.
                self._unary.add(address)
                return await stub.Produce(request, timeout=timeout_s)
            if exc.code() == grpc.StatusCode.INTERNAL and not stream.answered:
                # That UNIMPLEMENTED can be lost: a write racing it ends the call INTERNAL in
                # the client's own core ("Internal error from Core"), and under load every
                # new stream lost it again (a CI run's test_producer_unknown_fate). A stream
                # that never answered is no evidence the broker streams: this request goes
                # unary (a retry, as after any network error), later ones try streams again.
                return await stub.Produce(request, timeout=timeout_s)
            raise
        except TimeoutError:
            error = StromError(
                ErrorCode.NETWORK_EXCEPTION,
                f"broker {leader} did not answer a Produce request within {timeout_s:.0f} s; "
                "its stream is closed",
                True,
            )
            stream.fail(error)
            raise error from None

    async def close(self) -> None:
        streams = list(self._streams.values())
        self._streams.clear()
        for stream in streams:
            stream.fail(StromError(ErrorCode.NETWORK_EXCEPTION, "the producer closed", True))
        await asyncio.gather(*(s.closed() for s in streams))
