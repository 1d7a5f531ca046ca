"""Durable file operations: atomic replace and directory fsync.

A crash at any instant leaves either the old file or the new one, never a torn mix: the new
content goes to `<name>.tmp`, is fsynced, renamed over the old name, and the directory is
fsynced so the rename itself survives.
"""

from __future__ import annotations

import os

TMP_SUFFIX = ".tmp"


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes) -> None:
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def remove_leftover_temp(path: str) -> None:
    """Drops a `.tmp` left by a crash between write and rename; the old file still stands."""
    try:
        os.unlink(path + TMP_SUFFIX)
    except FileNotFoundError:
        pass
