"""Whole-batch compression codecs as Kafka's producers write them (attributes bits 0-2).

gzip, lz4 (frame format) and zstd are the standard formats. Kafka's Java producer writes
snappy in xerial's framing (a 16-byte header, then length-prefixed raw blocks); readers must
also accept plain raw snappy, which other clients send. The codecs themselves come from
cramjam's C implementations; this module only maps Kafka's codec ids and the snappy framing.
"""

from __future__ import annotations

import mmap
import struct
import threading

import cramjam

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {name: codec for codec, name in NAMES.items()}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # the block size of Kafka's SnappyOutputStream
_BLOCK_LENGTH = struct.Struct(">i")


class UnsupportedCompressionError(ValueError):
    """A batch names a compression codec Kafka does not define."""


class CorruptCompressedDataError(ValueError):
    """The compressed bytes do not decompress with the batch's codec."""


class DecompressedTooLargeError(ValueError):
    """The compressed bytes decompress to more than the caller's limit (a decompression bomb,
    or a batch too large to take)."""


def compress(codec: int, data: bytes | memoryview) -> bytes:
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _xerial_snappy_compress(data)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        return _decompress(codec, data)
    except (cramjam.DecompressionError, struct.error, ValueError) as exc:
        if isinstance(exc, UnsupportedCompressionError):
            raise
        name = NAMES.get(codec, str(codec))
        raise CorruptCompressedDataError(f"{name} data does not decompress: {exc}") from exc


def decompress_bounded(codec: int, data: bytes | memoryview, limit: int) -> bytes:
    """`decompress`, but never producing (or holding in memory) more than `limit` bytes: a
    few kilobytes of zstd can expand to gigabytes. Raises DecompressedTooLargeError past the
    limit, CorruptCompressedDataError or UnsupportedCompressionError as `decompress` does.

    gzip, lz4 and zstd decompress into a scratch buffer of `limit` + 1 bytes, so the codec
    stops as soon as the output would pass the limit. The scratch buffer is an anonymous
    mmap kept per thread: the kernel hands out its zero pages lazily, so only the bytes a
    batch really fills are ever touched, and it is not reallocated for every batch. Snappy
    blocks state their decompressed length up front: those lengths are summed first."""
    try:
        if codec == NONE:
            if len(data) > limit:
                raise DecompressedTooLargeError(_too_large(codec, limit))
            return bytes(data)
        if codec == SNAPPY:
            if _snappy_length(bytes(data)) > limit:
                raise DecompressedTooLargeError(_too_large(codec, limit))
            return _decompress(codec, data)
        if codec not in (GZIP, LZ4, ZSTD):
            raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
        return _decompress_into_scratch(codec, data, limit)
    except (cramjam.DecompressionError, struct.error) as exc:
        raise CorruptCompressedDataError(f"{NAMES[codec]} data does not decompress: {exc}") from exc


_MODULES = {GZIP: cramjam.gzip, LZ4: cramjam.lz4, ZSTD: cramjam.zstd}
# The message of Rust's io::ErrorKind::WriteZero, which cramjam reports when the output
# buffer is full: the data would decompress to more than the scratch buffer holds.
_BUFFER_FULL = "failed to write whole buffer"
# Scratch pages beyond this are given back to the kernel after use (a rare, large batch
# should not keep its memory for good).
_SCRATCH_KEEP = 4 << 20
_scratch = threading.local()


def _decompress_into_scratch(codec: int, data: bytes | memoryview, limit: int) -> bytes:
    buf: mmap.mmap | None = getattr(_scratch, "buf", None)
    if buf is None or len(buf) < limit + 1:
        if buf is not None:
            buf.close()
        buf = _scratch.buf = mmap.mmap(-1, limit + 1)
    try:
        written = _MODULES[codec].decompress_into(data, buf)
    except cramjam.DecompressionError as exc:
        if _BUFFER_FULL in str(exc):
            _release(buf, len(buf))
            raise DecompressedTooLargeError(_too_large(codec, limit)) from None
        raise
    if written > limit:
        _release(buf, written)
        raise DecompressedTooLargeError(_too_large(codec, limit))
    out = buf[:written]
    _release(buf, written)
    return out


def _release(buf: mmap.mmap, used: int) -> None:
    if used > _SCRATCH_KEEP:
        buf.madvise(mmap.MADV_DONTNEED)


def _too_large(codec: int, limit: int) -> str:
    return f"{NAMES[codec]} data decompresses to more than {limit} bytes"


def _snappy_length(data: bytes) -> int:
    """Decompressed length of raw or xerial-framed snappy, from the blocks' own headers."""
    if not data.startswith(_XERIAL_MAGIC):
        return int(cramjam.snappy.decompress_raw_len(data))
    total = 0
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CorruptCompressedDataError(
                "snappy data does not decompress: a xerial block runs past the end of the data"
            )
        total += int(cramjam.snappy.decompress_raw_len(data[pos : pos + length]))
        pos += length
    return total


def _decompress(codec: int, data: bytes | memoryview) -> bytes:
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if codec == SNAPPY:
        return _snappy_decompress(bytes(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def _xerial_snappy_compress(data: bytes | memoryview) -> bytes:
    parts = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    pos = len(_XERIAL_HEADER)
    out = []
    while pos < len(data):
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise ValueError("xerial snappy block runs past the end of the data")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    return b"".join(out)
