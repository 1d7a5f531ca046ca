"""The quorum-state file: round trip, Kafka's JSON format, crash safety, clear errors."""

from __future__ import annotations

import json

import pytest

from raft.messages import ElectionState
from raft.quorum_state import QuorumStateStore
from storage.errors import StorageError

VOTERS = frozenset({1, 2, 3})


def test_a_missing_file_is_the_initial_state(tmp_path):
    assert QuorumStateStore(str(tmp_path), VOTERS).read() == ElectionState()


def test_round_trip_in_kafkas_format(tmp_path):
    store = QuorumStateStore(str(tmp_path), VOTERS)
    store.write(ElectionState(epoch=5, voted_for=2, leader_id=-1))
    assert store.read() == ElectionState(epoch=5, voted_for=2, leader_id=-1)
    data = json.loads((tmp_path / "quorum-state").read_text())
    assert data == {
        "clusterId": "",
        "leaderId": -1,
        "leaderEpoch": 5,
        "votedId": 2,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
        "data_version": 0,
    }


def test_a_crash_between_write_and_rename_keeps_the_old_state(tmp_path):
    store = QuorumStateStore(str(tmp_path), VOTERS)
    store.write(ElectionState(epoch=3, voted_for=1, leader_id=1))
    (tmp_path / "quorum-state.tmp").write_text('{"leaderEpoch": 4, "voted')  # torn
    assert store.read() == ElectionState(epoch=3, voted_for=1, leader_id=1)
    assert not (tmp_path / "quorum-state.tmp").exists()


@pytest.mark.parametrize("content", [b"", b"not json", b'{"leaderEpoch": 1}', b"\xff\xfe"])
def test_a_damaged_file_is_a_storage_error_naming_it(tmp_path, content):
    (tmp_path / "quorum-state").write_bytes(content)
    with pytest.raises(StorageError, match="quorum-state"):
        QuorumStateStore(str(tmp_path), VOTERS).read()


# An older version accepted BeginQuorumEpoch(2^31-1) from any node and persisted it.
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("leaderEpoch", 2**31 - 1),
        ("leaderEpoch", 2**31),
        ("leaderEpoch", -1),
        ("votedId", -2),
        ("leaderId", 2**31),
    ],
)
def test_an_out_of_range_value_is_refused_on_read_naming_the_file(tmp_path, field, value):
    """The node must not start from it (its next election would overflow, or worse, an
    epoch reset could let it vote twice): one StorageError naming the file and the value."""
    data = {"clusterId": "", "leaderId": 99, "leaderEpoch": 7, "votedId": -1}
    data[field] = value
    (tmp_path / "quorum-state").write_text(json.dumps(data))
    with pytest.raises(StorageError, match=rf"quorum-state holds .*{field} {value} is outside"):
        QuorumStateStore(str(tmp_path), VOTERS).read()


@pytest.mark.parametrize(
    "state",
    [
        ElectionState(epoch=2**31 - 1),
        ElectionState(epoch=-1),
        ElectionState(5, voted_for=2**31),
        ElectionState(5, leader_id=-7),
    ],
)
def test_an_out_of_range_value_is_never_written(tmp_path, state):
    store = QuorumStateStore(str(tmp_path), VOTERS)
    store.write(ElectionState(epoch=3, voted_for=1, leader_id=1))
    with pytest.raises(ValueError, match="refusing to persist"):
        store.write(state)
    assert store.read() == ElectionState(epoch=3, voted_for=1, leader_id=1)
