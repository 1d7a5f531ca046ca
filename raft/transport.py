"""The gRPC transport of Raft messages (grpc.aio): the only module of raft/ that imports grpc.

Each node opens one bidirectional `RaftService.Exchange` stream to every voter it knows
and keeps it open, reopening after a failure with a capped backoff. Its first message is a
hello (a RaftMessage with no body) that names it, so the receiver can answer nodes whose
addresses it does not know (observers) on the stream they opened. A message goes out on
our own stream to its destination if we have one, else on the destination's stream to us.

Delivery is best effort, as Raft expects: each route has a bounded queue, and a message for
an unreachable or backed-up peer is dropped (counted in `dropped`), never blocking the core.
A malformed message (raft/wire_checks.py) is refused here, at the edge: counted in
`refused`, reported to `on_refused` (which logs it, rate-limited), never delivered; a hello
that names no valid node id, or this node, ends its stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import grpc
import grpc.aio

from raft.limits import MAX_NODE_ID
from raft.messages import Message
from raft.wire import from_proto, to_proto
from raft.wire_checks import MalformedRaftMessageError
from strom_api.sasl_client import stream_failed, stream_metadata
from strom_api.tls import handshake_failure
from strom_api.v1 import raft_pb2, raft_pb2_grpc

log = logging.getLogger("strom.raft.transport")

# Who may open a stream to this node: the node's check of the caller (its listener's
# authentication and authorizer, which raft/ knows nothing of), given the call's context;
# None admits, a sentence refuses (PERMISSION_DENIED with it, before any message is read).
AdmitStream = Callable[[Any], Awaitable[str | None]]

QUEUE_LIMIT = 4096
_BACKOFF_MS = (50, 100, 200, 500, 1000)


class _Route:
    """Messages waiting to go to one peer over one stream."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[raft_pb2.RaftMessage] = asyncio.Queue(QUEUE_LIMIT)


def _drain(queue: asyncio.Queue[raft_pb2.RaftMessage]) -> None:
    while not queue.empty():
        queue.get_nowait()


