"""glibc's malloc tuned for a node that moves 1 MB buffers (docs/architecture.md §9).

By default glibc serves an allocation of 128 KiB or more (a threshold it raises as such
blocks are freed, up to 32 MiB) with a fresh mmap, and gives freed memory at the top of the
heap back to the kernel. A node allocates and frees megabyte buffers for every request: the
records of a replica fetch answer that protobuf (upb) hands over as bytes, a Kafka produce
frame, a segment read. upb's arenas are mmapped and unmapped each time, so every 1 MB answer
the follower reads costs 256 page faults: 0.80 ms to take the records out of a parsed 1 MB
ReplicaFetchResponse, against 0.03 ms once its memory is reused.

keep_large_allocations() keeps such blocks on the heap: allocations up to 32 MiB (glibc's
largest threshold) come from it, and up to TRIM_THRESHOLD bytes freed at its top stay mapped
for the next one (32 MiB: a node's buffers in use at once are a few megabytes, and what it
keeps mapped beyond its use stays bounded). It is called once, before the node starts
(mallopt applies to what is allocated afterwards). Elsewhere than glibc (musl, macOS) there
is no mallopt: nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("strom.server")

# mallopt's parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# glibc refuses an mmap threshold above HEAP_MAX_SIZE / 2: 32 MiB on 64-bit.
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 32 * 1024 * 1024


def keep_large_allocations() -> bool:
    """Whether glibc took both settings (False where there is no mallopt)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    took: bool = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    took = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and took
    if not took:
        log.warning("malloc tuning refused: large buffers are mapped afresh each time")
    return took
