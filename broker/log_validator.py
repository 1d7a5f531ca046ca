"""Record-level checks of one producer batch before a leader appends it, after Kafka's
LogValidator: whatever the log takes, every consumer can read. Pure, no I/O; the caller
(produce_checks) has already checked the batch's extent and CRC.

The header must agree with itself: recordCount >= 1 and = lastOffsetDelta + 1, a compression
codec Kafka defines (0-4), no control or transactional bit, no LogAppendTime bit (that is the
broker's to set), a producer id of -1 or one with a sequence and epoch >= 0, and no more than
max.message.bytes. baseOffset is never read: the leader assigns offsets.

The records are then walked without building them, in one tight loop per batch: on the
request's own bytes when the batch is uncompressed, on its decompressed bytes otherwise.
Every record's length fits the batch, its offset delta is its index (0..n-1), its varints
are no longer than their type allows, its key, value and headers end exactly where its
length says, and the batch holds recordCount records and not a byte more. On a CreateTime
topic every record's timestamp must fall within message.timestamp.{before,after}.max.ms of
the broker's time (a record with no timestamp, -1, excepted), and the batch's maxTimestamp
becomes its records' largest timestamp, which Kafka writes over the producer's. On a
compacted topic every record needs a key. Errors are Kafka's: INVALID_RECORD (its
InvalidRecordException) naming the batch and record, INVALID_TIMESTAMP for times.

Where Kafka 4 gives no clean answer, or its rule would not fit Strom:
- Compression codec 5-7: Kafka's CompressionType.forId throws IllegalArgumentException,
  which its produce path answers UNKNOWN_SERVER_ERROR; Strom answers
  UNSUPPORTED_COMPRESSION_TYPE (not retriable: the same bytes never become valid).
- Compressed bytes that do not decompress: Kafka answers INVALID_RECORD for a premature end
  and UNKNOWN_SERVER_ERROR for the rest; Strom answers INVALID_RECORD for all.
- Decompression bound: Kafka decompresses a batch as a stream, record by record, and never
  holds it whole. Strom decompresses a batch whole, so it bounds the output: at most
  DECOMPRESSION_FACTOR x max.message.bytes (16 MiB at the default max.message.bytes, never
  less than 1 MiB), past which the batch is refused with MESSAGE_TOO_LARGE before more is
  decompressed, the error on which Kafka's Java producer splits a batch and sends again.
  This also bounds the time the record walk can take (a few kilobytes of zstd could
  otherwise ask for millions of records).
- Offset deltas: Kafka checks them only in compressed batches; Strom in every batch, since
  consumers take record offsets from them.
- Producer ids below -1: Kafka reads them as "no producer", but Strom's producer state
  would track them, so they are refused (INVALID_RECORD), as is a negative epoch beside a
  producer id (InitProducerId never hands one out). A batch without a producer id may carry
  any sequence and epoch, as in Kafka (sarama sends sequence 0).
- The LogAppendTime bit from a producer: Kafka refuses it on LogAppendTime topics, and on
  CreateTime topics when maxTimestamp is -1 (otherwise it turns the batch into a CreateTime
  one, changing its records' times); Strom refuses it on every topic.
- A record's attributes byte (unused; every Kafka producer writes 0): Kafka ignores it;
  Strom refuses one with its top bit set (0x80-0xff), which aiokafka's C reader, the one
  Strom's consumer uses (strom_api/native_records.py), takes for the start of a longer
  varint and so misreads the rest of that record. What a Strom log holds, it reads exactly.
"""

from __future__ import annotations

from broker.topic_settings import TopicSettings
from metadata.errors import ApiError
from strom_api import compression
from strom_api.error_codes import ErrorCode
from strom_api.record_batch import HEADER_SIZE, NO_PRODUCER_ID, BatchHeader
from strom_api.records import decode_batch

NO_TIMESTAMP = -1
# The smallest record: length, attributes, timestampDelta, offsetDelta, keyLength,
# valueLength, headerCount, one byte each.
MIN_RECORD_SIZE = 7
DECOMPRESSION_FACTOR = 16
MIN_DECOMPRESSION_LIMIT = 1 << 20
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# Zig-zag decoding of one-byte varints, the common case for every field but value lengths.
_ZIGZAG = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))


