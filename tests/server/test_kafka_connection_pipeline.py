"""A Kafka connection's requests (server/kafka/connection.py) over a real loopback socket,
with a dispatcher whose handlers the test holds: answers always come in the order sent; a
request that says its ordered part is done (a Produce once appended) lets the next one
start while it waits; one that does not holds the connection; at most MAX_IN_FLIGHT are
started and unanswered at once."""

from __future__ import annotations

import asyncio
import datetime
import struct
import threading
import time
import typing

import uvloop
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from server.kafka import connection
from server.kafka.api_versions import api_versions_response
from server.kafka.frames import Request
from server.kafka.ordering import ORDERED_PART_DONE
from server.kafka.sasl_api import ConnectionAuthentication
from strom_api.acls import ANONYMOUS
from tests.kafka_listener.kafka_cluster import request_frame


class HeldApis:
    """Each Produce (correlation id N) is started, says its ordered part is done when
    `signal` holds, and is answered once the test releases N; ApiVersions at once."""

    listener_name = "KAFKA"

    def __init__(self, signal: bool) -> None:
        self.signal = signal
        self.started: list[int] = []
        self.release: dict[int, asyncio.Event] = {}

    async def handle(self, request: Request) -> object:
        self.started.append(request.correlation_id)
        if request.api_key == 18:
            return api_versions_response(request.api_version)
        if self.signal:
            done = ORDERED_PART_DONE.get()
            assert done is not None
            done()
        await self.release.setdefault(request.correlation_id, asyncio.Event()).wait()
        return load_response_schema(0, 9)(responses=(), throttle_time=datetime.timedelta(0))

    def let_go(self, correlation_id: int) -> None:
        self.release.setdefault(correlation_id, asyncio.Event()).set()


def produce(correlation_id: int) -> bytes:
    body = load_request_schema(0, 9)(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5), topic_data=()
    )
    return request_frame(body, correlation_id)


def large_produce(correlation_id: int) -> bytes:
    """A Produce frame of THREAD_FRAME_BYTES (its records are not read by these tests)."""
    request_type = load_request_schema(0, 9)
    topic_type = typing.get_args(typing.get_type_hints(request_type)["topic_data"])[0]
    partition_type = typing.get_args(typing.get_type_hints(topic_type)["partition_data"])[0]
    data = partition_type(index=i32(0), records=b"x" * connection.THREAD_FRAME_BYTES)
    body = request_type(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(topic_type(name="t", partition_data=(data,)),),
    )
    return request_frame(body, correlation_id)


def api_versions(correlation_id: int) -> bytes:
    body = load_request_schema(18, 3)(client_software_name="t", client_software_version="1")
    return request_frame(body, correlation_id)


async def _session(
    apis: HeldApis, frames: list[bytes], script, max_bytes: int = 1 << 20
) -> list[int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        auth = ConnectionAuthentication(ANONYMOUS, None, "127.0.0.1")
        await connection.serve_connection(reader, writer, apis, max_bytes, lambda *_: None, auth)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"".join(frames))  # all before any answer, as a pipelining client sends
    await writer.drain()
    answered: list[int] = []

    async def read_answers() -> None:
        while True:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            frame = await reader.readexactly(size)
            (correlation_id,) = struct.unpack_from(">i", frame)
            answered.append(correlation_id)

    reading = asyncio.create_task(read_answers())
    try:
        await script(answered)
    finally:
        reading.cancel()
        writer.close()
        server.close()
    return answered


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)


def test_a_produce_that_has_appended_lets_the_next_request_start_and_answers_stay_in_order():
    apis = HeldApis(signal=True)

    async def script(answered: list[int]) -> None:
        await settle()
        assert apis.started == [1, 2, 3]  # 2 and 3 started while 1 waits
        assert answered == []  # 3 (ApiVersions) is done, but waits for 1 and 2
        apis.let_go(2)
        await settle()
        assert answered == []  # 2 is done, but 1 is not answered yet
        apis.let_go(1)
        await settle()
        assert answered == [1, 2, 3]

    asyncio.run(_session(apis, [produce(1), produce(2), api_versions(3)], script))


def test_a_request_that_does_not_say_its_ordered_part_is_done_holds_the_connection():
    apis = HeldApis(signal=False)

    async def script(answered: list[int]) -> None:
        await settle()
        assert apis.started == [1]
        apis.let_go(1)
        await settle()
        assert apis.started == [1, 2]
        assert answered == [1]
        apis.let_go(2)
        await settle()
        assert apis.started == [1, 2, 3]
        assert answered == [1, 2, 3]

    asyncio.run(_session(apis, [produce(1), produce(2), api_versions(3)], script))


def test_at_most_max_in_flight_requests_are_started_and_unanswered():
    apis = HeldApis(signal=True)
    count = connection.MAX_IN_FLIGHT + 2

    async def script(answered: list[int]) -> None:
        await settle()
        assert apis.started == list(range(1, connection.MAX_IN_FLIGHT + 1))
        apis.let_go(1)
        await settle()
        assert answered == [1]
        assert apis.started == list(range(1, connection.MAX_IN_FLIGHT + 2))
        for n in range(2, count + 1):
            apis.let_go(n)
        await settle()
        assert answered == list(range(1, count + 1))

    asyncio.run(_session(apis, [produce(n) for n in range(1, count + 1)], script))


