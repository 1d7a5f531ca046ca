"""server/rpc_guard.py: the rate limit on error logs (units, a fake clock); the guarded
server end to end is in tests/data_plane/test_hostile_requests.py."""

from __future__ import annotations

import logging

from raft.rate_limited_log import RateLimitedLog
from server.rpc_guard import quiet_grpc_server_log


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_cause_per_interval_then_a_count_of_what_was_held_back(caplog):
    clock = Clock()
    limit = RateLimitedLog(logging.getLogger("test.limit"), interval_s=60, clock=clock)
    with caplog.at_level(logging.INFO, logger="test.limit"):
        for _ in range(1000):
            limit.log(("Produce", "malformed"), logging.WARNING, "bad produce")
        limit.log(("Fetch", "malformed"), logging.WARNING, "bad fetch")
        clock.now = 61
        limit.log(("Produce", "malformed"), logging.WARNING, "bad produce")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "bad produce",
        "bad fetch",
        "bad produce (999 more like it in the last 60 s not logged)",
    ]


def test_causes_remembered_are_bounded_and_a_flood_of_new_ones_shares_a_line():
    limit = RateLimitedLog(logging.getLogger("test.limit"), clock=Clock(), max_causes=10)
    allowed = sum(limit.allow(("method", i))[0] for i in range(5000))
    assert allowed == 11 and len(limit._last) <= 11


def test_grpcs_own_servicer_errors_are_rate_limited_without_a_traceback_for_bad_bytes(caplog):
    quiet_grpc_server_log()
    quiet_grpc_server_log()  # idempotent
    grpc_log = logging.getLogger("grpc._cython.cygrpc")
    assert len(grpc_log.filters) == 1
    try:
        raise ValueError("Wire format was corrupt")
    except ValueError as exc:
        error = exc
    with caplog.at_level(logging.ERROR, logger="grpc._cython.cygrpc"):
        for _ in range(50):
            grpc_log.error(
                "Unexpected [DecodeError] raised by servicer method [%s]",
                "/strom_api.v1.RaftService/Talk",
                exc_info=error,
            )
        grpc_log.error("Unexpected [KeyError] raised by servicer method [/x.Y/Z]", exc_info=error)
        for _ in range(5):  # the client left before the answer was sent
            grpc_log.error(
                "ExecuteBatchError raised in core by servicer method [/x.Y/Slow]", exc_info=error
            )
    assert len(caplog.records) == 3
    assert caplog.records[2].exc_info is None
    assert caplog.records[0].exc_info is None  # the client's bytes: no traceback
    assert caplog.records[1].exc_info is not None  # a server bug: one traceback


def test_strings_past_kafkas_int16_bound_are_found_at_any_depth_and_in_maps():
    import pytest

    from server.rpc_guard import MAX_STRING_BYTES, StringTooLong, check_strings
    from strom_api.v1 import client_pb2, controller_pb2

    fine = controller_pb2.CreateTopicsRequest(
        topics=[controller_pb2.CreatableTopic(name="t" * 249, configs={"k": "v" * 8000})]
    )
    check_strings(fine)
    nested = client_pb2.OffsetCommitRequest(
        topics=[
            client_pb2.OffsetCommitRequest.Topic(
                name="t",
                partitions=[
                    client_pb2.OffsetCommitRequest.Partition(
                        committed_metadata="é" * (MAX_STRING_BYTES // 2 + 1)  # 2 bytes each
                    )
                ],
            )
        ]
    )
    with pytest.raises(StringTooLong):
        check_strings(nested)
    in_a_map = controller_pb2.CreateTopicsRequest(
        topics=[controller_pb2.CreatableTopic(name="t", configs={"k": "v" * 40_000})]
    )
    with pytest.raises(StringTooLong):
        check_strings(in_a_map)


def test_a_long_string_among_many_leaf_items_is_found_and_short_ones_pass():
    """Items holding only strings are measured a field at a time (_check_items): one
    partition's metadata past the bound among 10,000 is still found, and metadata of
    MAX_STRING_BYTES // 4 characters or more that encodes within the bound still passes."""
    import pytest

    from server.rpc_guard import MAX_STRING_BYTES, StringTooLong, check_strings
    from strom_api.v1 import client_pb2

    def commit(metadata: str, at: int) -> object:
        P = client_pb2.OffsetCommitRequest.Partition
        partitions = [P(partition=p) for p in range(10_000)]
        partitions[at] = P(partition=at, committed_metadata=metadata)
        return client_pb2.OffsetCommitRequest(
            topics=[client_pb2.OffsetCommitRequest.Topic(name="t", partitions=partitions)]
        )

    check_strings(commit("m" * MAX_STRING_BYTES, 9_999))  # ASCII: exactly the bound
    check_strings(commit("é" * (MAX_STRING_BYTES // 2), 5_000))
    with pytest.raises(StringTooLong):
        check_strings(commit("m" * (MAX_STRING_BYTES + 1), 9_999))
    with pytest.raises(StringTooLong):
        check_strings(commit("é" * (MAX_STRING_BYTES // 2 + 1), 0))


def test_a_large_request_is_parsed_and_checked_off_the_event_loop():
    """From THREAD_REQUEST_BYTES on, grpc's deserializer only keeps the bytes; the guarded
    handler parses and checks them on a worker thread, so a request naming millions of
    items does not hold the loop. A smaller one is parsed in the deserializer, as before."""
    import asyncio
    import threading
    from types import SimpleNamespace

    from server.rpc_guard import THREAD_REQUEST_BYTES, Malformed, _guard_handler
    from strom_api.v1 import client_pb2

    threads: list[int] = []

    def deserialize(data: bytes) -> object:
        threads.append(threading.get_ident())
        return client_pb2.ProduceRequest.FromString(data)

    seen: list[object] = []

    async def behaviour(request: object, context: object) -> str:
        seen.append(request)
        return "answered"

    handler = SimpleNamespace(
        request_streaming=False,
        response_streaming=False,
        unary_unary=behaviour,
        request_deserializer=deserialize,
        _replace=lambda **changes: SimpleNamespace(**changes),
    )
    guarded = _guard_handler("/strom_api.v1.ClientService/Produce", handler, None)

    def produce(size: int) -> bytes:
        request = client_pb2.ProduceRequest(acks=-1)
        request.topics.add(name="t").partitions.add(partition=0, records=b"x" * size)
        return request.SerializeToString()

    async def serve(data: bytes) -> tuple[str, int]:
        request = guarded.request_deserializer(data)
        assert not isinstance(request, Malformed)
        answer = await guarded.unary_unary(request, None)
        return answer, threading.get_ident()

    for size, off_the_loop in ((THREAD_REQUEST_BYTES, True), (1000, False)):
        answer, loop_thread = asyncio.run(serve(produce(size)))
        assert answer == "answered"
        assert (threads[-1] != loop_thread) is off_the_loop, size
        assert isinstance(seen[-1], client_pb2.ProduceRequest)
