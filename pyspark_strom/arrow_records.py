"""RecordBatch v2 bytes to Arrow columns, vectorised: what a Spark task does with each Fetch
answer.

The records of a batch are a chain of length-prefixed entries (strom_api/records.py), so
finding where each record starts is the one sequential step: a short Python loop reads one
varint per record. Every other field is then decoded for all records of the chunk at once
with numpy (a varint is up to 10 bytes: gather them, find the first byte without the
continuation bit, mask and shift), and keys and values are gathered into contiguous Arrow
binary buffers without a Python object per record. Headers, when asked for, are the only
per-record Python work. The output's Arrow schema is exactly the one pyspark derives from
the Spark schema (`timestamp[us, tz=UTC]`, int32 partition, all nullable), which Spark checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from strom_api import compression
from strom_api.record_batch import HEADER_SIZE, InvalidRecordBatchError, validate_batch

_WIDE = np.arange(10, dtype=np.int64)
_SHIFTS = (np.arange(10, dtype=np.uint64) * np.uint64(7)).astype(np.uint64)


@dataclass(frozen=True, slots=True)
class _Batch:
    start: int  # where its records begin in the record buffer
    end: int
    count: int
    base_offset: int
    base_timestamp: int
    log_append_time: int  # -1, or the broker's time for every record (LogAppendTime)


def _slow_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise InvalidRecordBatchError("record varint is longer than 10 bytes")


def _record_starts(buf: Any, batches: list[_Batch]) -> tuple[np.ndarray, np.ndarray]:
    """Where each record's body starts (after its length varint) and its length."""
    starts: list[int] = []
    lengths: list[int] = []
    add_start = starts.append
    add_length = lengths.append
    try:
        for batch in batches:
            p = batch.start
            for _ in range(batch.count):
                b = buf[p]
                if b < 0x80:
                    z = b
                    p += 1
                else:
                    b1 = buf[p + 1]
                    if b1 < 0x80:
                        z = (b & 0x7F) | (b1 << 7)
                        p += 2
                    else:
                        z, p = _slow_uvarint(buf, p)
                length = (z >> 1) ^ -(z & 1)
                add_start(p)
                add_length(length)
                p += length
            if p != batch.end:
                raise InvalidRecordBatchError(
                    f"batch at offset {batch.base_offset}: its {batch.count} records end at "
                    f"byte {p - batch.start} of {batch.end - batch.start}"
                )
    except IndexError:
        raise InvalidRecordBatchError("a record runs past the end of its batch") from None
    return np.array(starts, np.int64), np.array(lengths, np.int64)


def _varints(arr: np.ndarray, pos: np.ndarray, most: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """The zig-zag varints at `pos` (one per record, each at most `most` bytes: 5 for an
    int32, 10 for an int64) and the positions after them."""
    raw3 = arr[np.minimum(pos[:, None] + _WIDE[:3], len(arr) - 1)]
    more3 = raw3 >= 0x80
    if not (more3[:, 0] & more3[:, 1] & more3[:, 2]).any():
        # Every varint has 1 to 3 bytes, the usual case: no 10-byte gather.
        b0 = raw3[:, 0].astype(np.int64)
        b1 = np.where(more3[:, 0], raw3[:, 1], 0).astype(np.int64)
        b2 = np.where(more3[:, 1] & more3[:, 0], raw3[:, 2], 0).astype(np.int64)
        z3 = (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)
        width3 = 1 + more3[:, 0] + (more3[:, 0] & more3[:, 1])
        return (z3 >> 1) ^ -(z3 & 1), pos + width3
    wide = _WIDE[:most]
    idx = np.minimum(pos[:, None] + wide, len(arr) - 1)
    raw = arr[idx]
    more = raw >= 0x80
    if more.all(axis=1).any():
        raise InvalidRecordBatchError(f"a record varint is longer than {most} bytes")
    width = np.argmin(more, axis=1) + 1
    keep = wide[None, :] < width[:, None]
    z = (np.where(keep, raw & 0x7F, 0).astype(np.uint64) << _SHIFTS[:most]).sum(
        axis=1, dtype=np.uint64
    )
    value = (z >> np.uint64(1)).astype(np.int64) ^ -(z & np.uint64(1)).astype(np.int64)
    return value, pos + width


def _binary(view: memoryview, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """One Arrow binary column (-1 lengths are nulls): the bytes copied once by a join of
    memoryview slices, which beats a numpy gather by far for values of any size."""
    n = len(starts)
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if int(offsets[-1]) >= 2**31:
        raise InvalidRecordBatchError("a chunk of records holds 2 GiB or more")
    total = int(offsets[-1])
    if total <= 32 * n:  # short keys or values: one numpy gather beats n slices
        arr = np.frombuffer(view, dtype=np.uint8)
        data = arr[np.repeat(starts - offsets[:-1], sizes) + np.arange(total)].tobytes()
    else:
        ends = (starts + sizes).tolist()
        data = b"".join([view[s:e] for s, e in zip(starts.tolist(), ends, strict=True)])
    nulls = n - int(valid.sum())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
        null_count=nulls,
    )


def _repeated_string(text: str, n: int) -> pa.Array:
    encoded = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(encoded)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(encoded * n)]
    )


