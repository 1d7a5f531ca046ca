"""The storage engine: partition logs as segment files of Kafka RecordBatch v2 bytes.

    log = Log.open(directory, LogConfig.from_properties({"segment.bytes": 1 << 26}))
    info = log.append(batch_bytes, leader_epoch=3)       # leader: assigns offsets
    data = log.read(offset, max_bytes=1 << 20, max_offset=log.high_watermark)
    log.flush(); log.close()

LogManager owns every log of a node and its checkpoints; cleaner.clean compacts;
meta_properties checks which cluster and node a directory belongs to.
"""

from storage.cleaner import CleanResult, clean
from storage.clock import Clock, ManualClock, SystemClock
from storage.config import LogConfig, broker_defaults
from storage.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    LogDirError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from storage.log import AppendInfo, LoadInfo, Log
from storage.log_manager import LogManager

__all__ = [
    "AppendInfo",
    "CleanResult",
    "Clock",
    "CorruptRecordError",
    "InvalidConfigError",
    "InvalidRecordError",
    "InvalidTopicError",
    "LoadInfo",
    "Log",
    "LogConfig",
    "LogDirError",
    "LogManager",
    "ManualClock",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "StorageError",
    "SystemClock",
    "broker_defaults",
    "clean",
]
