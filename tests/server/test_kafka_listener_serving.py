"""The Kafka listener's server (server/kafka/listener.py) on a real loopback socket: bound
and listening when the broker starts, it answers only once told to serve (the node tells it
when the broker serves, as Kafka's acceptors start then); a client that connected early
waits in the backlog and is answered then. Stopping it closes its connections."""

from __future__ import annotations

import asyncio
import io
import struct

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from metadata.image import MetadataImage
from server.kafka.handlers import KafkaApis
from server.kafka.listener import KafkaListener
from server.listeners import Listener
from server.metadata_answer import MetadataSources
from server.request_authorization import RequestAuthorizer
from tests.server.group_paths import no_groups
from tests.server.test_kafka_frames import idle_data_plane


def encode(entity: object) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def api_versions_frame(correlation_id: int) -> bytes:
    header = RequestHeader(
        request_api_key=i16(18),
        request_api_version=i16(3),
        correlation_id=i32(correlation_id),
        client_id="early",
    )
    body = ApiVersionsRequest(client_software_name="early", client_software_version="1")
    data = encode(header) + encode(body)
    return struct.pack(">i", len(data)) + data


def listener() -> KafkaListener:
    sources = MetadataSources("cluster", lambda: -1, RequestAuthorizer(), None, False)
    apis = KafkaApis("KAFKA", MetadataImage, sources, no_groups(), idle_data_plane())
    return KafkaListener(Listener("KAFKA", "127.0.0.1", 0), apis, 1 << 20, lambda *_: None)


def test_a_client_that_connects_before_the_broker_serves_is_answered_once_it_does():
    async def scenario() -> None:
        kafka = listener()
        port = await kafka.bind()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(api_versions_frame(7))
            await writer.drain()
            early = asyncio.ensure_future(reader.readexactly(8))
            await asyncio.sleep(0.3)
            assert not early.done()  # not served before the broker serves
            await kafka.start_serving()
            size, correlation_id = struct.unpack(">ii", await asyncio.wait_for(early, 5))
            assert correlation_id == 7 and size > 4
            writer.close()
        finally:
            await kafka.stop()

    asyncio.run(scenario())


def test_stopping_closes_the_open_connections():
    async def scenario() -> None:
        kafka = listener()
        port = await kafka.bind()
        await kafka.start_serving()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions_frame(1))
        await reader.readexactly(4)
        await kafka.stop()
        assert await asyncio.wait_for(reader.read(), 5) is not None  # no hang: EOF comes
        writer.close()

    asyncio.run(scenario())
