"""Every Raft message survives the trip to protobuf and back unchanged (raft/wire.py)."""

from __future__ import annotations

import re

import pytest

from raft import messages as m
from raft.wire import from_proto, to_proto
from raft.wire_checks import MalformedRaftMessageError
from strom_api.v1 import raft_pb2

SNAP = m.SnapshotId(1200, 7)
MESSAGES = [
    m.VoteRequest(1, 2, 5, 4, 100, True),
    m.VoteResponse(2, 1, 5, m.NO_LEADER, False, True, m.FENCED_LEADER_EPOCH, candidate_epoch=6),
    m.BeginQuorumEpochRequest(1, 3, 5),
    m.BeginQuorumEpochResponse(3, 1, 5, 1),
    m.EndQuorumEpochRequest(1, 2, 5, (3, 2)),
    m.EndQuorumEpochResponse(2, 1, 5, m.NO_LEADER, m.NOT_LEADER_OR_FOLLOWER),
    m.FetchRequest(2, 1, 5, 100, 4, 500, 90),
    m.FetchResponse(
        1,
        2,
        5,
        1,
        99,
        (m.Entry(100, 5, b"x"), m.Entry(101, 5, b"", control=True)),
        fetch_offset=100,
        last_fetched_epoch=4,
    ),
    m.FetchResponse(1, 2, 5, 1, 99, diverging=m.DivergingEpoch(3, 80), fetch_offset=90),
    m.FetchResponse(1, 2, 5, 1, 1300, snapshot_id=SNAP, fetch_offset=5, last_fetched_epoch=1),
    m.FetchResponse(1, 2, 6, 3, 0, error=m.FENCED_LEADER_EPOCH),
    m.FetchSnapshotRequest(4, 1, 5, SNAP, 4096, 1 << 20),
    m.FetchSnapshotResponse(1, 4, 5, 1, SNAP, 4096, 10_000, b"\x00chunk\xff"),
    m.FetchSnapshotResponse(1, 4, 5, 1, SNAP, 4096, error=m.SNAPSHOT_NOT_FOUND),
    m.FetchSnapshotResponse(1, 4, 5, 1, SNAP, 20_000, error=m.POSITION_OUT_OF_RANGE),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda msg: type(msg).__name__)
def test_round_trip(message: m.Message) -> None:
    wire = to_proto(message).SerializeToString()
    back = type(to_proto(message))()
    back.ParseFromString(wire)
    assert from_proto(back) == message


def _proto(message: m.Message) -> raft_pb2.RaftMessage:
    """The message as a peer would send it, fields set without the core's dataclasses."""
    back = raft_pb2.RaftMessage()
    back.ParseFromString(to_proto(message).SerializeToString())
    return back


MALFORMED = {
    "epoch at int32 max": (m.BeginQuorumEpochRequest(1, 3, 2**31 - 1), "epoch 2147483647"),
    "negative epoch": (m.BeginQuorumEpochRequest(1, 3, -5), "epoch -5"),
    "negative src": (m.FetchRequest(-3, 1, 5, 0, 0), "src -3"),
    "negative fetch offset": (m.FetchRequest(2, 1, 5, -1, 0), "fetch_offset -1"),
    "negative max_entries": (m.FetchRequest(2, 1, 5, 0, 0, -1), "max_entries -1"),
    "last epoch beyond": (m.VoteRequest(1, 2, 5, 2**31 - 1, 10, False), "last_epoch"),
    "negative end offset": (m.VoteRequest(1, 2, 5, 4, -10, False), "end_offset -10"),
    "leader id below -1": (m.BeginQuorumEpochResponse(3, 1, 5, -2), "leader_id -2"),
    "negative successor": (m.EndQuorumEpochRequest(1, 2, 5, (3, -1)), "successor -1"),
    "entries with a gap": (
        m.FetchResponse(1, 2, 5, 1, 0, (m.Entry(4, 5, b""), m.Entry(6, 5, b""))),
        "entry 6@5 after 4@5",
    ),
    "entry epochs going back": (
        m.FetchResponse(1, 2, 5, 1, 0, (m.Entry(4, 5, b""), m.Entry(5, 3, b""))),
        "entry 5@3 after 4@5",
    ),
    "entry epoch beyond": (
        m.FetchResponse(1, 2, 5, 1, 0, (m.Entry(4, 2**31 - 1, b""),)),
        "entry epoch 2147483647",
    ),
    "negative high watermark": (m.FetchResponse(1, 2, 5, 1, -4), "high_watermark -4"),
    "negative snapshot position": (
        m.FetchSnapshotRequest(4, 1, 5, SNAP, -1, 100),
        "position -1",
    ),
    "negative max bytes": (m.FetchSnapshotRequest(4, 1, 5, SNAP, 0, -100), "max_bytes -100"),
    "negative snapshot size": (
        m.FetchSnapshotResponse(1, 4, 5, 1, SNAP, 0, -1, b""),
        "size -1",
    ),
    "snapshot epoch beyond": (
        m.FetchSnapshotRequest(4, 1, 5, m.SnapshotId(10, 2**31 - 1), 0, 100),
        "snapshot epoch 2147483647",
    ),
    "too many successors": (m.EndQuorumEpochRequest(1, 2, 5, tuple(range(2000))), "2000"),
}


@pytest.mark.parametrize(("message", "named"), MALFORMED.values(), ids=MALFORMED.keys())
def test_a_field_out_of_range_is_refused_at_decoding(message: m.Message, named: str) -> None:
    with pytest.raises(MalformedRaftMessageError, match=re.escape(named)):
        from_proto(_proto(message))


def test_an_unknown_error_code_is_refused_at_decoding() -> None:
    """proto3 enums are open: before, ErrorCode.Name raised a bare ValueError that ended the
    transport's stream task."""
    pb = _proto(m.BeginQuorumEpochResponse(3, 1, 5, 1))
    pb.begin_quorum_epoch_response.error = 31337
    with pytest.raises(MalformedRaftMessageError, match="unknown error code 31337"):
        from_proto(pb)


def test_the_largest_legal_values_pass() -> None:
    top = 2**31 - 2
    message = m.FetchResponse(
        1, 2, top, 2**31 - 1, 2**63 - 1, (m.Entry(2**62, top, b""),), fetch_offset=2**63 - 1
    )
    assert from_proto(_proto(message)) == message
