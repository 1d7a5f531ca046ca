"""Faults inside one node process: a slow disk, a failing disk, a wall clock that jumps, and
a crash that loses what the node had not flushed.

A small LD_PRELOAD shim, compiled here with the system's cc, does the in-process faults:
- Slow disk: fsync and fdatasync sleep the milliseconds in the node's delay file first.
- Failing disk: while the node's disk-error file holds an errno (EIO or ENOSPC) and a
  directory, every write, pwrite and pwritev (each C library variant), fsync and fdatasync
  on a file under that directory fails with that errno, as a dying or full disk answers
  (the file is re-read at most once a second; the metadata log, `__cluster_metadata-0`, is
  spared: the Raft log's own disk handling is not what this fault is about).
- Clock jumps: clock_gettime(CLOCK_REALTIME*) and gettimeofday add the seconds in the node's
  clock file (re-read once a second), as an NTP step would move the wall clock; the
  monotonic clock is left alone. (libfaketime does this too, but its clock_nanosleep breaks
  every sleep when only the wall clock is faked.)
- Unflushed data lost: after kill -9, each partition's active segment is cut at a random
  point past its recovery point (everything below it was fsynced, so a power loss cannot
  take it), possibly inside a batch; the node restarts and recovers. The Raft metadata log
  is left whole.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess

from strom_api.record_batch import LOG_OVERHEAD, parse_header

_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
static clock_gettime_fn real_clock_gettime(void);

/* The errno to fail writes under the node's failing directory with, 0 for none; the
   directory is read from the same file, which is re-read at most once a second. */
static int chaos_disk_errno(int fd) {
    static int error = 0;
    static char dir[PATH_MAX];
    static time_t read_at = -1;
    const char *path = getenv("STROM_CHAOS_DISK_ERROR_FILE");
    if (path == NULL) return 0;
    struct timespec now;
    real_clock_gettime()(CLOCK_MONOTONIC, &now);
    if (now.tv_sec != read_at) {
        read_at = now.tv_sec;
        int saved = errno;
        FILE *f = fopen(path, "r");
        if (f != NULL) {
            int value = 0;
            char where[PATH_MAX] = "";
            if (fscanf(f, "%d %4095s", &value, where) >= 1) {
                error = value;
                strncpy(dir, where, sizeof(dir) - 1);
            }
            fclose(f);
        }
        errno = saved;
    }
    if (error == 0 || dir[0] == '\0') return 0;
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n <= 0) return 0;
    target[n] = '\0';
    size_t len = strlen(dir);
    if (strncmp(target, dir, len) != 0 || (target[len] != '/' && target[len] != '\0')) return 0;
    if (strstr(target, "__cluster_metadata") != NULL) return 0;
    return error;
}

#define CHAOS_FAIL_ON_DISK_ERROR(fd) \
    do { int e = chaos_disk_errno(fd); if (e) { errno = e; return -1; } } while (0)

ssize_t write(int fd, const void *buf, size_t count) {
    static ssize_t (*real)(int, const void *, size_t) = NULL;
    if (real == NULL) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    CHAOS_FAIL_ON_DISK_ERROR(fd);
    return real(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t) = NULL;
    if (real == NULL)
        real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    CHAOS_FAIL_ON_DISK_ERROR(fd);
    return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t) = NULL;
    if (real == NULL)
        real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    CHAOS_FAIL_ON_DISK_ERROR(fd);
    return real(fd, buf, count, offset);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    static ssize_t (*real)(int, const struct iovec *, int, off_t) = NULL;
    if (real == NULL)
        real = (ssize_t (*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev");
    CHAOS_FAIL_ON_DISK_ERROR(fd);
    return real(fd, iov, iovcnt, offset);
}

/* CPython's os.pwritev calls pwritev2 where the C library has it (pwritev64v2 with 64-bit
   file offsets, the symbol libpython links to). */
typedef ssize_t (*pwritev2_fn)(int, const struct iovec *, int, off_t, int);

ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    static pwritev2_fn real = NULL;
    if (real == NULL) real = (pwritev2_fn)dlsym(RTLD_NEXT, "pwritev2");
    CHAOS_FAIL_ON_DISK_ERROR(fd);
    return real(fd, iov, iovcnt, offset, flags);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    static pwritev2_fn real = NULL;
    if (real == NULL) real = (pwritev2_fn)dlsym(RTLD_NEXT, "pwritev64v2");
    CHAOS_FAIL_ON_DISK_ERROR(fd);
    return real(fd, iov, iovcnt, offset, flags);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    static ssize_t (*real)(int, const struct iovec *, int, off_t) = NULL;
    if (real == NULL)
        real = (ssize_t (*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev64");
    CHAOS_FAIL_ON_DISK_ERROR(fd);
    return real(fd, iov, iovcnt, offset);
}

static void chaos_delay(void) {
    const char *path = getenv("STROM_CHAOS_FSYNC_DELAY_FILE");
    if (path == NULL) return;
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    long ms = 0;
    if (fscanf(f, "%ld", &ms) != 1) ms = 0;
    fclose(f);
    if (ms > 0) usleep((useconds_t)ms * 1000);
}

int fsync(int fd) {
    static int (*real)(int) = NULL;
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    chaos_delay();
    CHAOS_FAIL_ON_DISK_ERROR(fd);
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int) = NULL;
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    chaos_delay();
    CHAOS_FAIL_ON_DISK_ERROR(fd);
    return real(fd);
}

static clock_gettime_fn real_clock_gettime(void) {
    static clock_gettime_fn real = NULL;
    if (real == NULL) real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    return real;
}

/* Seconds to add to the wall clock, re-read at most once a (monotonic) second. */
static long chaos_clock_offset(void) {
    static long offset = 0;
    static time_t read_at = -1;
    const char *path = getenv("STROM_CHAOS_CLOCK_OFFSET_FILE");
    if (path == NULL) return 0;
    struct timespec now;
    real_clock_gettime()(CLOCK_MONOTONIC, &now);
    if (now.tv_sec != read_at) {
        read_at = now.tv_sec;
        FILE *f = fopen(path, "r");
        if (f != NULL) {
            long value = 0;
            if (fscanf(f, "%ld", &value) == 1) offset = value;
            fclose(f);
        }
    }
    return offset;
}

int clock_gettime(clockid_t id, struct timespec *tp) {
    int result = real_clock_gettime()(id, tp);
    if (result == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        tp->tv_sec += chaos_clock_offset();
    return result;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec now;
    int result = clock_gettime(CLOCK_REALTIME, &now);
    if (result == 0 && tv != NULL) {
        tv->tv_sec = now.tv_sec;
        tv->tv_usec = now.tv_nsec / 1000;
    }
    (void)tz;
    return result;
}
"""


