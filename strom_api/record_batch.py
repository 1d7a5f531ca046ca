"""RecordBatch v2 at the header level: what brokers and storage need, never touching records.

Kafka's RecordBatch v2 (magic 2), big-endian, as it lies in `.log` files and on the wire:

    offset  size  field
         0     8  baseOffset             i64   stamped by the leader; not covered by the CRC
         8     4  batchLength            i32   bytes after this field (total size - 12)
        12     4  partitionLeaderEpoch   i32   stamped by the leader; not covered by the CRC
        16     1  magic                  i8    = 2
        17     4  crc                    u32   CRC-32C of bytes [21, end)
        21     2  attributes             i16   bits 0-2 compression, 3 timestamp type,
                                                4 transactional, 5 control, 6 delete horizon
        23     4  lastOffsetDelta        i32
        27     8  baseTimestamp          i64
        35     8  maxTimestamp           i64
        43     8  producerId             i64
        51     2  producerEpoch          i16
        53     4  baseSequence           i32
        57     4  recordCount            i32
        61     …  records (possibly compressed as a whole)

Because the CRC skips baseOffset and partitionLeaderEpoch, a leader assigns offsets and stamps
its epoch by rewriting 16 bytes, without recomputing the CRC or copying the batch.
Everything here is pure and works on any buffer (bytes, bytearray, memoryview, mmap).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size
assert HEADER_SIZE == 61

# baseOffset and batchLength: enough to find where the next batch starts.
LOG_OVERHEAD = 12
# Bytes of the header that the CRC does not cover: it starts at the attributes.
CRC_START = 21
MAGIC = 2

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
# The first 16 bytes: baseOffset, batchLength, partitionLeaderEpoch — all a leader rewrites.
PREFIX = struct.Struct(">qii")
assert PREFIX.size == 16

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class InvalidRecordBatchError(ValueError):
    """The bytes are not a well-formed RecordBatch v2 (Kafka: CORRUPT_MESSAGE)."""


class BatchHeader(NamedTuple):
    """The 61-byte header of one batch, decoded. A NamedTuple: built in C, which matters on
    the append path where one is made per batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decodes the header at `pos`, checking only what the header alone can tell."""
    if len(buf) - pos < HEADER_SIZE:
        raise InvalidRecordBatchError(
            f"batch header at byte {pos} is truncated: {len(buf) - pos} of {HEADER_SIZE} bytes"
        )
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise InvalidRecordBatchError(
            f"batch at byte {pos} has magic {header.magic}; only RecordBatch v2 (magic 2) "
            "is supported"
        )
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise InvalidRecordBatchError(
            f"batch at byte {pos} declares length {header.batch_length}, "
            f"shorter than its own header"
        )
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise InvalidRecordBatchError(
            f"batch at byte {pos} has a negative lastOffsetDelta or record count"
        )
    return header


def peek_offset_and_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(baseOffset, total size) of the batch at `pos`, from its first 12 bytes only."""
    base_offset, batch_length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    return base_offset, batch_length + LOG_OVERHEAD


def checksum(batch: bytes | bytearray | memoryview) -> int:
    """CRC-32C of the part of one batch that its crc field covers."""
    mv = memoryview(batch)
    return crc32c(mv[CRC_START:])


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decodes and fully validates one batch at `pos`: header, extent and CRC-32C."""
    header = parse_header(buf, pos)
    check_extent_and_crc(buf, pos, header)
    return header


def check_extent_and_crc(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader
) -> None:
    """The rest of validate_batch, for a caller that already parsed the header."""
    end = pos + header.size
    if end > len(buf):
        raise InvalidRecordBatchError(
            f"batch at byte {pos} declares {header.size} bytes but only {len(buf) - pos} remain"
        )
    actual = crc32c(memoryview(buf)[pos + CRC_START : end])
    if actual != header.crc:
        raise InvalidRecordBatchError(
            f"batch at offset {header.base_offset} (byte {pos}) fails its CRC-32C check: "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Validates every batch in `buf`, yielding (position, header); the buffer must hold
    whole batches only, else InvalidRecordBatchError names the first bad one."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = validate_batch(buf, pos)
        yield pos, header
        pos += header.size


def stamp(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Rewrites baseOffset and partitionLeaderEpoch in place; the CRC stays valid."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)
    _LEADER_EPOCH.pack_into(buf, pos + 12, leader_epoch)


def stamped_prefix(header_bytes: bytes | memoryview, base_offset: int, leader_epoch: int) -> bytes:
    """The first 16 bytes of a batch with a new baseOffset and leader epoch.

    Lets a writer send `stamped_prefix(...)` then `batch[16:]` with one writev, so the batch
    body is never copied.
    """
    batch_length = int.from_bytes(header_bytes[8:12], "big", signed=True)
    return PREFIX.pack(base_offset, batch_length, leader_epoch)


_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Marks the batch at `pos` as LogAppendTime with maxTimestamp `timestamp` and recomputes
    its CRC, as Kafka's broker does for a topic with message.timestamp.type=LogAppendTime
    (readers then take that time for every record of the batch). The caller must have
    checked the old CRC first: this one makes any bytes look valid."""
    set_max_timestamp(buf, pos, timestamp, log_append_time=True)


def set_max_timestamp(
    buf: bytearray | memoryview, pos: int, timestamp: int, log_append_time: bool = False
) -> None:
    """Rewrites the maxTimestamp of the batch at `pos` (setting the LogAppendTime bit when
    asked) and recomputes its CRC, as Kafka's RecordBatch.setMaxTimestamp. The caller must
    have checked the old CRC first: this one makes any bytes look valid."""
    if log_append_time:
        (attributes,) = _ATTRIBUTES.unpack_from(buf, pos + 21)
        _ATTRIBUTES.pack_into(buf, pos + 21, attributes | TIMESTAMP_TYPE_BIT)
    _MAX_TIMESTAMP.pack_into(buf, pos + 35, timestamp)
    (batch_length,) = _LEADER_EPOCH.unpack_from(buf, pos + 8)
    end = pos + LOG_OVERHEAD + batch_length
    _CRC.pack_into(buf, pos + 17, crc32c(memoryview(buf)[pos + CRC_START : end]))


def rebuild_batch(
    header: BatchHeader, attributes: int, max_timestamp: int, records: bytes | memoryview
) -> bytearray:
    """The batch `header` describes with new attributes, maxTimestamp and records section
    (`records`, compressed as the attributes' codec says), its batchLength and CRC-32C
    computed anew; every other field (offset deltas, base timestamp, producer id, epoch
    and sequence, record count) kept. How a broker recompresses a batch for a topic's
    compression.type, as Kafka's LogValidator does."""
    out = bytearray(HEADER_SIZE + len(records))
    HEADER.pack_into(
        out,
        0,
        header.base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(records),
        header.partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        header.last_offset_delta,
        header.base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.record_count,
    )
    out[HEADER_SIZE:] = records
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out