class GrpcTransport(raft_pb2_grpc.RaftServiceServicer):
    def __init__(
        self,
        node_id: int,
        peers: Mapping[int, str],
        deliver: Callable[[Message], None],
        on_refused: Callable[[int, str], None] | None = None,
        open_channel: Callable[[str], Any] | None = None,
        tls: bool = False,
        admit_stream: AdmitStream | None = None,
    ) -> None:
        """`open_channel(address)` makes the channel to a voter (TLS when the controller
        listener is SSL, `tls`); plaintext by default. `admit_stream`: see AdmitStream
        (None: every caller is admitted)."""
        self.admit_stream = admit_stream
        self.node_id = node_id
        self.tls = tls
        self._refusals: dict[int, str] = {}  # peer -> the TLS refusal last logged
        self.open_channel = open_channel or grpc.aio.insecure_channel
        self.peers = dict(peers)  # voter id -> "host:port", ourselves excluded
        self.peers.pop(node_id, None)
        self.deliver = deliver
        self.on_refused = on_refused
        self._outbound = {peer: _Route() for peer in self.peers}
        self._inbound: dict[int, _Route] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        self.sent = self.received = self.dropped = self.refused = 0

    def start(self) -> None:
        for peer, address in self.peers.items():
            self._tasks.append(asyncio.create_task(self._keep_stream(peer, address)))

    async def close(self) -> None:
        self._closed = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    def send(self, message: Message) -> None:
        route = self._outbound.get(message.dst) or self._inbound.get(message.dst)
        if route is None:
            self.dropped += 1  # nobody by that id is connected: Raft will retry
            return
        try:
            route.queue.put_nowait(to_proto(message))
            self.sent += 1
        except asyncio.QueueFull:
            self.dropped += 1

    def _receive(self, pb: raft_pb2.RaftMessage, stream_peer: int) -> None:
        if pb.WhichOneof("body") is None:
            return  # a hello
        if pb.dst != self.node_id:
            return  # misrouted: not ours to act on
        if pb.src != stream_peer:
            # Each stream carries one peer's messages (the one it was opened to, or the
            # one its hello named): another sender's name on it is a forgery.
            self._refuse(pb.src, f"it came on the stream of node {stream_peer}")
            return
        try:
            message = from_proto(pb)
        except MalformedRaftMessageError as exc:
            self._refuse(pb.src, str(exc))
            return
        self.received += 1
        self.deliver(message)

    def _refuse(self, src: int, reason: str) -> None:
        self.refused += 1
        if self.on_refused is not None:
            self.on_refused(src, reason)

    # --- our streams to the voters -------------------------------------------------------

    async def _keep_stream(self, peer: int, address: str) -> None:
        attempt = 0
        route = self._outbound[peer]
        # The flag as well as the cancel: a grpc.aio call answered in the turn the task is
        # cancelled returns its answer and drops the cancel, and close() would wait for ever.
        while not self._closed:
            channel = None
            try:
                async with self.open_channel(address) as channel:
                    stub = raft_pb2_grpc.RaftServiceStub(channel)  # type: ignore[no-untyped-call]
                    call = stub.Exchange(metadata=await stream_metadata(channel))
                    await call.write(raft_pb2.RaftMessage(src=self.node_id, dst=peer))
                    attempt = 0
                    self._refusals.pop(peer, None)
                    await self._pump(peer, route, call.read, call.write)
            except grpc.aio.AioRpcError as exc:
                stream_failed(channel, exc)
                self._refused_handshake(peer, address, exc)
            except (grpc.aio.UsageError, ConnectionError):
                pass
            # What queued for a peer while it was unreachable is stale by the time it is back
            # (old votes, old fetches); Raft resends what still matters.
            _drain(route.queue)
            delay = _BACKOFF_MS[min(attempt, len(_BACKOFF_MS) - 1)]
            attempt += 1
            await asyncio.sleep(delay / 1000)

    def _refused_handshake(self, peer: int, address: str, exc: grpc.aio.AioRpcError) -> None:
        """A TLS handshake the peer refused (or that we refused) is an operator's problem,
        not a network blip: logged at ERROR once per peer and cause, as Kafka logs a
        failed authentication; other failures stay quiet (Raft retries)."""
        refused = handshake_failure(exc.details(), self.tls) if self.tls else None
        if refused is not None and self._refusals.get(peer) != refused:
            self._refusals[peer] = refused
            log.error(
                "Connection to node %d (%s) failed authentication due to: %s",
                peer,
                address,
                refused,
            )

    async def _pump(self, peer: int, route: _Route, read: Any, write: Any) -> None:
        """Writes the route's queue to the stream while reading what comes back; returns
        when either side ends."""

        async def writer() -> None:
            while True:
                await write(await route.queue.get())

        writing = asyncio.create_task(writer())
        try:
            while True:
                pb = await read()
                if pb is grpc.aio.EOF:
                    return
                self._receive(pb, peer)
        finally:
            writing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writing

    # --- streams others opened to us (the servicer) --------------------------------------

    async def Exchange(self, request_iterator: Any, context: Any) -> None:  # noqa: N802
        if self.admit_stream is not None:
            refusal = await self.admit_stream(context)
            if refusal is not None:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)
        hello = await context.read()
        if hello is grpc.aio.EOF:
            return
        peer = hello.src
        if not 0 <= peer <= MAX_NODE_ID or peer == self.node_id:
            self._refuse(peer, "its stream's hello names no other node")
            return
        route = _Route()
        self._inbound[peer] = route
        self._receive(hello, peer)
        try:
            await self._pump(peer, route, context.read, context.write)
        finally:
            if self._inbound.get(peer) is route:
                del self._inbound[peer]


# gRPC sets SO_REUSEPORT by default: a second process (a second `make run`) could then bind
# a port a node is serving and take part of its connections. Every node listener binds alone.
EXCLUSIVE_PORT = ("grpc.so_reuseport", 0)


class BindError(RuntimeError):
    """A listener's address could not be bound (in use, or not this machine's)."""


def bind(
    server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None = None
) -> int:
    """Binds `server` to `address` (TLS with `credentials`, else plaintext) and returns the
    port, or raises BindError with Kafka's sentence ("Socket server failed to bind to ...")."""
    try:
        if credentials is not None:
            return server.add_secure_port(address, credentials)
        return server.add_insecure_port(address)
    except RuntimeError as exc:
        raise BindError(
            f"Socket server failed to bind to {address}: address already in use or not "
            f"available ({exc})"
        ) from None


class RaftServer:
    """The node's gRPC server carrying RaftService (the node process adds its own services
    to `server` before starting it)."""

    def __init__(
        self,
        transport: GrpcTransport,
        address: str,
        credentials: grpc.ServerCredentials | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        """`options`: the node's further gRPC server options (its message size limits)."""
        self.server = grpc.aio.server(options=[EXCLUSIVE_PORT, *options])
        # protoc's generated registration function carries no annotations.
        raft_pb2_grpc.add_RaftServiceServicer_to_server(transport, self.server)  # type: ignore[no-untyped-call]
        self.port = bind(self.server, address, credentials)

    async def start(self) -> None:
        await self.server.start()

    async def stop(self, grace_s: float) -> None:
        await self.server.stop(grace_s)
