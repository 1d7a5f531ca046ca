"""The storage engine's exception family; each carries the Kafka error name servicers send."""

from __future__ import annotations

from strom_api.error_codes import ErrorCode


class StorageError(Exception):
    """Base of every error the storage engine raises on purpose."""

    error_name: ErrorCode = ErrorCode.KAFKA_STORAGE_ERROR


class CorruptRecordError(StorageError):
    """Bytes that are not valid RecordBatch v2: bad CRC, magic, length or record layout."""

    error_name = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(StorageError):
    """Well-formed batches that the log cannot take, e.g. offsets that go backwards."""

    error_name = ErrorCode.INVALID_RECORD


class OffsetOutOfRangeError(StorageError):
    """An offset below the log start offset or above the log end offset."""

    error_name = ErrorCode.OFFSET_OUT_OF_RANGE


class OffsetInvariantError(StorageError):
    """The log's offsets broke log start <= high watermark <= log end (or the recovery
    point passed the log end): a bug, refused where it happens rather than clamped into
    place (Kafka's IllegalStateException, answered as UNKNOWN_SERVER_ERROR)."""

    error_name = ErrorCode.UNKNOWN_SERVER_ERROR


class RecordTooLargeError(StorageError):
    """A batch larger than `max.message.bytes` (or than a segment can ever hold)."""

    error_name = ErrorCode.MESSAGE_TOO_LARGE


class InvalidConfigError(StorageError):
    """An unknown config name, or a value of the wrong type or range."""

    error_name = ErrorCode.INVALID_CONFIG


class LogDirError(StorageError):
    """A log directory that is unformatted, of another cluster or node, or inconsistent."""

    error_name = ErrorCode.KAFKA_STORAGE_ERROR


class InvalidTopicError(StorageError):
    """A topic name Kafka would not accept, or a negative partition."""

    error_name = ErrorCode.INVALID_TOPIC_EXCEPTION


class KafkaStorageError(StorageError):
    """An I/O error (OSError) in a log directory: the directory is now offline, and every
    log in it refuses work until the broker restarts (Kafka's KafkaStorageException)."""

    error_name = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, message: str, log_dir: str) -> None:
        super().__init__(message)
        self.log_dir = log_dir
