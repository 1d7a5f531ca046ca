"""Checkpoints survive a crash between write and rename.

A crashed writer leaves `<name>.tmp` (complete or torn) next to the old checkpoint; reading
returns the old content and removes the stray temp file. A successful write replaces the file
whole and leaves no temp behind. Malformed files raise StorageError naming the file. The
formats are Kafka's, byte for byte ("0\\n<n>\\n<fields>\\n...").
"""

from __future__ import annotations

import os

import pytest

from storage import checkpoint
from storage.errors import StorageError
from storage.file_io import atomic_write
from storage.leader_epoch_cache import FILE_NAME, LeaderEpochCache


def read_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_offsets_round_trip_in_kafka_format(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    checkpoint.write_offsets(path, {("topic-b", 0): 7, ("topic-a", 1): 42, ("topic-a", 0): 0})
    assert read_bytes(path) == b"0\n3\ntopic-a 0 0\ntopic-a 1 42\ntopic-b 0 7\n"
    assert checkpoint.read_offsets(path) == {
        ("topic-a", 0): 0,
        ("topic-a", 1): 42,
        ("topic-b", 0): 7,
    }


def test_empty_and_missing(tmp_path):
    path = str(tmp_path / "cp")
    assert checkpoint.read_offsets(path) == {}
    checkpoint.write_offsets(path, {})
    assert read_bytes(path) == b"0\n0\n"
    assert checkpoint.read_offsets(path) == {}


def test_leader_epoch_checkpoint_is_kafkas_format(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    cache.assign(0, 0)
    cache.assign(3, 120)
    assert read_bytes(tmp_path / FILE_NAME) == b"0\n2\n0 0\n3 120\n"


@pytest.mark.parametrize(
    "leftover",
    [
        b"0\n1\nt 0 999\n",  # the new content, complete, never renamed
        b"0\n1\nt 0 9",  # torn mid-line
        b"",  # created, nothing written yet
        b"\x00\x00\x00\x00",  # allocated but never written (zeros after a crash)
    ],
    ids=["complete", "torn", "empty", "zeros"],
)
def test_crash_between_write_and_rename_keeps_the_old_checkpoint(tmp_path, leftover):
    path = str(tmp_path / "replication-offset-checkpoint")
    checkpoint.write_offsets(path, {("t", 0): 5})
    with open(path + ".tmp", "wb") as f:  # what the crashed writer left behind
        f.write(leftover)
    assert checkpoint.read_offsets(path) == {("t", 0): 5}
    assert not os.path.exists(path + ".tmp")
    # The next write goes through as usual.
    checkpoint.write_offsets(path, {("t", 0): 6})
    assert checkpoint.read_offsets(path) == {("t", 0): 6}


def test_crash_before_the_first_checkpoint_reads_as_absent(tmp_path):
    path = str(tmp_path / "log-start-offset-checkpoint")
    with open(path + ".tmp", "wb") as f:
        f.write(b"0\n1\nt 0 3\n")
    assert checkpoint.read_offsets(path) == {}
    assert not os.path.exists(path + ".tmp")


def test_leader_epoch_cache_ignores_a_crashed_write(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    cache.assign(1, 0)
    with open(tmp_path / (FILE_NAME + ".tmp"), "wb") as f:
        f.write(b"0\n2\n1 0\n9 5")
    assert LeaderEpochCache(str(tmp_path)).entries == [(1, 0)]
    assert not os.path.exists(tmp_path / (FILE_NAME + ".tmp"))


def test_write_replaces_whole_and_leaves_no_temp(tmp_path):
    path = str(tmp_path / "cp")
    checkpoint.write_offsets(path, {("t", p): p * 1000 for p in range(100)})
    inode = os.stat(path).st_ino
    checkpoint.write_offsets(path, {("t", 0): 1})
    assert read_bytes(path) == b"0\n1\nt 0 1\n"
    assert os.stat(path).st_ino != inode  # a new file renamed over, not rewritten in place
    assert os.listdir(tmp_path) == ["cp"]


def test_atomic_write_over_a_stale_temp(tmp_path):
    path = str(tmp_path / "f")
    with open(path + ".tmp", "wb") as f:
        f.write(b"stale stale stale stale")
    atomic_write(path, b"new")
    assert read_bytes(path) == b"new"
    assert os.listdir(tmp_path) == ["f"]


MALFORMED = {
    "empty": b"",
    "no count": b"0\n",
    "bad version": b"1\n0\n",
    "count too high": b"0\n2\nt 0 1\n",
    "count too low": b"0\n0\nt 0 1\n",
    "missing field": b"0\n1\nt 1\n",
    "extra field": b"0\n1\nt 0 1 2\n",
    "text count": b"0\nfour\n",
    "non-integer offset": b"0\n1\nt 0 x\n",
    "non-integer partition": b"0\n1\nt p 1\n",
    "binary garbage": b"\xff\xfe\x00\x81garbage\n",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_offset_checkpoint_raises_storage_error(tmp_path, name):
    path = tmp_path / "cp"
    path.write_bytes(MALFORMED[name])
    with pytest.raises(StorageError, match="checkpoint"):
        checkpoint.read_offsets(str(path))


@pytest.mark.parametrize(
    "content",
    [b"0\n1\nx 5\n", b"0\n1\n1 y\n", b"0\n1\n1\n", b"\xff\xfe\n"],
    ids=["text epoch", "text offset", "missing field", "binary"],
)
def test_malformed_leader_epoch_checkpoint_raises_storage_error(tmp_path, content):
    (tmp_path / FILE_NAME).write_bytes(content)
    with pytest.raises(StorageError, match=FILE_NAME):
        LeaderEpochCache(str(tmp_path))
