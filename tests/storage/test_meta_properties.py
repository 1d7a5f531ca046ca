"""meta.properties (storage.meta_properties): formatting and checking log directories.

Proves what the module promises: ids are Kafka-style (22-character base64url UUIDs, never
starting with '-'); `format_dirs` writes version=1 files with the cluster id, node id and a
directory id unique per directory, refuses an already formatted directory unless told to skip
it, and refuses a bad cluster id; `check_dirs` refuses unformatted directories, another node's
or another cluster's directories and duplicated directory ids, and returns the cluster id;
unreadable files raise LogDirError, never another exception; a crashed write is ignored.
"""

from __future__ import annotations

import base64
import os

import pytest

from storage.errors import LogDirError, StorageError
from storage.meta_properties import (
    FILE_NAME,
    MetaProperties,
    check_dirs,
    check_uuid,
    format_dirs,
    random_uuid,
    read,
    write,
)


def test_random_uuid_is_kafka_style():
    ids = {random_uuid() for _ in range(500)}
    assert len(ids) == 500
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16
        check_uuid(text, "id")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "short",
        "A" * 21,
        "A" * 23,
        "A" * 20 + "!!",
        "A" * 21 + "+",
        "A" * 21 + "/",
        "A" * 21 + "=",
    ],
)
def test_check_uuid_rejects(text):
    with pytest.raises(LogDirError, match="cluster id"):
        check_uuid(text, "cluster id")


def test_format_and_check(tmp_path):
    cluster = random_uuid()
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    assert format_dirs(dirs, cluster, node_id=3) == dirs
    metas = [read(d) for d in dirs]
    assert all(m.cluster_id == cluster and m.node_id == 3 and m.version == 1 for m in metas)
    assert metas[0].directory_id != metas[1].directory_id
    for m in metas:
        check_uuid(m.directory_id, "directory id")
    assert check_dirs(dirs, node_id=3) == cluster
    text = (tmp_path / "a" / FILE_NAME).read_text()
    assert sorted(text.splitlines()) == sorted(
        ["version=1", f"cluster.id={cluster}", "node.id=3", f"directory.id={metas[0].directory_id}"]
    )


def test_format_refuses_formatted_unless_ignored(tmp_path):
    cluster = random_uuid()
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    format_dirs([a], cluster, 1)
    before = read(a)
    with pytest.raises(LogDirError, match="already formatted"):
        format_dirs([a, b], cluster, 1)
    assert format_dirs([a, b], cluster, 1, ignore_formatted=True) == [b]
    assert read(a) == before


def test_format_refuses_a_bad_cluster_id(tmp_path):
    with pytest.raises(LogDirError):
        format_dirs([str(tmp_path / "a")], "not-a-uuid", 1)
    assert not os.path.exists(tmp_path / "a" / FILE_NAME)


def test_check_refuses_unformatted(tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    with pytest.raises(LogDirError, match="format"):
        check_dirs([str(a)], 1)


def test_check_refuses_another_node(tmp_path):
    format_dirs([str(tmp_path / "a")], random_uuid(), 1)
    with pytest.raises(LogDirError, match="node.id 1"):
        check_dirs([str(tmp_path / "a")], 2)


def test_check_refuses_two_clusters(tmp_path):
    format_dirs([str(tmp_path / "a")], random_uuid(), 1)
    format_dirs([str(tmp_path / "b")], random_uuid(), 1)
    with pytest.raises(LogDirError, match="different clusters"):
        check_dirs([str(tmp_path / "a"), str(tmp_path / "b")], 1)


def test_check_refuses_a_copied_directory(tmp_path):
    cluster = random_uuid()
    format_dirs([str(tmp_path / "a")], cluster, 1)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / FILE_NAME).write_bytes((tmp_path / "a" / FILE_NAME).read_bytes())
    with pytest.raises(LogDirError, match="same directory.id"):
        check_dirs([str(tmp_path / "a"), str(tmp_path / "b")], 1)


def test_read_ignores_comments_and_blank_lines(tmp_path):
    cluster, directory = random_uuid(), random_uuid()
    (tmp_path / FILE_NAME).write_text(
        f"#\n#Tue Nov 26 01:00:00 UTC 2026\n\nnode.id=4\ndirectory.id={directory}\n"
        f"version=1\ncluster.id={cluster}\n"
    )
    assert read(str(tmp_path)) == MetaProperties(cluster, 4, directory, 1)


@pytest.mark.parametrize(
    "content",
    [
        b"version=1\nnode.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n",  # no cluster.id
        b"version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=x\n"
        b"directory.id=AAAAAAAAAAAAAAAAAAAAAA\n",
        b"version=0\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=1\n"
        b"directory.id=AAAAAAAAAAAAAAAAAAAAAA\n",  # ZooKeeper-era version
        b"\xff\xfe\x00\x01binary",
    ],
    ids=["missing key", "bad node id", "version 0", "binary"],
)
def test_unreadable_file_raises_log_dir_error(tmp_path, content):
    (tmp_path / FILE_NAME).write_bytes(content)
    with pytest.raises(LogDirError) as caught:
        read(str(tmp_path))
    assert isinstance(caught.value, StorageError)
    assert FILE_NAME in str(caught.value)


def test_crashed_write_is_ignored(tmp_path):
    meta = MetaProperties(random_uuid(), 1, random_uuid())
    write(str(tmp_path), meta)
    (tmp_path / (FILE_NAME + ".tmp")).write_bytes(b"version=1\ncluster.id=")
    assert read(str(tmp_path)) == meta
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()
    assert read(str(tmp_path / "missing")) is None
