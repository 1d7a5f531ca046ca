"""What a leader checks in a producer's batches before the log takes them, beyond the log's
own validation (sizes, offsets: storage.log): each batch's magic, extent and CRC here, then
its header and records in broker.log_validator (Kafka's LogValidator), then the broker's
own timestamps: LogAppendTime stamping, or on CreateTime topics the batch's maxTimestamp set
to its records' largest, as Kafka does. Nothing about a batch is believed (its producer
sequence least of all) before its CRC is, and nothing is written before every batch of the
request passed.

compression.type, as Kafka's LogValidator applies it: `producer` (the default) stores the
producer's bytes as they came (zero copy); a codec, or `uncompressed`, recompresses each
batch in another codec: its records section (decompressed once, for validation too) is
compressed anew and the header rewritten with the codec's bits, the new length and a new
CRC-32C. The records themselves, their offset deltas and timestamps, and the batch's
producer id, epoch and sequence stay as the producer wrote them. A batch already in the
topic's codec is kept as it is. Kafka checks max.message.bytes again after recompression
(a batch recompressed to `uncompressed` may grow past it): MESSAGE_TOO_LARGE."""

from __future__ import annotations

from broker import log_validator
from broker.topic_settings import TopicSettings
from metadata.errors import ApiError
from strom_api import compression
from strom_api.error_codes import ErrorCode
from strom_api.record_batch import (
    COMPRESSION_MASK,
    MAGIC,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    InvalidRecordBatchError,
    parse_header,
    rebuild_batch,
    set_log_append_time,
    set_max_timestamp,
    validate_batch,
)

_MAGIC_AT = 16


def few_plain_records(records: bytes, limit: int) -> bool:
    """Whether the request's batches are all uncompressed and hold at most `limit` records
    in all, read from their headers only (at most `limit` + 1 of them: every batch holds at
    least one record, or validation refuses it). A header that does not parse or a batch
    that runs past the end is not judged here: False, and validation says what is wrong."""
    pos, total, end = 0, 0, len(records)
    while pos < end:
        try:
            header = parse_header(records, pos)
        except InvalidRecordBatchError:
            return False
        if header.compression:
            return False
        total += max(header.record_count, 1)
        if total > limit:
            return False
        pos += header.size
    return pos == end


# The bytes to append and each batch's header as appended.
PreparedBatches = tuple[bytes | bytearray, list[BatchHeader]]


def producer_batches(records: bytes, settings: TopicSettings, now_ms: int) -> PreparedBatches:
    """The bytes to append (stamped with the append time on a LogAppendTime topic, or with
    corrected maxTimestamps) and the header of each batch as appended. Raises ApiError with
    Kafka's error name."""
    headers = checked_headers(records)
    positions = _positions(headers)
    target = settings.compression
    if target is not None and any(h.compression != target for h in headers):
        return _recompressed(records, headers, positions, target, settings, now_ms)
    max_timestamps = [
        log_validator.check_batch(records, pos, header, index, settings, now_ms)
        for index, (pos, header) in enumerate(zip(positions, headers, strict=True))
    ]
    if settings.log_append_time:
        stamped = bytearray(records)
        for pos in positions:
            set_log_append_time(stamped, pos, now_ms)
        return stamped, [
            h._replace(
                attributes=h.attributes | TIMESTAMP_TYPE_BIT,
                max_timestamp=now_ms,
                crc=_crc_at(stamped, p),
            )
            for h, p in zip(headers, positions, strict=True)
        ]
    if all(h.max_timestamp == ts for h, ts in zip(headers, max_timestamps, strict=True)):
        return records, headers
    # A producer's maxTimestamp that is not its records' largest: Kafka writes the right one
    # over it (the time index and ListOffsets by time read it). Rare, so a copy is fine.
    fixed = bytearray(records)
    out = []
    for header, pos, timestamp in zip(headers, positions, max_timestamps, strict=True):
        if header.max_timestamp != timestamp:
            set_max_timestamp(fixed, pos, timestamp)
            header = header._replace(max_timestamp=timestamp, crc=_crc_at(fixed, pos))
        out.append(header)
    return fixed, out


def _recompressed(
    records: bytes,
    headers: list[BatchHeader],
    positions: list[int],
    target: int,
    settings: TopicSettings,
    now_ms: int,
) -> PreparedBatches:
    """Every batch validated, stamped as producer_batches stamps it, and those not in the
    `target` codec recompressed into it (see the module's comment)."""
    out = bytearray()
    out_headers = []
    for index, (pos, header) in enumerate(zip(positions, headers, strict=True)):
        timestamp, section = log_validator.check_batch_records(
            records, pos, header, index, settings, now_ms
        )
        attributes = header.attributes
        if settings.log_append_time:
            timestamp = now_ms
            attributes |= TIMESTAMP_TYPE_BIT
        if header.compression == target:
            batch = bytearray(records[pos : pos + header.size])
            if settings.log_append_time:
                set_log_append_time(batch, 0, now_ms)
            elif header.max_timestamp != timestamp:
                set_max_timestamp(batch, 0, timestamp)
        else:
            attributes = (attributes & ~COMPRESSION_MASK) | target
            batch = rebuild_batch(
                header, attributes, timestamp, compression.compress(target, section)
            )
        if len(batch) > settings.log.max_message_bytes:
            raise ApiError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"Batch {index} is {len(batch)} bytes once recompressed to "
                f"{_codec_name(target)} (compression.type), larger than max.message.bytes "
                f"({settings.log.max_message_bytes}).",
            )
        out += batch
        out_headers.append(parse_header(batch))
    return out, out_headers


def _codec_name(codec: int) -> str:
    return "uncompressed" if codec == compression.NONE else compression.NAMES[codec]


def checked_headers(records: bytes) -> list[BatchHeader]:
    headers: list[BatchHeader] = []
    pos = 0
    try:
        while pos < len(records):
            if len(records) - pos > _MAGIC_AT and records[pos + _MAGIC_AT] != MAGIC:
                # Kafka's ProduceRequest.validateRecords, before any CRC: INVALID_RECORD.
                raise ApiError(
                    ErrorCode.INVALID_RECORD,
                    f"Batch {len(headers)} has magic {records[pos + _MAGIC_AT]}; produce "
                    "requests may only contain record batches with magic version 2.",
                )
            header = validate_batch(records, pos)
            headers.append(header)
            pos += header.size
    except InvalidRecordBatchError as exc:
        raise ApiError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if not headers:
        raise ApiError(ErrorCode.INVALID_RECORD, "The produce request holds no record batch.")
    return headers


def _positions(headers: list[BatchHeader]) -> list[int]:
    out, pos = [], 0
    for header in headers:
        out.append(pos)
        pos += header.size
    return out


def _crc_at(buf: bytearray, pos: int) -> int:
    return int.from_bytes(buf[pos + 17 : pos + 21], "big")
