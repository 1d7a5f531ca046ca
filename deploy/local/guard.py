"""`make run` refuses to start over a running cluster, with one line: its directory is held
by another `make run` (an flock on <dir>/make-run.lock, released when that process ends,
however it ends), or a port its nodes would listen on is taken (nodes left running by a
`make run` that was killed, named by their pids, or anything else on those ports). Both are
checked before the nodes' server.properties are rewritten or anything is started.
"""

from __future__ import annotations

import fcntl
import glob
import os
import socket
from typing import IO


class CannotStart(Exception):
    """make run cannot start: its directory or ports are taken (the message says by what)."""


def lock_directory(directory: str) -> IO[str]:
    """Holds <directory>/make-run.lock for as long as the returned file stays open."""
    path = os.path.join(directory, "make-run.lock")
    lock = open(path, "a+")  # noqa: SIM115 (held open for the supervisor's lifetime)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        lock.close()
        raise CannotStart(
            f"another `make run` (pid {holder}) is running the cluster in {directory}"
        ) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def live_nodes(directory: str) -> list[int]:
    """Pids of `strom server` processes that a `make run` on `directory` started and that
    still run (<dir>/node*/server.pid, written by deploy/local/supervisor.py)."""
    pids = []
    for path in sorted(glob.glob(os.path.join(directory, "node*", "server.pid"))):
        try:
            with open(path) as f:
                pid = int(f.read().strip())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
        except (OSError, ValueError):
            continue  # gone, or not Linux: the ports say enough
        if b"strom_tools" in command and b"server" in command:
            pids.append(pid)
    return pids


def ports_in_use(addresses: list[tuple[str, int]]) -> list[str]:
    """The addresses something listens on. SO_REUSEADDR as the nodes bind: a port that
    only a previous run's closed connections hold (TIME_WAIT) is free."""
    taken = []
    for host, port in addresses:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                taken.append(f"{host}:{port}")
    return taken
