"""server/rpc_guard.py with an admission (server/request_session.py): every call of a
guarded server is admitted before the servicer runs and served with its Session; a caller
the admission refuses never reaches the servicer. Real gRPC on loopback."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import grpc.aio
import pytest

from server.admission import AnonymousAdmission
from server.request_session import Session, current_session
from server.rpc_guard import guarded
from strom_api.v1 import client_pb2, client_pb2_grpc


class EchoSession(client_pb2_grpc.ClientServiceServicer):
    """Answers with the Session it was served with."""

    def __init__(self) -> None:
        self.calls = 0

    async def Metadata(self, request: Any, context: Any) -> Any:
        self.calls += 1
        session = current_session()
        assert session is not None
        return client_pb2.MetadataResponse(cluster_id=f"{session.principal}@{session.host}")

    async def FetchStream(self, requests: Any, context: Any) -> Any:
        async for _ in requests:
            self.calls += 1
            session = current_session()
            assert session is not None
            yield client_pb2.FetchResponse(
                topics=[client_pb2.FetchResponse.Topic(name=session.listener)]
            )


class RefuseAll:
    async def admit(self, method: str, context: Any) -> Session:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"nobody may call {method}")
        raise AssertionError("abort returns only by raising")


async def _serve(admission: Any, servicer: Any) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    client_pb2_grpc.add_ClientServiceServicer_to_server(servicer, guarded(server, admission))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def test_each_call_is_served_with_the_session_its_admission_gave():
    async def run() -> None:
        servicer = EchoSession()
        server, port = await _serve(AnonymousAdmission("CLIENT"), servicer)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = client_pb2_grpc.ClientServiceStub(channel)
                answer = await stub.Metadata(client_pb2.MetadataRequest())
                assert answer.cluster_id == "User:ANONYMOUS@127.0.0.1"
                stream = stub.FetchStream()
                await stream.write(client_pb2.FetchRequest())
                response = await stream.read()
                assert response.topics[0].name == "CLIENT"
                await stream.done_writing()
        finally:
            await server.stop(0)
        assert current_session() is None  # nothing leaks out of the calls

    asyncio.run(run())


def test_a_caller_the_admission_refuses_never_reaches_the_servicer():
    async def run() -> None:
        servicer = EchoSession()
        server, port = await _serve(RefuseAll(), servicer)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = client_pb2_grpc.ClientServiceStub(channel)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.Metadata(client_pb2.MetadataRequest())
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert "Metadata" in (refused.value.details() or "")
                # A malformed request is refused by the admission first: an unauthenticated
                # caller learns nothing about what the node parses.
                bad = channel.unary_unary("/strom_api.v1.ClientService/Metadata")
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await bad(b"\xff\xff\xff")
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
                # The stream is refused when it opens, before any request: a write could
                # race the refusal and fail with gRPC's INTERNAL instead of its status.
                stream = stub.FetchStream()
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await asyncio.wait_for(stream.read(), timeout=10)
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        finally:
            await server.stop(0)
        assert servicer.calls == 0

    asyncio.run(run())
