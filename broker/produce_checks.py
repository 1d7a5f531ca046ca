"""What a leader checks in a producer's batches before the log takes them, beyond the log's
own validation (magic, CRC, sizes, offsets: storage.log): control and transactional batches,
timestamps against message.timestamp.*.max.ms, and LogAppendTime stamping. Per batch, by
header only: records are never decoded (a batch's first and largest timestamps stand for
its records; Kafka checks each record, which would cost a decode per produce)."""

from __future__ import annotations

from broker.topic_settings import TopicSettings
from metadata.errors import ApiError
from strom_api.record_batch import (
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    InvalidRecordBatchError,
    set_log_append_time,
    validate_batch,
)

NO_TIMESTAMP = -1


def producer_batches(
    records: bytes, settings: TopicSettings, now_ms: int
) -> tuple[bytes | bytearray, list[BatchHeader]]:
    """The bytes to append (stamped with the append time on a LogAppendTime topic) and the
    header of each batch, every batch's extent and CRC checked: nothing about a batch is
    believed (its producer sequence least of all) before its CRC is. Raises ApiError with
    Kafka's error name."""
    headers = []
    pos = 0
    try:
        while pos < len(records):
            header = validate_batch(records, pos)
            headers.append(header)
            pos += header.size
    except InvalidRecordBatchError as exc:
        raise ApiError("CORRUPT_MESSAGE", str(exc)) from None
    if not headers:
        raise ApiError("INVALID_RECORD", "The produce request holds no record batch.")
    for header in headers:
        if header.is_control:
            raise ApiError("INVALID_RECORD", "Clients are not allowed to write control records.")
        if header.is_transactional:
            raise ApiError(
                "INVALID_RECORD",
                "Transactional batches are not supported: Strom has idempotent producers, "
                "not transactions.",
            )
    if settings.log_append_time:
        stamped = bytearray(records)
        pos = 0
        for header in headers:
            set_log_append_time(stamped, pos, now_ms)
            pos += header.size
        return stamped, [
            h._replace(
                attributes=h.attributes | TIMESTAMP_TYPE_BIT,
                max_timestamp=now_ms,
                crc=_crc_at(stamped, p),
            )
            for h, p in zip(headers, _positions(headers), strict=True)
        ]
    for header in headers:
        _check_timestamps(header, settings, now_ms)
    return records, headers


def _positions(headers: list[BatchHeader]) -> list[int]:
    out, pos = [], 0
    for header in headers:
        out.append(pos)
        pos += header.size
    return out


def _crc_at(buf: bytearray, pos: int) -> int:
    return int.from_bytes(buf[pos + 17 : pos + 21], "big")


def _check_timestamps(header: BatchHeader, settings: TopicSettings, now_ms: int) -> None:
    earliest = now_ms - settings.timestamp_before_max_ms
    latest = now_ms + settings.timestamp_after_max_ms
    for timestamp in (header.base_timestamp, header.max_timestamp):
        if timestamp == NO_TIMESTAMP:
            continue  # the producer gave none
        if timestamp < earliest or timestamp > latest:
            raise ApiError(
                "INVALID_TIMESTAMP",
                f"Timestamp {timestamp} of the batch at offset {header.base_offset} is out of "
                f"the range message.timestamp.before.max.ms="
                f"{settings.timestamp_before_max_ms} / message.timestamp.after.max.ms="
                f"{settings.timestamp_after_max_ms} allows around the broker's time {now_ms}.",
            )
