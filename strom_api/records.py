"""RecordBatch v2 at the record level: encode for producers, decode for consumers and the cleaner.

Brokers never call this on the produce or fetch path (see record_batch.py); it serves clients,
ListOffsets by timestamp, and log compaction. Each record inside a batch is

    length            varint   bytes of the rest of this record
    attributes        i8       unused, 0
    timestampDelta    varlong  from the batch's baseTimestamp
    offsetDelta       varint   from the batch's baseOffset
    keyLength         varint   -1 for a null key
    key               bytes
    valueLength       varint   -1 for a null value (a tombstone)
    value             bytes
    headerCount       varint
    headers           [keyLength varint, key utf-8, valueLength varint, value bytes]

Varints are zig-zag encoded, as in protobuf's sint32/sint64. A compacted batch may have gaps
between offsetDeltas and keeps its original lastOffsetDelta, so the record count can be smaller
than lastOffsetDelta + 1; both are preserved here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

from crc32c import crc32c

from strom_api import compression, native_records
from strom_api.record_batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    InvalidRecordBatchError,
    validate_batch,
)

Header = tuple[str, bytes | None]
_ATTRIBUTES_AT = 21  # a batch header's attributes: after baseOffset, length, epoch, magic, crc


class Record(NamedTuple):
    """One record with its absolute offset. A NamedTuple: built in C, several times cheaper
    than a frozen dataclass, and one is made per record sent or read."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def _write_varint(out: bytearray, value: int) -> None:
    # Zig-zag then unsigned LEB128; Python ints make the 64-bit form the same as the 32-bit one.
    zz = (value << 1) ^ (value >> 63)
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    if pos + 1 < len(buf):
        byte = buf[pos]
        if byte < 0x80:  # one byte: most deltas and counts
            return (byte >> 1) ^ -(byte & 1), pos + 1
        second = buf[pos + 1]
        if second < 0x80:  # two bytes: lengths of records up to 8 KiB
            value = (byte & 0x7F) | (second << 7)
            return (value >> 1) ^ -(value & 1), pos + 2
    return _read_long_varint(buf, pos)


def _read_long_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise InvalidRecordBatchError("record varint runs past the end of the batch")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidRecordBatchError("record varint is longer than 10 bytes")
    return (result >> 1) ^ -(result & 1), pos


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise InvalidRecordBatchError("record field runs past the end of the batch")
    return buf[pos:end], end


# Builds a Record from a tuple in C: a NamedTuple's own constructor is a Python function.
_new_record = functools.partial(tuple.__new__, Record)


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    _write_varint(out, value)
    return bytes(out)


# Encoded varints of 0 .. 2^14-1 (lengths, offset and timestamp deltas of ordinary batches),
# looked up instead of built: encoding is per record, the producer's hottest loop.
_SMALL_VARINTS = tuple(_varint_bytes(v) for v in range(1 << 14))
_MINUS_ONE = _varint_bytes(-1)
_ATTRIBUTES = b"\x00"
_NO_HEADERS = b"\x00"  # a header count of 0


def _varint(value: int) -> bytes:
    if 0 <= value < 1 << 14:
        return _SMALL_VARINTS[value]
    return _varint_bytes(value)


def _encode_record(out: bytearray, record: Record, base_offset: int, base_timestamp: int) -> None:
    key, value = record.key, record.value
    parts = [
        _ATTRIBUTES,
        _varint(record.timestamp - base_timestamp),
        _varint(record.offset - base_offset),
    ]
    if key is None:
        parts.append(_MINUS_ONE)
    else:
        parts += (_varint(len(key)), key)
    if value is None:
        parts.append(_MINUS_ONE)
    else:
        parts += (_varint(len(value)), value)
    parts.append(_varint(len(record.headers)))
    for name, header_value in record.headers:
        encoded = name.encode()
        parts += (_varint(len(encoded)), encoded)
        if header_value is None:
            parts.append(_MINUS_ONE)
        else:
            parts += (_varint(len(header_value)), header_value)
    body = b"".join(parts)
    out += _varint(len(body))
    out += body


