"""Bounded decompression (strom_api.compression.decompress_bounded): a few kilobytes that
expand past the caller's limit are refused without the expansion ever being held."""

from __future__ import annotations

import cramjam
import pytest

from strom_api import compression


def test_decompress_bounded_refuses_a_bomb_of_every_codec():
    zeros = bytes(1 << 20)
    for codec in (compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD):
        packed = compression.compress(codec, zeros)
        assert compression.decompress_bounded(codec, packed, len(zeros)) == zeros
        with pytest.raises(compression.DecompressedTooLargeError):
            compression.decompress_bounded(codec, packed, len(zeros) - 1)
    # Raw (unframed) snappy, as other clients send it, states its length too.
    raw = bytes(cramjam.snappy.compress_raw(zeros))
    with pytest.raises(compression.DecompressedTooLargeError):
        compression.decompress_bounded(compression.SNAPPY, raw, 1000)


def test_decompress_bounded_tells_corrupt_and_unknown_codecs_apart():
    packed = compression.compress(compression.ZSTD, b"x" * 1000)
    with pytest.raises(compression.CorruptCompressedDataError):
        compression.decompress_bounded(compression.ZSTD, packed[:-4], 1 << 20)
    with pytest.raises(compression.UnsupportedCompressionError):
        compression.decompress_bounded(7, packed, 1 << 20)
    assert compression.decompress_bounded(compression.NONE, b"abc", 3) == b"abc"
    with pytest.raises(compression.DecompressedTooLargeError):
        compression.decompress_bounded(compression.NONE, b"abcd", 3)
