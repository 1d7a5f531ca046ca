"""Disk errors in the storage engine: a real full disk (a tiny tmpfs, when this process may
mount one) and real unusable files (a segment's descriptor swapped for one opened the wrong
way, so the kernel refuses the write or read with EBADF). Every OSError must come out as
KafkaStorageError, take the log's directory offline (Kafka's LogDirFailureChannel), leave the
log end where it was, and keep every later operation on that directory refused, while the
other directories go on; a restart recovers exactly what was written."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from storage.errors import KafkaStorageError
from storage.log import Log
from storage.log_manager import CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_FILE, LogManager
from tests.storage.storage_helpers import log_config, open_log, producer_batch, read_all


def swap_fd(log: Log, flags: int) -> None:
    """Replaces the active segment's descriptor with one of the same file opened with
    `flags`: O_RDONLY makes every write fail, O_WRONLY every read (EBADF)."""
    segment = log.active_segment
    other = os.open(os.path.join(segment.directory, f"{segment.base_offset:020d}.log"), flags)
    os.dup2(other, segment.fd)
    os.close(other)


@pytest.fixture
def tiny_disk(tmp_path: os.PathLike[str]) -> Iterator[str]:
    """A 256 KiB tmpfs: a disk that really fills up (ENOSPC). Needs root (or CAP_SYS_ADMIN)."""
    mount_point = os.path.join(tmp_path, "tiny")
    os.makedirs(mount_point)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mount_point],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", mount_point], check=False)


def fill_disk(directory: str) -> str:
    """Writes a file until the disk is full; returns its path (delete it to free the space)."""
    path = os.path.join(directory, f"filler-{uuid.uuid4().hex}")
    with open(path, "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0")
    return path


def test_a_full_disk_takes_its_directory_offline_and_loses_nothing_written(
    tiny_disk: str,
) -> None:
    log_dir = os.path.join(tiny_disk, "data")
    manager = LogManager([log_dir], log_config())
    manager.startup()
    heard: list[str] = []
    manager.failures.listeners.append(lambda d, why: heard.append(d))
    log = manager.get_or_create_log("orders", 0)
    filler = fill_disk(tiny_disk)
    written = []
    with pytest.raises(KafkaStorageError) as failure:
        for _ in range(10_000):
            end_before = log.log_end_offset
            batch = producer_batch(4, value_size=300)
            log.append(batch, leader_epoch=0)
            written.append(read_all(log, end_before)[0])
    assert "No space left on device" in str(failure.value)
    assert log.log_end_offset == end_before, "a failed append moved the log end"
    assert log.offline and heard == [os.path.abspath(log_dir)]
    assert manager.offline_dir_count() == 1 and manager.online_dirs() == []

    # Space again, but the directory stays offline until a restart: nothing is trusted.
    os.unlink(filler)
    with pytest.raises(KafkaStorageError, match="offline"):
        log.append(producer_batch(1), leader_epoch=0)
    with pytest.raises(KafkaStorageError, match="offline"):
        log.read(0, 1 << 20)
    with pytest.raises(KafkaStorageError, match="every log directory is offline"):
        manager.get_or_create_log("orders", 1)
    manager.shutdown()
    assert not os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
    assert heard == [os.path.abspath(log_dir)], "listeners hear of a directory once"

    restarted = LogManager([log_dir], log_config())
    restarted.startup()
    assert not restarted.had_clean_shutdown
    reopened = restarted.get_log("orders", 0)
    assert reopened is not None and not reopened.offline
    assert read_all(reopened) == written
    restarted.shutdown()


def test_an_unwritable_segment_fails_its_directory_alone(tmp_path: os.PathLike[str]) -> None:
    dirs = [os.path.join(tmp_path, "a"), os.path.join(tmp_path, "b")]
    manager = LogManager(dirs, log_config())
    manager.startup()
    bad = manager.get_or_create_log("orders", 0)
    good = manager.get_or_create_log("orders", 1)
    assert (bad.log_dir, good.log_dir) == (dirs[0], dirs[1])
    bad.append(producer_batch(2), leader_epoch=0)
    bad.update_high_watermark(2)
    manager.checkpoint()
    swap_fd(bad, os.O_RDONLY)

    with pytest.raises(KafkaStorageError) as failure:
        bad.append(producer_batch(3), leader_epoch=0)
    assert isinstance(failure.value.__cause__, OSError)
    assert failure.value.__cause__.errno == errno.EBADF
    assert failure.value.log_dir == dirs[0]
    assert bad.log_end_offset == 2 and bad.offline and not good.offline
    assert manager.failures.offline_dirs.keys() == {dirs[0]}

    good.append(producer_batch(5), leader_epoch=0)
    assert manager.get_or_create_log("orders", 2).log_dir == dirs[1]  # placed online only
    checkpoint_a = os.path.join(dirs[0], HIGH_WATERMARK_FILE)
    before = os.stat(checkpoint_a).st_mtime_ns
    good.update_high_watermark(5)
    manager.checkpoint()  # the online directory only; no error for the offline one
    assert os.stat(checkpoint_a).st_mtime_ns == before
    with open(os.path.join(dirs[1], HIGH_WATERMARK_FILE)) as f:
        assert "orders 1 5" in f.read()
    assert manager.flush_dirty_logs() == 0
    manager.shutdown()
    assert not os.path.exists(os.path.join(dirs[0], CLEAN_SHUTDOWN_FILE))
    assert os.path.exists(os.path.join(dirs[1], CLEAN_SHUTDOWN_FILE))

    restarted = LogManager(dirs, log_config())
    restarted.startup()
    reopened = restarted.get_log("orders", 0)
    assert reopened is not None and reopened.log_end_offset == 2
    restarted.shutdown()


def test_a_log_alone_goes_offline_at_its_first_disk_error(tmp_path: os.PathLike[str]) -> None:
    log = open_log(tmp_path / "orders-0")
    log.append(producer_batch(3), leader_epoch=0)
    swap_fd(log, os.O_WRONLY)
    with pytest.raises(KafkaStorageError, match="read of orders-0 failed"):
        log.read(0, 1 << 20)
    assert log.offline
    with pytest.raises(KafkaStorageError, match="offline"):
        log.append(producer_batch(1), leader_epoch=0)
    assert log.log_end_offset == 3
    with pytest.raises(KafkaStorageError, match="offline"):
        log.truncate_to(1)
    assert log.log_end_offset == 3
    log.release()