def encode_batch(
    records: Sequence[Record],
    *,
    compression_codec: int = compression.NONE,
    log_append_time: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
    base_offset: int | None = None,
    last_offset: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Builds one batch. Offsets come from the records (a producer numbers them 0..n-1; the
    leader restamps the base). `base_offset`/`last_offset` may widen the batch's offset range
    beyond its records, as compaction does when it drops the first or last record."""
    if not records and (base_offset is None or last_offset is None):
        raise ValueError("an empty batch needs an explicit base_offset and last_offset")
    base = records[0].offset if base_offset is None else base_offset
    last = records[-1].offset if last_offset is None else last_offset
    base_timestamp = records[0].timestamp if records else (max_timestamp or -1)
    if max_timestamp is None:
        max_timestamp = max(r.timestamp for r in records)
    body = bytearray()
    previous = base - 1
    for record in records:
        if not base <= record.offset <= last or record.offset <= previous:
            raise ValueError(f"record offset {record.offset} is out of order in the batch")
        previous = record.offset
        _encode_record(body, record, base, base_timestamp)
    attributes = 0
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    return framed_batch(
        body,
        len(records),
        compression_codec=compression_codec,
        attributes=attributes,
        base_offset=base,
        last_offset_delta=last - base,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


def append_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> None:
    """Appends one record, as it sits in a batch's records section (length prefix
    included), to `out`: a producer encodes each record into the batch it fills this way
    (the key and value copied once), then frames the section with framed_batch."""
    head = _ATTRIBUTES + _varint(timestamp_delta) + _varint(offset_delta)
    key_length = _MINUS_ONE if key is None else _varint(len(key))
    value_length = _MINUS_ONE if value is None else _varint(len(value))
    if headers:
        parts = [_varint(len(headers))]
        for name, header_value in headers:
            encoded = name.encode()
            parts += (_varint(len(encoded)), encoded)
            if header_value is None:
                parts.append(_MINUS_ONE)
            else:
                parts += (_varint(len(header_value)), header_value)
        tail = b"".join(parts)
    else:
        tail = _NO_HEADERS
    length = len(head) + len(key_length) + len(value_length) + len(tail)
    if key is not None:
        length += len(key)
    if value is not None:
        length += len(value)
    out += _varint(length)
    out += head
    out += key_length
    if key:
        out += key
    out += value_length
    if value:
        out += value
    out += tail


def framed_batch(
    body: bytes | bytearray,
    count: int,
    *,
    compression_codec: int = compression.NONE,
    attributes: int = 0,
    base_offset: int = 0,
    last_offset_delta: int | None = None,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A batch around an encoded records section of `count` records (offset deltas 0..
    count-1 unless `last_offset_delta` says otherwise): compressed with the codec, the
    header packed, the CRC-32C computed."""
    payload = (
        body
        if compression_codec == compression.NONE
        else compression.compress(compression_codec, memoryview(body))
    )
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,
        attributes | compression_codec,
        count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    out += payload
    crc = crc32c(memoryview(out)[CRC_START:])
    out[17:21] = crc.to_bytes(4, "big")
    return bytes(out)


