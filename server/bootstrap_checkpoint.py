"""The bootstrap checkpoint: metadata records a new cluster starts with (Kafka's
`bootstrap.checkpoint`, written by `kafka-storage.sh format`).

    <metadata.log.dir>/bootstrap.checkpoint

Its format is a metadata snapshot's (raft/snapshot_files.py: RecordBatch v2, CRC-32C
checked, a header and a footer control batch), each record one MetadataRecord. Today it
holds the users of `strom storage format --add-scram` (UserScramCredentialRecords, never a
password). `strom storage format` writes it into every metadata log directory it formats;
only controllers read it. The first active controller of an empty metadata log appends its
records, once, in the same batch as whatever it writes first (metadata/controller.py); a
controller that finds metadata records in the log (a snapshot, or entries another
controller wrote) ignores its file, so a cluster whose controllers were all formatted with
the same --add-scram gets the records once. Kafka does the same: the bootstrap records go
into the log only when the log is empty.

Not thread-safe; written once by format and read once at a controller's start.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from google.protobuf.message import Message

from metadata.records import MetadataRecordError, decode, encode
from raft.messages import SnapshotId
from raft.snapshot_files import CorruptSnapshotError, decode_snapshot, encode_snapshot
from storage.errors import StorageError
from storage.file_io import atomic_write
from strom_api.error_codes import ErrorCode

FILE_NAME = "bootstrap.checkpoint"
_ID = SnapshotId(0, 0)  # a bootstrap file stands before the log's first entry


class BootstrapError(StorageError):
    """A bootstrap checkpoint that cannot be read (Kafka: CORRUPT_MESSAGE)."""

    error_name = ErrorCode.CORRUPT_MESSAGE


def path(metadata_log_dir: str) -> str:
    return os.path.join(metadata_log_dir, FILE_NAME)


def write(metadata_log_dir: str, records: Sequence[Message]) -> None:
    """Writes the file durably (a whole file or none)."""
    data = encode_snapshot(_ID, [encode(r) for r in records])
    atomic_write(path(metadata_log_dir), data)


def read(metadata_log_dir: str) -> list[Message]:
    """The file's records; none when there is no file (a directory formatted before Strom
    wrote one). A file that does not decode stops the controller: starting without its
    users would lock the administrators out."""
    try:
        with open(path(metadata_log_dir), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise BootstrapError(f"cannot read {path(metadata_log_dir)}: {exc.strerror}") from None
    try:
        return [decode(r) for r in decode_snapshot(data)]
    except (CorruptSnapshotError, MetadataRecordError) as exc:
        raise BootstrapError(f"{path(metadata_log_dir)} is corrupt: {exc}") from None
