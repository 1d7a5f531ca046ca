"""Every Raft message survives the trip to protobuf and back unchanged (raft/wire.py)."""

from __future__ import annotations

import pytest

from raft import messages as m
from raft.wire import from_proto, to_proto

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
