"""Storage engine: append, read and recovery, each against a raw-file reference in the same run.

    python bench/bench_storage.py [--quick]

1. Append: `Log.append(batch, leader_epoch)` of pre-built batches (1 MiB and 16 KiB, default
   LogConfig, no per-batch fsync) against `os.write` of the same bytes to one file. Two times per
   run: to the last write (page cache), and including one final fsync (`Log.flush` / `os.fsync`).
2. Read: a log of >= 2 GiB in 64 MiB segments. Sequential `Log.read(offset, 1 MiB)` through the
   whole log against `os.pread` of the segment files in 1 MiB chunks, with the files in the page
   cache (warm) and evicted from it (cold, `posix_fadvise(DONTNEED)` on our files only); then
   p50/p99 latency of random `Log.read` against random `os.pread` of the same size (warm).
3. Recovery: reopening that log with the last >= 1 GiB past the recovery point (scanned and
   CRC-checked) against crc32c over the same bytes read with `os.pread`; and a clean restart.

Every timed pair runs interleaved, once untimed then `reps` times, each after an untimed
`os.sync()`; the figures are medians. Data lives in a temp dir under $STROM_BENCH_DIR (default
/tmp, on the same disk as /work here), deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

from crc32c import crc32c

from storage.config import LogConfig
from storage.log import Log
from strom_api.records import Record, encode_batch

KiB, MiB, GiB = 1024, 1024**2, 1024**3
SIZES = {
    # append_big / append_small: bytes appended per run; read_log: size of the read/recovery log
    "full": dict(
        append_big=1 * GiB,
        append_small=512 * MiB,
        read_log=2 * GiB,
        segment=64 * MiB,
        unflushed=1 * GiB,
        random_reads=2000,
        reps=3,
    ),
    "quick": dict(
        append_big=64 * MiB,
        append_small=16 * MiB,
        read_log=256 * MiB,
        segment=8 * MiB,
        unflushed=128 * MiB,
        random_reads=300,
        reps=3,
    ),
}
# The read log's batches: about 16 KiB, deliberately not a divisor of 1 MiB, so that reads end
# mid-batch and get trimmed, as they do with real producers' batches.
READ_LOG_BATCH = 16_000
RECORD_VALUE = 1000  # bytes per record value (random, uncompressed)
T0 = 1_700_000_000_000

ROWS: list[tuple[str, str, str, str, str]] = []  # the final table


# --- helpers -----------------------------------------------------------------------------


def report(what: str, ours: str, ref: str, ratio: float | None, goal: str = "") -> None:
    row = (what, ours, ref, "" if ratio is None else f"{ratio:.2f}", goal)
    ROWS.append(row)
    print(f"  {what}: {ours} vs {ref}" + ("" if ratio is None else f" -> ratio {ratio:.2f}"))


def gbps(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:.2f} GB/s"


def interleaved(runs: dict[str, Callable[[], tuple[float, ...]]], reps: int) -> dict[str, list]:
    """Runs each callable once untimed (the first touch of fresh memory on this VM is several
    times slower), then `reps` times alternating which goes first, each after an untimed sync;
    returns the per-field medians of what each returned."""
    got: dict[str, list[tuple[float, ...]]] = {name: [] for name in runs}
    names = list(runs)
    for rep in range(-1, reps):
        for name in names if rep % 2 == 0 else names[::-1]:
            os.sync()
            result = runs[name]()
            if rep >= 0:
                got[name].append(result)
    return {
        name: [statistics.median(field) for field in zip(*v, strict=True)]
        for name, v in got.items()
    }


def cold(fn: Callable[[], tuple[float, ...]], directory: str) -> Callable[[], tuple[float, ...]]:
    """`fn`, run after dropping every file of `directory` (only) from the page cache; the files
    must be clean, which interleaved()'s os.sync sees to."""

    def run() -> tuple[float, ...]:
        for name in os.listdir(directory):
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        return fn()

    return run


def template(batch_size: int) -> bytearray:
    """One batch of exactly `batch_size` bytes from encode_batch (records of ~1 KB values)."""
    count = records_per_batch(batch_size)
    value = os.urandom(RECORD_VALUE)
    last = RECORD_VALUE
    for _ in range(5):
        records = [Record(i, T0, None, value) for i in range(count - 1)]
        records.append(Record(count - 1, T0, None, os.urandom(last)))
        batch = encode_batch(records)
        if len(batch) == batch_size:
            return bytearray(batch)
        last += batch_size - len(batch)
    raise AssertionError(f"cannot build a batch of exactly {batch_size} bytes")