class MalformedRecordError(Exception):
    """A record that is not laid out as RecordBatch v2 says; `index` is its place in the batch."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def decompression_limit(settings: TopicSettings) -> int:
    return max(DECOMPRESSION_FACTOR * settings.log.max_message_bytes, MIN_DECOMPRESSION_LIMIT)


def check_batch(
    buf: bytes | bytearray,
    pos: int,
    header: BatchHeader,
    index: int,
    settings: TopicSettings,
    now_ms: int,
) -> int:
    """Validates batch number `index` of a produce request, at `pos` in `buf`, and returns
    the largest timestamp of its records (-1 when none has one; the header's own value on a
    LogAppendTime topic, where the broker stamps its time anyway). Raises ApiError."""
    return check_batch_records(buf, pos, header, index, settings, now_ms)[0]


def check_batch_records(
    buf: bytes | bytearray,
    pos: int,
    header: BatchHeader,
    index: int,
    settings: TopicSettings,
    now_ms: int,
) -> tuple[int, memoryview]:
    """check_batch, also returning the batch's records section uncompressed, for a topic
    whose compression.type asks the broker to recompress (decompressed once, for both)."""
    check_header(header, index, settings)
    data, start, end = _records_of(buf, pos, header, index, settings)
    count = header.record_count
    if count > (end - start) // MIN_RECORD_SIZE:
        raise ApiError(
            ErrorCode.INVALID_RECORD,
            f"Batch {index} declares {count} records, but its {end - start} bytes of records "
            f"can hold at most {(end - start) // MIN_RECORD_SIZE}.",
        )
    try:
        lowest, highest = scan_records(data, start, end, count, settings.log.compact)
    except MalformedRecordError as exc:
        raise ApiError(
            ErrorCode.INVALID_RECORD, f"Record {exc.index} of batch {index}: {exc}"
        ) from None
    records = memoryview(data)[start:end]
    if settings.log_append_time:
        return header.max_timestamp, records
    return _check_timestamps(buf, pos, header, index, lowest, highest, settings, now_ms), records


def check_header(header: BatchHeader, index: int, settings: TopicSettings) -> None:
    """What the header alone must satisfy (LogValidator.validateBatch and friends)."""
    if header.is_control:
        raise ApiError(
            ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records."
        )
    if header.is_transactional:
        raise ApiError(
            ErrorCode.INVALID_RECORD,
            "Transactional batches are not supported: Strom has idempotent producers, "
            "not transactions.",
        )
    count = header.record_count
    if count <= 0:
        raise ApiError(
            ErrorCode.INVALID_RECORD, f"Invalid reported count for record batch {index}: {count}."
        )
    if count != header.last_offset_delta + 1:
        raise ApiError(
            ErrorCode.INVALID_RECORD,
            f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of "
            f"records {count} in batch {index}.",
        )
    if header.compression not in compression.NAMES:
        raise ApiError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Batch {index} names compression codec {header.compression}; Kafka defines "
            "0 (none), 1 (gzip), 2 (snappy), 3 (lz4) and 4 (zstd).",
        )
    _check_producer_fields(header, index)
    if header.log_append_time:
        raise ApiError(
            ErrorCode.INVALID_TIMESTAMP,
            f"Batch {index} has the LogAppendTime timestamp type: producers should not set "
            "it; the broker does on topics with message.timestamp.type=LogAppendTime.",
        )
    max_message_bytes = settings.log.max_message_bytes
    if header.size > max_message_bytes:
        # Storage checks this too; here it comes before any decompression, as in Kafka.
        raise ApiError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The batch is {header.size} bytes, larger than max.message.bytes "
            f"({max_message_bytes}).",
        )


def _check_producer_fields(header: BatchHeader, index: int) -> None:
    pid = header.producer_id
    if pid == NO_PRODUCER_ID:
        return
    if pid < NO_PRODUCER_ID:
        raise ApiError(
            ErrorCode.INVALID_RECORD,
            f"Batch {index} has producerId {pid}: a producer id is -1 (none) or an id that "
            "InitProducerId handed out.",
        )
    if header.base_sequence < 0:
        raise ApiError(
            ErrorCode.INVALID_RECORD,
            f"Invalid sequence number {header.base_sequence} in record batch {index} with "
            f"producerId {pid}.",
        )
    if header.producer_epoch < 0:
        raise ApiError(
            ErrorCode.INVALID_RECORD,
            f"Invalid producer epoch {header.producer_epoch} in record batch {index} with "
            f"producerId {pid}.",
        )


def _records_of(
    buf: bytes | bytearray, pos: int, header: BatchHeader, index: int, settings: TopicSettings
) -> tuple[bytes | bytearray, int, int]:
    """(data, start, end) of the batch's records: the request's own bytes when uncompressed,
    else its payload decompressed within the limit."""
    start, end = pos + HEADER_SIZE, pos + header.size
    codec = header.compression
    if codec == compression.NONE:
        return buf, start, end
    limit = decompression_limit(settings)
    try:
        data = compression.decompress_bounded(codec, memoryview(buf)[start:end], limit)
    except compression.DecompressedTooLargeError as exc:
        raise ApiError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"Batch {index}: {exc}; a compressed batch may expand to "
            f"{DECOMPRESSION_FACTOR} x max.message.bytes. Send smaller batches.",
        ) from None
    except compression.CorruptCompressedDataError as exc:
        raise ApiError(ErrorCode.INVALID_RECORD, f"Batch {index}: {exc}.") from None
    return data, 0, len(data)


def scan_records(
    data: bytes | bytearray, pos: int, end: int, count: int, keys_required: bool = False
) -> tuple[int, int]:
    """Walks `count` records laid out in data[pos:end], which they must fill exactly, and
    returns their smallest and largest timestampDelta. Raises MalformedRecordError.

    The one per-record loop of the produce path, so it is written for CPython's speed:
    locals only; one-byte varints decoded by table lookup and two-byte ones inline (record
    and value lengths up to 8 KiB, offset and timestamp deltas up to 8191); key and value
    lengths read off the zig-zag byte itself (odd: negative, a null); a function call only
    for longer varints and for record headers. Reads past the end of `data` surface as
    IndexError, caught once outside the loop. About 0.4-0.5 us a record on CPython 3.11,
    half what a plain varint helper per field costs (bench/produce_validation.py)."""
    zigzag = _ZIGZAG
    varint = _varint
    lowest, highest = _INT64_MAX, _INT64_MIN
    i = 0
    try:
        for i in range(count):
            b = data[pos]
            if b < 0x80:
                length = zigzag[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    length = (b & 0x7F) | (c << 7)
                    length = (length >> 1) ^ -(length & 1)
                    pos += 2
                else:
                    length, pos = varint(data, pos, 5)
            record_end = pos + length
            if length < MIN_RECORD_SIZE - 1 or record_end > end:
                raise MalformedRecordError(
                    i, f"length {length} does not fit the {end - pos} bytes left in the batch"
                )
            if data[pos] > 0x7F:  # the record's attributes, unused by Kafka
                raise MalformedRecordError(
                    i, f"attributes {data[pos]:#04x}: a record's attributes must be 0-0x7f"
                )
            b = data[pos + 1]
            if b < 0x80:
                delta = zigzag[b]
                pos += 2
            else:
                c = data[pos + 2]
                if c < 0x80:
                    delta = (b & 0x7F) | (c << 7)
                    delta = (delta >> 1) ^ -(delta & 1)
                    pos += 3
                else:
                    delta, pos = varint(data, pos + 1, 10)
            if delta < lowest:
                lowest = delta
            if delta > highest:
                highest = delta
            b = data[pos]
            if b < 0x80:
                delta = zigzag[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    delta = (b & 0x7F) | (c << 7)
                    delta = (delta >> 1) ^ -(delta & 1)
                    pos += 2
                else:
                    delta, pos = varint(data, pos, 5)
            if delta != i:
                raise MalformedRecordError(
                    i,
                    f"Invalid offset: offset delta {delta}, expected {i} (records are "
                    "numbered 0..recordCount-1 in order)",
                )
            b = data[pos]  # the key's length
            if b < 0x80:
                pos += 1
                if not b & 1:
                    pos += b >> 1
                elif keys_required:
                    raise MalformedRecordError(i, _NO_KEY)
            else:
                length, pos = varint(data, pos, 5)
                if length >= 0:
                    pos += length
                elif keys_required:
                    raise MalformedRecordError(i, _NO_KEY)
            b = data[pos]  # the value's length
            if b < 0x80:
                pos += 1
                if not b & 1:
                    pos += b >> 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    length = (b & 0x7F) | (c << 7)
                    pos += 2
                    if not length & 1:
                        pos += length >> 1
                else:
                    length, pos = varint(data, pos, 5)
                    if length > 0:
                        pos += length
            if pos + 1 != record_end or data[pos]:  # not just "no headers" to the end
                pos = _skip_headers(data, pos, record_end, i)
                if pos != record_end:
                    raise MalformedRecordError(
                        i,
                        f"its fields end {pos - record_end:+d} bytes from where its length "
                        "says it ends",
                    )
            else:
                pos = record_end
    except IndexError:
        raise MalformedRecordError(i, "it runs past the end of the batch") from None
    except MalformedRecordError as exc:
        if exc.index < 0:  # from _varint, which does not know the record
            exc.index = i
        raise
    if pos != end:
        raise MalformedRecordError(
            count - 1, f"{end - pos} bytes follow the last of the batch's {count} records"
        )
    if lowest < _INT64_MIN or highest > _INT64_MAX:
        raise MalformedRecordError(0, "a timestamp delta is out of the int64 range")
    return lowest, highest


_NO_KEY = "a compacted topic cannot accept a record without a key"


def _varint(data: bytes | bytearray, pos: int, max_bytes: int) -> tuple[int, int]:
    """A zig-zag varint of at most `max_bytes` bytes (5 for int32 fields, 10 for int64)."""
    result = 0
    shift = 0
    for at in range(pos, pos + max_bytes):
        b = data[at]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), at + 1
        shift += 7
    raise MalformedRecordError(-1, f"a varint is longer than {max_bytes} bytes")


def _skip_headers(data: bytes | bytearray, pos: int, record_end: int, index: int) -> int:
    count, pos = _varint(data, pos, 5)
    if count < 0 or count > record_end - pos:
        raise MalformedRecordError(index, f"invalid number of record headers {count}")
    for h in range(count):
        length, pos = _varint(data, pos, 5)
        if length < 0:
            raise MalformedRecordError(index, f"header {h} has a negative key length {length}")
        length, pos = _varint(data, pos + length, 5)
        if length > 0:
            pos += length
        if pos > record_end:
            raise MalformedRecordError(index, f"header {h} runs past the record's end")
    return pos


def _check_timestamps(
    buf: bytes | bytearray,
    pos: int,
    header: BatchHeader,
    index: int,
    lowest: int,
    highest: int,
    settings: TopicSettings,
    now_ms: int,
) -> int:
    base = header.base_timestamp
    if base + lowest < _INT64_MIN or base + highest > _INT64_MAX:
        raise ApiError(
            ErrorCode.INVALID_RECORD, f"Batch {index} has record timestamps out of the int64 range."
        )
    earliest = now_ms - settings.timestamp_before_max_ms
    latest = now_ms + settings.timestamp_after_max_ms
    if base + lowest < earliest or base + highest > latest:
        _find_timestamp_out_of_range(buf, pos, index, earliest, latest, settings, now_ms)
    return max(NO_TIMESTAMP, base + highest)


def _find_timestamp_out_of_range(
    buf: bytes | bytearray,
    pos: int,
    index: int,
    earliest: int,
    latest: int,
    settings: TopicSettings,
    now_ms: int,
) -> None:
    """The slow path, taken only when the smallest or largest timestamp is out of range:
    which record is it (a record without a timestamp, -1, is never out of range)?"""
    _, records = decode_batch(buf, pos)
    for i, record in enumerate(records):
        timestamp = record.timestamp
        if timestamp != NO_TIMESTAMP and not earliest <= timestamp <= latest:
            raise ApiError(
                ErrorCode.INVALID_TIMESTAMP,
                f"Timestamp {timestamp} of record {i} of batch {index} is out of the range "
                f"message.timestamp.before.max.ms={settings.timestamp_before_max_ms} / "
                f"message.timestamp.after.max.ms={settings.timestamp_after_max_ms} allows "
                f"around the broker's time {now_ms}: [{earliest}, {latest}].",
            )
