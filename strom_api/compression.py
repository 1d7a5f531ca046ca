"""Whole-batch compression codecs as Kafka's producers write them (attributes bits 0-2).

gzip, lz4 (frame format) and zstd are the standard formats. Kafka's Java producer writes
snappy in xerial's framing (a 16-byte header, then length-prefixed raw blocks); readers must
also accept plain raw snappy, which other clients send. The codecs themselves come from
cramjam's C implementations; this module only maps Kafka's codec ids and the snappy framing.
"""

from __future__ import annotations

import struct

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


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
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


def _xerial_snappy_compress(data: bytes) -> bytes:
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