def _plain(values: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


def _decode_headers(buf: Any, pos: int, count: int, end: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(count):
        parts: list[bytes | None] = []
        for _ in range(2):
            z, pos = _slow_uvarint(buf, pos)
            length = (z >> 1) ^ -(z & 1)
            if length < 0:
                parts.append(None)
            else:
                parts.append(bytes(buf[pos : pos + length]))
                pos += length
        name, value = parts
        out.append({"key": (name or b"").decode(errors="replace"), "value": value})
    if pos != end:
        raise InvalidRecordBatchError(f"record headers end at byte {pos}, the record at {end}")
    return out


def _collect(data: bytes, start: int, end: int) -> tuple[Any, list[_Batch]]:
    """The record bytes of the batches overlapping [start, end), and where each batch's
    records lie in them; compressed batches are decompressed into a new buffer."""
    found: list[tuple[int, int, Any, int, int, int, int]] = []
    compressed = False
    pos = 0
    view = memoryview(data)
    while pos < len(data):
        header = validate_batch(data, pos)
        size = header.batch_length + 12
        if (
            not header.is_control
            and header.record_count
            and header.next_offset > start
            and header.base_offset < end
        ):
            body: Any = view[pos + HEADER_SIZE : pos + size]
            if header.compression:
                compressed = True
                body = compression.decompress(header.compression, body)
            stamp = header.max_timestamp if header.log_append_time else -1
            found.append(
                (
                    pos + HEADER_SIZE,
                    pos + size,
                    body,
                    header.record_count,
                    header.base_offset,
                    header.base_timestamp,
                    stamp,
                )
            )
        pos += size
    if not compressed:
        return data, [_Batch(s, e, c, o, t, a) for s, e, _, c, o, t, a in found]
    batches = []
    at = 0
    for _, _, body, count, base, ts, stamp in found:
        batches.append(_Batch(at, at + len(body), count, base, ts, stamp))
        at += len(body)
    return b"".join(bytes(f[2]) for f in found), batches


def decode_to_arrow(
    data: bytes,
    topic: str,
    partition: int,
    start: int,
    end: int,
    schema: pa.Schema,
) -> pa.RecordBatch | None:
    """The records of `data` (whole RecordBatch v2) with offsets in [start, end), as one
    Arrow batch of `schema` (Spark's Kafka schema, with headers when it has 8 fields);
    None when there are none."""
    buf, batches = _collect(data, start, end)
    if not batches:
        return None
    arr = np.frombuffer(buf, dtype=np.uint8)
    starts, lengths = _record_starts(buf, batches)
    if (lengths < 1).any():
        raise InvalidRecordBatchError("a record has a length below 1")
    pos = starts + 1  # the attributes byte, unused
    ts_delta, pos = _varints(arr, pos)
    offset_delta, pos = _varints(arr, pos, 5)
    key_len, pos = _varints(arr, pos, 5)
    key_start = pos
    pos = pos + np.maximum(key_len, 0)
    value_len, pos = _varints(arr, pos, 5)
    value_start = pos
    pos = pos + np.maximum(value_len, 0)
    header_count, pos = _varints(arr, pos, 5)
    record_end = starts + lengths
    if (key_len < -1).any() or (value_len < -1).any() or (header_count < 0).any():
        raise InvalidRecordBatchError("a record has a negative field length")
    if ((header_count == 0) & (pos != record_end)).any() or (pos > record_end).any():
        raise InvalidRecordBatchError("a record's fields do not add up to its length")

    counts = [b.count for b in batches]
    offsets = np.repeat(np.array([b.base_offset for b in batches], np.int64), counts) + offset_delta
    base_ts = np.repeat(np.array([b.base_timestamp for b in batches], np.int64), counts)
    stamped = np.repeat(np.array([b.log_append_time for b in batches], np.int64), counts)
    append_time = stamped >= 0
    timestamps = np.where(append_time, stamped, base_ts + ts_delta)

    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        chosen = np.flatnonzero(keep)
        if not len(chosen):
            return None
        offsets, timestamps, append_time = offsets[chosen], timestamps[chosen], append_time[chosen]
        key_start, key_len = key_start[chosen], key_len[chosen]
        value_start, value_len = value_start[chosen], value_len[chosen]
        header_count, pos, record_end = header_count[chosen], pos[chosen], record_end[chosen]
    n = len(offsets)
    view = memoryview(buf)
    columns = [
        _binary(view, key_start, key_len),
        _binary(view, value_start, value_len),
        _repeated_string(topic, n),
        _plain(np.full(n, partition, dtype=np.int32), pa.int32()),
        _plain(offsets, pa.int64()),
        _plain(timestamps * 1000, schema.field("timestamp").type),
        _plain(append_time.astype(np.int32), pa.int32()),
    ]
    if len(schema) > 7:
        headers: list[Any] = [None] * n
        for i in np.flatnonzero(header_count > 0).tolist():
            headers[i] = _decode_headers(buf, int(pos[i]), int(header_count[i]), int(record_end[i]))
        columns.append(pa.array(headers, type=schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
