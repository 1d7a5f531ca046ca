"""A batch's records read by aiokafka's RecordBatch v2 reader, compiled in C (Cython), when
aiokafka is installed with its extensions (its wheels carry them).

Why: a consumer decodes every record it reads, and in Python that is the largest cost per
record it has: for 1 KiB records about 1.6 us each against 0.55 us here, record objects
included (`python bench/bench_record_codec.py` prints both). strom_api/records.py's
decode_batch calls this and, whenever it returns None, reads the batch with its own Python
decoder, whose answer stands: the C reader only ever makes a clean read faster.

Only `bytes`, or a memoryview of part of a bytes object, go in (records.py sees to it): the
reader checks bounds before every field but not before a header key's length varint, and a
bytes object always ends in a NUL byte, which stops such a varint at its end (the bounds check
then fails and Python reads the batch).
"""

from __future__ import annotations

from typing import Any

_UNSET: Any = object()
_reader: Any = _UNSET


def _load() -> Any:
    try:
        from aiokafka.record.default_records import DefaultRecordBatch  # type: ignore[import-untyped]
    except ImportError:
        return None
    if not DefaultRecordBatch.__module__.startswith("aiokafka.record._crecords"):
        return None  # aiokafka's own Python reader (AIOKAFKA_NO_EXTENSIONS): slower than ours
    return DefaultRecordBatch


def available() -> bool:
    global _reader
    if _reader is _UNSET:
        _reader = _load()
    return _reader is not None


def read(batch: bytes | memoryview) -> list[Any] | None:
    """The records of `batch` (one whole batch, its CRC already checked) as aiokafka's
    record objects (offset, timestamp, key, value and headers, a list); None when the C
    reader is not installed or did not read the batch cleanly (corrupt, a header name not
    UTF-8, ...)."""
    if not available():
        return None
    try:
        return list(_reader(batch))
    except Exception:  # noqa: BLE001 - any failure: the Python decoder reads it and says why
        return None
