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