def missing_tools(slow_disk: bool, clock: bool, disk_errors: bool = False) -> str | None:
    if (slow_disk or clock or disk_errors) and shutil.which("cc") is None:
        return "a C compiler (cc) for the fault shim"
    return None


class NodeFaults:
    """Per-node control files and the environment that makes a node obey them."""

    def __init__(
        self, base: str, nodes: list[int], slow_disk: bool, clock: bool, disk_errors: bool = False
    ) -> None:
        self.base = base
        self.slow_disk, self.clock, self.disk_errors = slow_disk, clock, disk_errors
        self.shim = os.path.join(base, "chaos_shim.so")
        if slow_disk or clock or disk_errors:
            source = os.path.join(base, "chaos_shim.c")
            with open(source, "w") as f:
                f.write(_SHIM)
            subprocess.run(
                ["cc", "-shared", "-fPIC", "-O2", "-o", self.shim, source, "-ldl"],
                check=True,
                capture_output=True,
            )
        for node in nodes:
            self.set_fsync_delay(node, 0)
            self.set_clock_offset(node, 0)
            self.set_disk_error(node, 0, "")

    def _file(self, node: int, what: str) -> str:
        return os.path.join(self.base, f"node{node}-{what}")

    def env_prefix(self, node: int) -> list[str]:
        """`env ...` to put before the node's command."""
        env = []
        if self.slow_disk:
            env.append(f"STROM_CHAOS_FSYNC_DELAY_FILE={self._file(node, 'fsync-delay-ms')}")
        if self.clock:
            env.append(f"STROM_CHAOS_CLOCK_OFFSET_FILE={self._file(node, 'clock-offset')}")
        if self.disk_errors:
            env.append(f"STROM_CHAOS_DISK_ERROR_FILE={self._file(node, 'disk-error')}")
        return ["env", f"LD_PRELOAD={self.shim}", *env] if env else []

    def set_fsync_delay(self, node: int, ms: int) -> None:
        with open(self._file(node, "fsync-delay-ms"), "w") as f:
            f.write(f"{ms}\n")

    def set_disk_error(self, node: int, error: int, directory: str) -> None:
        """Writes under `directory` fail with errno `error` from now on (0: they work)."""
        with open(self._file(node, "disk-error"), "w") as f:
            f.write(f"{error} {os.path.abspath(directory) if directory else '-'}\n")

    def set_clock_offset(self, node: int, seconds: int) -> None:
        with open(self._file(node, "clock-offset"), "w") as f:
            f.write(f"{seconds:+d}\n")


def cut_unflushed(data_dir: str, rng: random.Random) -> int:
    """Cuts each partition's active segment somewhere past its recovery point; returns the
    bytes cut in all. Call only while the node is down."""
    points = _recovery_points(os.path.join(data_dir, "recovery-point-offset-checkpoint"))
    cut = 0
    for name in sorted(os.listdir(data_dir)):
        path = os.path.join(data_dir, name)
        topic, _, partition = name.rpartition("-")
        if not os.path.isdir(path) or not partition.isdigit() or name.startswith("__cluster"):
            continue
        segments = sorted(f for f in os.listdir(path) if f.endswith(".log"))
        if not segments:
            continue
        active = os.path.join(path, segments[-1])
        floor = _position_of(active, points.get((topic, int(partition)), 0))
        size = os.path.getsize(active)
        if floor >= size:
            continue
        at = rng.randint(floor, size)
        os.truncate(active, at)
        cut += size - at
    return cut


def _recovery_points(path: str) -> dict[tuple[str, int], int]:
    try:
        with open(path) as f:
            lines = f.read().splitlines()[2:]
    except FileNotFoundError:
        return {}
    out = {}
    for line in lines:
        topic, partition, offset = line.split(" ")
        out[(topic, int(partition))] = int(offset)
    return out


def _position_of(segment: str, offset: int) -> int:
    """The byte position of the first batch holding `offset` or later (the file's end when
    every batch is below it)."""
    with open(segment, "rb") as f:
        data = f.read()
    pos = 0
    while pos + LOG_OVERHEAD <= len(data):
        try:
            header = parse_header(data, pos)
        except Exception:
            return pos
        if header.base_offset >= offset:
            return pos
        pos += header.batch_length + LOG_OVERHEAD
    return len(data)