def batches(batch_size: int, total: int, first: int = 0) -> Iterator[bytes]:
    """`total // batch_size` distinct batches: the template with rising timestamps, each with
    its own CRC, as a producer would send them."""
    buf = template(batch_size)
    for i in range(first, first + total // batch_size):
        struct.pack_into(">qq", buf, 27, T0 + i, T0 + i)  # baseTimestamp, maxTimestamp
        struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
        yield bytes(buf)


def records_per_batch(batch_size: int) -> int:
    return max(1, batch_size // (RECORD_VALUE + 24))


# --- 1. append ---------------------------------------------------------------------------


def bench_append(root: str, batch_size: int, total: int, reps: int, per_call: int = 1) -> None:
    """`per_call` batches go to each Log.append (a produce request for the partition) and to
    each os.write of the reference."""
    made = list(batches(batch_size, total))
    data = [b"".join(made[i : i + per_call]) for i in range(0, len(made), per_call)]
    del made
    nbytes = sum(map(len, data))
    print(
        f"append: {len(data)} x {per_call} batch(es) of {batch_size} B = {nbytes / MiB:.0f} MiB, "
        f"default LogConfig, median of {reps}"
    )

    def raw() -> tuple[float, float]:
        path = os.path.join(root, "raw.bin")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        start = time.perf_counter()
        for b in data:
            os.write(fd, b)  # a regular file takes all of it or raises
        written = time.perf_counter()
        os.fsync(fd)
        flushed = time.perf_counter()
        os.close(fd)
        os.unlink(path)
        return written - start, flushed - start

    def log() -> tuple[float, float]:
        directory = os.path.join(root, "append-log")
        log = Log.open(directory, LogConfig())
        start = time.perf_counter()
        for b in data:
            log.append(b, 0)
        written = time.perf_counter()
        log.flush()
        flushed = time.perf_counter()
        log.close()
        shutil.rmtree(directory)
        return written - start, flushed - start

    got = interleaved({"raw": raw, "log": log}, reps)
    size = f"{batch_size // KiB} KiB" if batch_size < MiB else f"{batch_size // MiB} MiB"
    calls = "" if per_call == 1 else f" x{per_call}/call"
    for i, when in enumerate(("no flush", "+ final fsync")):
        us = got["log"][i] / len(data) * 1e6, got["raw"][i] / len(data) * 1e6
        report(
            f"append {size} batches{calls}, {nbytes // MiB} MiB, {when}",
            f"{gbps(nbytes, got['log'][i])} ({us[0]:.0f} us/call)",
            f"{gbps(nbytes, got['raw'][i])} ({us[1]:.0f} us/write)",
            got["raw"][i] / got["log"][i],
            ">= 0.8",
        )


# --- 2. read -----------------------------------------------------------------------------


def build_read_log(directory: str, config: LogConfig, total: int) -> Log:
    log = Log.open(directory, config)
    start = time.perf_counter()
    chunk = 64 * MiB  # generate in chunks so the whole log never sits in memory
    for first in range(0, total // READ_LOG_BATCH, chunk // READ_LOG_BATCH):
        left = total - first * READ_LOG_BATCH
        for b in batches(READ_LOG_BATCH, min(chunk, left), first):
            log.append(b, 0)
    log.flush()
    print(
        f"read log: {log.size / GiB:.2f} GiB in {len(log.segments)} segments of "
        f"{config.segment_bytes // MiB} MiB, batches of {READ_LOG_BATCH} B, "
        f"{log.log_end_offset} records (built and fsynced in "
        f"{time.perf_counter() - start:.1f} s, incl. batch generation)"
    )
    return log


def segment_paths(log: Log) -> list[str]:
    return [os.path.join(log.directory, f"{s.base_offset:020d}.log") for s in log.segments]


def bench_sequential_read(log: Log, chunk: int, reps: int) -> None:
    paths = segment_paths(log)
    per_batch = records_per_batch(READ_LOG_BATCH)

    def log_scan() -> tuple[float]:
        start = time.perf_counter()
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            data = log.read(offset, chunk)
            if not data:
                raise RuntimeError(f"empty read at offset {offset} of {end}")
            offset += len(data) // READ_LOG_BATCH * per_batch  # uniform batches
        return (time.perf_counter() - start,)

    def raw_scan() -> tuple[float]:
        start = time.perf_counter()
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            pos = 0
            while data := os.pread(fd, chunk, pos):
                pos += len(data)
            os.close(fd)
        return (time.perf_counter() - start,)

    nbytes = log.size
    for label, runs in (
        ("warm", {"log": log_scan, "raw": raw_scan}),
        ("cold", {"log": cold(log_scan, log.directory), "raw": cold(raw_scan, log.directory)}),
    ):
        got = interleaved(runs, reps)
        report(
            f"sequential read, {chunk // KiB} KiB reads, {nbytes / GiB:.2f} GiB, {label}",
            gbps(nbytes, got["log"][0]),
            gbps(nbytes, got["raw"][0]),
            got["raw"][0] / got["log"][0],
        )


def bench_random_read(log: Log, max_bytes: int, count: int) -> None:
    rng = random.Random(42)
    segments = log.segments
    fds = [s.fd for s in segments]
    sizes = [s.size for s in segments]
    offsets = [rng.randrange(log.log_start_offset, log.log_end_offset) for _ in range(count)]
    spots = []
    for _ in range(count):
        i = rng.randrange(len(fds))
        spots.append((fds[i], rng.randrange(sizes[i])))
    ours: list[float] = []
    ref: list[float] = []
    for offset, (fd, pos) in zip(offsets, spots, strict=True):  # interleaved one by one
        start = time.perf_counter()
        log.read(offset, max_bytes)
        middle = time.perf_counter()
        os.pread(fd, max_bytes, pos)
        ours.append(middle - start)
        ref.append(time.perf_counter() - middle)

    def p(xs: list[float], q: int) -> float:
        return statistics.quantiles(xs, n=100)[q - 1] * 1e6

    for q in (50, 99):
        report(
            f"random read {max_bytes // KiB} KiB, p{q} of {count}, warm",
            f"{p(ours, q):.0f} us",
            f"{p(ref, q):.0f} us",
            p(ref, q) / p(ours, q),
        )


# --- 3. recovery -------------------------------------------------------------------------


def bench_recovery(log: Log, unflushed: int, reps: int) -> None:
    directory, config, leo = log.directory, log.config, log.log_end_offset
    segments = [
        (s.base_offset, s.size, p) for s, p in zip(log.segments, segment_paths(log), strict=True)
    ]
    log.close()
    # The recovery point: the first segment of the last >= `unflushed` bytes (recovery scans
    # whole segments from the one holding the recovery point).
    scanned, recovery_point = 0, leo
    for base, size, _ in reversed(segments):
        scanned += size
        recovery_point = base
        if scanned >= unflushed:
            break
    scan_paths = [p for base, _, p in segments if base >= recovery_point]
    print(
        f"recovery: {len(segments)} segments, LEO {leo}; crash with recovery point "
        f"{recovery_point}: {len(scan_paths)} segments, {scanned / GiB:.2f} GiB to scan"
    )
    infos = {}

    def reopen(recovery_point: int, clean_shutdown: bool) -> Callable[[], tuple[float]]:
        def run() -> tuple[float]:
            start = time.perf_counter()
            log = Log.open(
                directory, config, recovery_point=recovery_point, clean_shutdown=clean_shutdown
            )
            elapsed = time.perf_counter() - start
            infos["clean" if clean_shutdown else "crash"] = log.load_info
            log.close()
            return (elapsed,)

        return run

    def crc_scan() -> tuple[float]:
        start = time.perf_counter()
        for path in scan_paths:
            fd = os.open(path, os.O_RDONLY)
            pos, crc = 0, 0
            while data := os.pread(fd, 8 * MiB, pos):  # recovery's own window size
                crc = crc32c(data, crc)
                pos += len(data)
            os.close(fd)
        return (time.perf_counter() - start,)

    crash = reopen(recovery_point, clean_shutdown=False)
    clean = reopen(leo, clean_shutdown=True)
    for label, wrap in (("warm", lambda f: f), ("cold", lambda f: cold(f, directory))):
        got = interleaved({"log": wrap(crash), "raw": wrap(crc_scan)}, reps)
        report(
            f"crash recovery, {scanned / GiB:.2f} GiB scanned, {label}",
            f"{got['log'][0]:.2f} s = {gbps(scanned, got['log'][0])}",
            f"crc32c+pread {gbps(scanned, got['raw'][0])}",
            got["raw"][0] / got["log"][0],
        )
        got = interleaved({"log": wrap(clean)}, reps)
        report(
            f"clean restart, {len(segments)} segments, {label}",
            f"{got['log'][0] * 1000:.0f} ms",
            "-",
            None,
            "< 1 s",
        )
    for kind, info in infos.items():
        print(f"  load_info ({kind}): {info}")


# --- main --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    args = parser.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    root = tempfile.mkdtemp(prefix="strom-bench-", dir=os.environ.get("STROM_BENCH_DIR", "/tmp"))
    print(f"{'quick' if args.quick else 'full'} run in {root}, Python {sys.version.split()[0]}")
    try:
        bench_append(root, 1 * MiB, size["append_big"], size["reps"])
        bench_append(root, 16 * KiB, size["append_small"], size["reps"])
        bench_append(root, 16 * KiB, size["append_small"], size["reps"], per_call=64)
        config = LogConfig(segment_bytes=size["segment"])
        log = build_read_log(os.path.join(root, "read-log"), config, size["read_log"])
        bench_sequential_read(log, 1 * MiB, size["reps"])
        for max_bytes in (64 * KiB, 1 * MiB):
            bench_random_read(log, max_bytes, size["random_reads"])
        bench_recovery(log, size["unflushed"], size["reps"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    head = ("measurement", "Strom", "reference (raw file)", "ratio", "goal")
    widths = [max(len(r[i]) for r in [*ROWS, head]) for i in range(5)]
    print()
    for row in [head, tuple("-" * w for w in widths), *ROWS]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(
        "ratio = reference time / Strom time for the same bytes (1.0: as fast as the raw file; "
        f"higher is better); medians of {size['reps']} interleaved runs; 'cold' = our files "
        "evicted from the page cache first"
    )


if __name__ == "__main__":
    main()
