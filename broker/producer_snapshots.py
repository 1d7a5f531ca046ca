"""Producer state snapshots beside a partition's segments: `<offset:020d>.snapshot` holds
the idempotent producers' state as of that offset (Kafka's ProducerStateManager files), so
a restart replays only the log after the newest usable snapshot instead of the whole log.
Written atomically (tmp + fsync + rename); a damaged one is skipped for an older one."""

from __future__ import annotations

import os
import re

from broker.producer_state import ProducerStateManager
from storage.file_io import atomic_write

SUFFIX = ".snapshot"
KEEP = 2  # the newest snapshots kept; older ones only slow a directory listing
_NAME = re.compile(r"^(\d{20})\.snapshot$")


def snapshot_offsets(directory: str) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := _NAME.match(n)))


def path_of(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SUFFIX}")


def write(directory: str, offset: int, data: bytes) -> None:
    atomic_write(path_of(directory, offset), data)
    for old in snapshot_offsets(directory)[:-KEEP]:
        _remove(path_of(directory, old))


def load_latest(directory: str, max_offset: int) -> tuple[int, ProducerStateManager]:
    """The newest readable snapshot at or below `max_offset` (the log end) and its offset;
    (0, empty state) when there is none."""
    for offset in reversed(snapshot_offsets(directory)):
        if offset > max_offset:
            continue
        try:
            with open(path_of(directory, offset), "rb") as f:
                return offset, ProducerStateManager.from_snapshot(f.read())
        except (OSError, ValueError):
            continue
    return 0, ProducerStateManager()


def delete_above(directory: str, offset: int) -> None:
    """Drops snapshots past `offset` (the log was truncated there: they describe batches
    that are gone)."""
    for snap in snapshot_offsets(directory):
        if snap > offset:
            _remove(path_of(directory, snap))


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
