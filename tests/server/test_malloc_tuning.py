"""server/malloc_tuning.py: after keep_large_allocations() a 1 MB buffer comes from glibc's
heap, not from a fresh mmap (which costs a page fault per 4 KiB each time it is touched).
Each case runs in a fresh interpreter: mallopt settles the process for good, and glibc's
default threshold moves as large blocks are freed."""

from __future__ import annotations

import ctypes.util
import pathlib
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="mallopt and mallinfo2 are glibc's",
)

# Allocates one 1 MB block with malloc and prints how many blocks glibc holds mmapped
# while it lives (mallinfo2's hblks).
PROBE = """
import ctypes, ctypes.util, sys
sys.path.insert(0, {root!r})
from server import malloc_tuning
if {tuned!r}:
    print(malloc_tuning.keep_large_allocations())
libc = ctypes.CDLL(ctypes.util.find_library("c"))
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
before = libc.mallinfo2().hblks
block = libc.malloc(1_000_000)
print(libc.mallinfo2().hblks - before)
libc.free(block)
"""


def mapped_blocks(tuned: bool) -> list[str]:
    root = str(pathlib.Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(root=root, tuned=tuned)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.split()


def test_a_megabyte_comes_from_a_fresh_mmap_by_default():
    assert ctypes.util.find_library("c") is not None
    assert mapped_blocks(tuned=False) == ["1"]


def test_after_keep_large_allocations_a_megabyte_comes_from_the_heap():
    assert mapped_blocks(tuned=True) == ["True", "0"]
