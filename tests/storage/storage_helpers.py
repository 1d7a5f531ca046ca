"""Shared helpers for the storage tests: batch builders, a brute-force model of what a log
holds, and checkers that compare the log's answers with that model.

Kept in a uniquely named module (not conftest.py) so that test modules can import plain
functions without depending on which conftest pytest imported last.
"""

from __future__ import annotations

import os
import random
import struct
from dataclasses import dataclass

from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from strom_api.record_batch import iter_batches
from strom_api.records import Record, decode_batch, encode_batch

BASE_TS = 1_700_000_000_000


def log_config(**overrides: object) -> LogConfig:
    """LogConfig from Kafka names written with underscores: segment_bytes=2048."""
    return LogConfig.from_properties({k.replace("_", "."): v for k, v in overrides.items()})


def producer_batch(
    values: list[bytes | None] | int = 1,
    *,
    keys: list[bytes | None] | None = None,
    timestamps: list[int] | int = BASE_TS,
    headers: tuple[tuple[str, bytes | None], ...] = (),
    codec: int = 0,
    value_size: int = 8,
) -> bytes:
    """A batch as a producer sends it: offsets 0..n-1, baseOffset and epoch unset.

    `values` is a list of values or a record count (values of `value_size` bytes)."""
    if isinstance(values, int):
        values = [bytes([65 + i % 26]) * value_size for i in range(values)]
    n = len(values)
    keys = keys if keys is not None else [b"key-%d" % i for i in range(n)]
    if isinstance(timestamps, int):
        timestamps = [timestamps] * n
    records = [Record(i, timestamps[i], keys[i], values[i], headers) for i in range(n)]
    return encode_batch(records, compression_codec=codec)


def stamped(batch: bytes, base_offset: int, epoch: int) -> bytes:
    """What the leader stores: baseOffset and partitionLeaderEpoch rewritten by hand."""
    return struct.pack(">q", base_offset) + batch[8:12] + struct.pack(">i", epoch) + batch[16:]


@dataclass(frozen=True)
class Stored:
    """One batch as the model expects it in the log."""

    base: int
    last: int
    raw: bytes
    records: tuple[Record, ...]

    @property
    def next(self) -> int:
        return self.last + 1


def append(log: Log, batch: bytes, epoch: int = 0) -> Stored:
    """Appends as leader and returns what the model says is now stored."""
    info = log.append(batch, epoch)
    raw = stamped(batch, info.first_offset, epoch)
    _, records = decode_batch(raw)
    assert (info.first_offset, info.last_offset) == (records[0].offset, records[-1].offset)
    return Stored(info.first_offset, info.last_offset, raw, tuple(records))


def random_batch(
    rng: random.Random, *, ts_spread: int = 0, max_records: int = 4, max_value: int = 200
) -> bytes:
    """Random record count, value sizes and (when ts_spread > 0) non-monotonic timestamps."""
    n = rng.randint(1, max_records)
    values = [rng.randbytes(rng.randint(0, max_value)) for _ in range(n)]
    timestamps = [BASE_TS + rng.randint(0, ts_spread) for _ in range(n)]
    return producer_batch(values, timestamps=timestamps)


def fill(
    log: Log, rng: random.Random, count: int, *, epochs: bool = False, **batch_options: int
) -> list[Stored]:
    """Appends `count` random batches; with `epochs`, the leader epoch rises now and then."""
    out = []
    epoch = 0
    for _ in range(count):
        if epochs and rng.random() < 0.15:
            epoch += rng.randint(1, 2)
        out.append(append(log, random_batch(rng, **batch_options), epoch))
    return out


def split(buf: bytes) -> list[bytes]:
    """A buffer of whole batches as one bytes object per batch (validating each)."""
    return [bytes(buf[pos : pos + header.size]) for pos, header in iter_batches(buf)]