def test_a_large_frame_is_decoded_and_its_response_encoded_off_the_event_loop(monkeypatch):
    """kio's decoding costs per item: a frame of socket.request.max.bytes naming millions
    of partitions would hold the loop for seconds. From THREAD_FRAME_BYTES on, the frame is
    decoded and its response encoded on a worker thread; a small one stays on the loop."""
    where: dict[str, list[tuple[int, int]]] = {"parse": [], "encode": []}
    parse, encode = connection.parse_request, connection.response_frame

    def parse_noting(frame: bytes) -> object:
        where["parse"].append((len(frame), threading.get_ident()))
        return parse(frame)

    def encode_noting(correlation_id: int, response: object) -> bytes:
        where["encode"].append((correlation_id, threading.get_ident()))
        return encode(correlation_id, response)

    monkeypatch.setattr(connection, "parse_request", parse_noting)
    monkeypatch.setattr(connection, "response_frame", encode_noting)
    apis = HeldApis(signal=True)
    loop_thread: list[int] = []

    async def script(answered: list[int]) -> None:
        loop_thread.append(threading.get_ident())
        apis.let_go(1)
        for _ in range(200):
            await asyncio.sleep(0.01)
            if answered == [1, 2]:
                break
        assert answered == [1, 2]

    frames = [large_produce(1), api_versions(2)]
    asyncio.run(_session(apis, frames, script, max_bytes=4 << 20))
    [loop] = loop_thread
    (big, big_thread), (small, small_thread) = where["parse"]
    assert big >= connection.THREAD_FRAME_BYTES > small
    assert big_thread != loop and small_thread == loop
    assert [(c, t == loop) for c, t in where["encode"]] == [(1, False), (2, True)]


class LongStringApis(HeldApis):
    """Produce (id 1) is answered with a CreateTopics v3 response whose `field` holds 40,000
    bytes, over a legacy string's 32,767."""

    def __init__(self, field: str) -> None:
        super().__init__(signal=False)
        self.field = field

    async def handle(self, request: Request) -> object:
        if request.api_key == 18:
            return await super().handle(request)
        response_type = load_response_schema(19, 3)
        topic_type = typing.get_args(typing.get_type_hints(response_type)["topics"])[0]
        fields = {"name": "t", "error_message": "m", self.field: "n" * 40_000}
        topic = topic_type(error_code=ErrorCode.invalid_topic_exception, **fields)
        return response_type(throttle_time=datetime.timedelta(0), topics=(topic,))


def test_an_error_message_too_long_to_encode_is_cut_to_fit():
    """A message quoting a 32,767-byte topic name could not be encoded (the probe's
    CreateTopics v3, DescribeConfigs v1): the answer comes, its message cut."""
    answered = asyncio.run(
        _session(LongStringApis("error_message"), [produce(1), api_versions(2)], _settled)
    )
    assert answered == [1, 2]


def test_a_response_that_cannot_be_encoded_closes_the_connection_unanswered():
    """Unanswered on an open connection, the request left the next one's answer in its place
    (the client reads answers by order). A name too long is not cut: the connection ends."""
    answered = asyncio.run(
        _session(LongStringApis("name"), [produce(1), api_versions(2)], _settled)
    )
    assert answered == [], answered  # not 2 in 1's place


async def _settled(answered: list[int]) -> None:
    await settle()


class ManyTopicsApis(HeldApis):
    """Produce (id 1) is answered with a CreateTopics v3 response of `count` topics."""

    def __init__(self, count: int) -> None:
        super().__init__(signal=False)
        self.count = count

    async def handle(self, request: Request) -> object:
        if request.api_key == 18:
            return await super().handle(request)
        response_type = load_response_schema(19, 3)
        topic_type = typing.get_args(typing.get_type_hints(response_type)["topics"])[0]
        topic = topic_type(name="t", error_code=ErrorCode.none, error_message=None)
        return response_type(throttle_time=datetime.timedelta(0), topics=(topic,) * self.count)


def test_a_response_of_many_items_is_encoded_off_the_event_loop_whatever_the_request_size(
    monkeypatch,
):
    """A Metadata request of 900 KB naming 112,500 topics (the Kafka-protocol fuzzer) was
    answered by an encoding that held the loop 1.6 s: the request was under
    THREAD_FRAME_BYTES. From THREAD_RESPONSE_ITEMS items on, a response goes to a thread."""
    where: list[tuple[int, int]] = []
    encode = connection.response_frame

    def encode_noting(correlation_id: int, response: object) -> bytes:
        where.append((correlation_id, threading.get_ident()))
        return encode(correlation_id, response)

    monkeypatch.setattr(connection, "response_frame", encode_noting)
    loop_thread: list[int] = []

    async def script(answered: list[int]) -> None:
        loop_thread.append(threading.get_ident())
        await settle()

    for count, on_loop in ((connection.THREAD_RESPONSE_ITEMS, False), (10, True)):
        where.clear()
        loop_thread.clear()
        answered = asyncio.run(_session(ManyTopicsApis(count), [produce(1)], script))
        assert answered == [1]
        [(_, thread)] = where
        assert (thread == loop_thread[0]) is on_loop, count


def test_an_answer_to_a_client_gone_meanwhile_is_dropped_not_raised():
    """uvloop's transport raises RuntimeError on a write after it closed: a SaslHandshake
    answered after its client left logged a traceback (the Kafka-protocol fuzzer, seed 6
    case 1966). The answer has nowhere to go and is dropped."""

    async def scenario() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()
        await writer.wait_closed()
        answers = connection._Answers(writer, "KAFKA", lambda *args: None)
        request = Request(18, 3, 7, "c", None)
        answers.write(request, api_versions_response(3), time.perf_counter())
        server.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # as the nodes run
        runner.run(scenario())
