"""Snapshot files: Kafka's names, a self-checking format, durable and crash-safe writes.

A snapshot written by the state machine reads back as the same records; one received in
chunks (FetchSnapshot) is kept only when complete and valid; leftovers of an interrupted
write are removed when the store opens; older snapshots go when the log moves past them.
"""

from __future__ import annotations

import os

import pytest

from raft.messages import SnapshotId
from raft.snapshot_files import (
    CorruptSnapshotError,
    FileSnapshotStore,
    decode_snapshot,
    encode_snapshot,
    file_name,
)
from strom_api.records import decode_batches


def test_file_names_are_kafkas() -> None:
    assert file_name(SnapshotId(1234, 7)) == "00000000000000001234-0000000007.checkpoint"


@pytest.mark.parametrize("count", [0, 1, 999, 1000, 2501])
def test_records_round_trip(count: int) -> None:
    records = [b"r%d" % i * (i % 5) for i in range(count)]
    assert decode_snapshot(encode_snapshot(SnapshotId(10, 2), records)) == records


def test_a_cut_or_damaged_snapshot_is_refused() -> None:
    data = encode_snapshot(SnapshotId(10, 2), [b"a" * 100, b"b" * 100])
    with pytest.raises(CorruptSnapshotError, match="header or footer"):
        footer = list(decode_batches(data))[-1][0].size
        decode_snapshot(data[: len(data) - footer])  # whole batches, the footer missing
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(data[:-3])
    damaged = bytearray(data)
    damaged[-120] ^= 0xFF  # inside a record (the CRC covers it)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(damaged))


def test_create_read_and_reopen(tmp_path) -> None:
    store = FileSnapshotStore(str(tmp_path))
    first, second = SnapshotId(5, 1), SnapshotId(9, 2)
    store.create(first, [b"x"])
    store.create(second, [b"x", b"y"])
    assert store.latest() == second
    assert store.read_records(second) == [b"x", b"y"]
    size = store.size(second)
    assert size == os.path.getsize(tmp_path / file_name(second))
    assert store.read(second, 0, 10) + store.read(second, 10, size) == store.read(second, 0, size)
    reopened = FileSnapshotStore(str(tmp_path))
    assert reopened.ids() == [first, second]
    reopened.delete_before(second)
    assert reopened.ids() == [second] and not (tmp_path / file_name(first)).exists()
    assert reopened.size(first) is None


def test_a_download_in_chunks_is_kept_only_when_complete_and_valid(tmp_path) -> None:
    os.makedirs(tmp_path / "leader")
    os.makedirs(tmp_path / "follower")
    source = FileSnapshotStore(str(tmp_path / "leader"))
    target = FileSnapshotStore(str(tmp_path / "follower"))
    snapshot = SnapshotId(50, 3)
    source.create(snapshot, [b"record-%d" % i for i in range(100)])
    size = source.size(snapshot)
    assert size is not None
    target.begin(snapshot)
    for position in range(0, size, 97):
        target.write(snapshot, position, source.read(snapshot, position, 97))
    assert target.latest() is None  # not until frozen
    assert target.freeze(snapshot)
    assert target.read_records(snapshot) == source.read_records(snapshot)

    # Damaged on the way: dropped, not kept.
    other = SnapshotId(60, 3)
    source.create(other, [b"z" * 500])
    data = bytearray(source.read(other, 0, 10_000))
    data[-40] ^= 1
    target.begin(other)
    target.write(other, 0, bytes(data))
    assert not target.freeze(other)
    assert target.ids() == [snapshot]
    assert not [n for n in os.listdir(tmp_path / "follower") if n.endswith(".part")]

    # A chunk that does not continue the file is refused.
    target.begin(other)
    with pytest.raises(ValueError):
        target.write(other, 10, b"late")


def test_leftovers_of_an_interrupted_write_are_removed_on_open(tmp_path) -> None:
    store = FileSnapshotStore(str(tmp_path))
    store.begin(SnapshotId(7, 1))
    store.write(SnapshotId(7, 1), 0, b"partial")
    (tmp_path / (file_name(SnapshotId(8, 1)) + ".local.part")).write_bytes(b"cut")
    # (a crash here: the store is never closed)
    reopened = FileSnapshotStore(str(tmp_path))
    assert reopened.latest() is None
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".part")]
