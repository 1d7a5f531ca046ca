"""What a leader checks in a producer's batches before the log takes them, beyond the log's
own validation (sizes, offsets: storage.log): each batch's magic, extent and CRC here, then
its header and records in broker.log_validator (Kafka's LogValidator), then the broker's
own timestamps: LogAppendTime stamping, or on CreateTime topics the batch's maxTimestamp set
to its records' largest, as Kafka does. Nothing about a batch is believed (its producer
sequence least of all) before its CRC is, and nothing is written before every batch of the
request passed."""

from __future__ import annotations

from broker import log_validator
from broker.topic_settings import TopicSettings
from metadata.errors import ApiError
from strom_api.record_batch import (
    MAGIC,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    InvalidRecordBatchError,
    set_log_append_time,
    set_max_timestamp,
    validate_batch,
)

_MAGIC_AT = 16


# The bytes to append and each batch's header as appended.
PreparedBatches = tuple[bytes | bytearray, list[BatchHeader]]


def producer_batches(records: bytes, settings: TopicSettings, now_ms: int) -> PreparedBatches:
    """The bytes to append (stamped with the append time on a LogAppendTime topic, or with
    corrected maxTimestamps) and the header of each batch as appended. Raises ApiError with
    Kafka's error name."""
    headers = _checked_headers(records)
    positions = _positions(headers)
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


def _checked_headers(records: bytes) -> list[BatchHeader]:
    headers: list[BatchHeader] = []
    pos = 0
    try:
        while pos < len(records):
            if len(records) - pos > _MAGIC_AT and records[pos + _MAGIC_AT] != MAGIC:
                # Kafka's ProduceRequest.validateRecords, before any CRC: INVALID_RECORD.
                raise ApiError(
                    "INVALID_RECORD",
                    f"Batch {len(headers)} has magic {records[pos + _MAGIC_AT]}; produce "
                    "requests may only contain record batches with magic version 2.",
                )
            header = validate_batch(records, pos)
            headers.append(header)
            pos += header.size
    except InvalidRecordBatchError as exc:
        raise ApiError("CORRUPT_MESSAGE", str(exc)) from None
    if not headers:
        raise ApiError("INVALID_RECORD", "The produce request holds no record batch.")
    return headers


def _positions(headers: list[BatchHeader]) -> list[int]:
    out, pos = [], 0
    for header in headers:
        out.append(pos)
        pos += header.size
    return out


def _crc_at(buf: bytearray, pos: int) -> int:
    return int.from_bytes(buf[pos + 17 : pos + 21], "big")