def read_all(log: Log, start: int | None = None, chunk: int = 1 << 20) -> list[bytes]:
    """Every batch from `start` (default: log start) to the log end, via Log.read."""
    offset = log.log_start_offset if start is None else start
    out: list[bytes] = []
    while offset < log.log_end_offset:
        data = log.read(offset, chunk)
        assert data, f"read at {offset} returned nothing below LEO {log.log_end_offset}"
        batches = split(data)
        out += batches
        last = decode_batch(batches[-1])[0]
        offset = last.next_offset
    return out


def segment_files(log: Log, suffix: str = ".log") -> list[str]:
    return [os.path.join(log.directory, f"{s.base_offset:020d}{suffix}") for s in log.segments]


def crash(log: Log) -> None:
    """Stops using a log as a crash would: file descriptors go, nothing is written out
    (index entries still in the write-behind buffer are lost)."""
    for segment in log.segments:
        segment.close_file()


# --- checkers against the model -------------------------------------------------------------


def batch_holding(model: list[Stored], offset: int) -> int:
    """Index in `model` of the first batch whose last offset is >= offset."""
    for i, stored in enumerate(model):
        if stored.last >= offset:
            return i
    raise AssertionError(f"no batch holds offset {offset}")


def check_reads(log: Log, model: list[Stored], rng: random.Random, context: str = "") -> None:
    """Log.read at every offset in [log start, LEO) against the model."""
    model = [s for s in model if s.last >= log.log_start_offset]
    for offset in range(log.log_start_offset, log.log_end_offset):
        i = batch_holding(model, offset)
        # max_bytes below the batch size: min_one returns exactly the holding batch.
        assert log.read(offset, 1) == model[i].raw, f"{context} read({offset}, 1)"
        assert log.read(offset, 1, min_one=False) == b"", f"{context} min_one=False at {offset}"
        max_bytes = rng.randint(1, 4000)
        got = split(log.read(offset, max_bytes))
        want = [model[i].raw]
        for stored in model[i + 1 :]:
            if sum(map(len, want)) + len(stored.raw) > max_bytes:
                break
            want.append(stored.raw)
        assert got == want[: len(got)], f"{context} read({offset}, {max_bytes}) bytes differ"
        # Whole batches only; fewer than fit only at a segment end (a read never spans one).
        assert len(got) >= 1 and sum(map(len, got)) <= max(max_bytes, len(model[i].raw))
        if len(got) < len(want):
            nxt = model[i + len(got)]
            assert segment_of(log, nxt.base) != segment_of(log, model[i + len(got) - 1].base), (
                f"{context} read({offset}, {max_bytes}) stopped early inside a segment"
            )
    assert log.read(log.log_end_offset, 100) == b""


def segment_of(log: Log, offset: int) -> int:
    """Index of the segment whose range holds `offset`."""
    return max(i for i, s in enumerate(log.segments) if s.base_offset <= offset)


def first_at_or_after(model: list[Stored], timestamp: int, log_start: int) -> int | None:
    for stored in model:
        for record in stored.records:
            if record.offset >= log_start and record.timestamp >= timestamp:
                return record.offset
    return None


def check_timestamps(log: Log, model: list[Stored], context: str = "") -> None:
    """offset_for_timestamp against a scan of every record in offset order."""
    times = {r.timestamp for s in model for r in s.records}
    probes = {t + d for t in times for d in (-1, 0, 1)} | {min(times) - 1000, max(times) + 1}
    for t in sorted(probes):
        want = first_at_or_after(model, t, log.log_start_offset)
        assert log.offset_for_timestamp(t) == want, f"{context} offset_for_timestamp({t})"


def open_log(
    path: str | os.PathLike[str],
    config: LogConfig | None = None,
    clock: ManualClock | None = None,
    **kwargs: object,
) -> Log:
    return Log.open(
        str(path), config or log_config(), clock=clock or ManualClock(BASE_TS), **kwargs
    )  # type: ignore[arg-type]