class RecordView(Protocol):
    """What read_batch gives per record: a Record, or aiokafka's C record object (whose
    headers are a list)."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[Header]: ...


def decode_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[BatchHeader, list[Record]]:
    """Validates the batch at `pos` (CRC included) and decodes all its records."""
    header, records = read_batch(buf, pos)
    if records and type(records[0]) is not Record:
        new = _new_record
        return header, [
            new((r.offset, r.timestamp, r.key, r.value, tuple(r.headers) if r.headers else ()))
            for r in records
        ]
    return header, records  # type: ignore[return-value]  # Records already


def read_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[BatchHeader, Sequence[RecordView]]:
    """decode_batch without building Records where they are not needed (the consumer builds
    its own from each record's fields).

    Records are read by aiokafka's RecordBatch v2 reader, compiled in C, when it is
    installed and `buf` is `bytes` (strom_api/native_records.py: about 3x less time per
    record); a batch it refuses is read again by decode_batch_portable, whose answer
    (records or InvalidRecordBatchError) stands. tests/strom_api/test_native_records.py
    checks that both read every batch alike."""
    header = validate_batch(buf, pos)
    if type(buf) is bytes and native_records.available():
        if header.compression == compression.NONE:
            read = native_records.read(memoryview(buf)[pos : pos + header.size])
        else:
            # The C reader takes a whole batch: this one's header, marked uncompressed,
            # before its decompressed records (a bytes object, as native_records requires).
            attributes = (header.attributes & ~COMPRESSION_MASK).to_bytes(2, "big", signed=True)
            head = bytes(buf[pos : pos + HEADER_SIZE])
            plain = b"".join(
                (
                    head[:_ATTRIBUTES_AT],
                    attributes,
                    head[_ATTRIBUTES_AT + 2 :],
                    _records_section(buf, pos, header),
                )
            )
            read = native_records.read(plain)
        if read is not None:
            return header, read
    return header, _python_records(_records_section(buf, pos, header), header)


def decode_batch_portable(
    buf: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[BatchHeader, list[Record]]:
    """decode_batch in Python alone (the reference the C reader is tested against)."""
    header = validate_batch(buf, pos)
    return header, _python_records(_records_section(buf, pos, header), header)


def _records_section(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bytes:
    """The batch's records, decompressed."""
    raw = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    try:
        data = compression.decompress(header.compression, raw)
    except ValueError as exc:  # unknown codec or corrupt compressed data
        raise InvalidRecordBatchError(
            f"batch at offset {header.base_offset} does not decompress: {exc}"
        ) from exc
    if not isinstance(data, bytes):
        data = bytes(data)  # one copy per batch, so that keys and values slice as bytes
    return data


def _python_records(data: bytes, header: BatchHeader) -> list[Record]:
    # This loop runs once per record a consumer reads: locals, and no call for the fields
    # that are almost always there (a key or value of -1 length, no headers).
    records: list[Record] = []
    append = records.append
    read_varint = _read_varint
    new_record = _new_record
    base_offset, base_timestamp = header.base_offset, header.base_timestamp
    size = len(data)
    rpos = 0
    try:
        for _ in range(header.record_count):
            # Varints inline: one byte (zig-zag values -64..63: deltas, a null key, no
            # headers) and two (lengths up to 8 KiB) without a call; longer ones call.
            b = data[rpos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                rpos += 1
            elif data[rpos + 1] < 0x80:
                v = (b & 0x7F) | (data[rpos + 1] << 7)
                length = (v >> 1) ^ -(v & 1)
                rpos += 2
            else:
                length, rpos = read_varint(data, rpos)
            end = rpos + length
            if length < 1 or end > size:
                raise InvalidRecordBatchError(
                    f"record in batch at offset {base_offset} has a bad length {length}"
                )
            rpos += 1  # attributes, unused
            b = data[rpos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                rpos += 1
            else:
                ts_delta, rpos = read_varint(data, rpos)
            b = data[rpos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                rpos += 1
            else:
                offset_delta, rpos = read_varint(data, rpos)
            b = data[rpos]
            if b == 1:  # zig-zag -1: a null key
                key = None
                rpos += 1
            else:
                key_length, rpos = read_varint(data, rpos)
                if key_length < 0:
                    key = None
                else:
                    key = data[rpos : rpos + key_length]
                    rpos += key_length
            b = data[rpos]
            if b < 0x80:
                value_length = (b >> 1) ^ -(b & 1)
                rpos += 1
            elif data[rpos + 1] < 0x80:
                v = (b & 0x7F) | (data[rpos + 1] << 7)
                value_length = (v >> 1) ^ -(v & 1)
                rpos += 2
            else:
                value_length, rpos = read_varint(data, rpos)
            if value_length < 0:
                value = None
            else:
                value = data[rpos : rpos + value_length]
                rpos += value_length
            headers: tuple[Header, ...] = ()
            if data[rpos] == 0:  # no headers
                rpos += 1
            else:
                count, rpos = read_varint(data, rpos)
                found = []
                for _ in range(count):
                    name, rpos = _read_bytes(data, rpos)
                    hvalue, rpos = _read_bytes(data, rpos)
                    found.append(((name or b"").decode(errors="replace"), hvalue))
                headers = tuple(found)
            if rpos != end:
                raise InvalidRecordBatchError(
                    f"record in batch at offset {base_offset} has {end - rpos} stray bytes"
                    if rpos < end
                    else f"record in batch at offset {base_offset} runs past its length"
                )
            append(
                new_record(
                    (base_offset + offset_delta, base_timestamp + ts_delta, key, value, headers)
                )
            )
    except IndexError:
        raise InvalidRecordBatchError(
            f"a record in batch at offset {base_offset} runs past the end of the batch"
        ) from None
    if rpos != len(data):
        raise InvalidRecordBatchError(
            f"batch at offset {header.base_offset} has bytes after its "
            f"{header.record_count} records"
        )
    if header.log_append_time:
        # LogAppendTime: every record takes the time the broker stamped into maxTimestamp.
        records = [
            Record(r.offset, header.max_timestamp, r.key, r.value, r.headers) for r in records
        ]
    return records


def decode_batches(
    buf: bytes | bytearray | memoryview,
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Decodes every batch in a buffer of whole batches."""
    pos = 0
    while pos < len(buf):
        header, records = decode_batch(buf, pos)
        yield header, records
        pos += header.size
