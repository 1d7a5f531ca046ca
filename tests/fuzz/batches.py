"""RecordBatch v2 bytes for Produce: valid batches, batches damaged after the header with the
CRC recomputed (so only record-level validation can refuse them), and headers that lie
about their counts, offsets or codec (again with a valid CRC).

A broker that checks only the header and the CRC stores all of these; every consumer then
fails at that offset (issue 16, "poison batches")."""

from __future__ import annotations

import random
import struct

from strom_api import compression
from strom_api.record_batch import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, checksum
from strom_api.records import Record, encode_batch

_ATTRIBUTES = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# Field offsets in the header (see strom_api/record_batch.py).
BATCH_LENGTH, MAGIC, ATTRIBUTES = 8, 16, 21
LAST_OFFSET_DELTA, BASE_TIMESTAMP, MAX_TIMESTAMP = 23, 27, 35
PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE, RECORD_COUNT = 43, 51, 53, 57
ABSURD_I32 = (-(2**31), -1, 0, 2**31 - 1, 2**16, 5)


def valid_batch(rng: random.Random, count: int | None = None, codec: int | None = None) -> bytes:
    n = rng.randint(1, 5) if count is None else count
    now = 1_700_000_000_000
    records = [
        Record(
            offset=i,
            timestamp=now + i,
            key=rng.choice((None, b"", b"k%d" % i)),
            value=rng.choice((None, b"", rng.randbytes(rng.randint(1, 64)))),
            headers=rng.choice(((), (("h", b"v"),), (("", None),))),
        )
        for i in range(n)
    ]
    if codec is None:
        codec = rng.choice((compression.NONE, compression.NONE, compression.GZIP))
    return encode_batch(records, compression_codec=codec)


def reseal(batch: bytearray, fix_length: bool = True) -> bytes:
    """Recomputes the CRC (and, unless told not to, batchLength) over whatever is there."""
    if fix_length and len(batch) >= LOG_OVERHEAD:
        _I32.pack_into(batch, BATCH_LENGTH, len(batch) - LOG_OVERHEAD)
    if len(batch) >= CRC_START:
        batch[17:21] = checksum(batch).to_bytes(4, "big")
    return bytes(batch)


def damaged_records(rng: random.Random) -> bytes:
    """A valid batch whose record bytes are damaged; header and CRC consistent."""
    out = bytearray(valid_batch(rng, codec=compression.NONE))
    body = len(out) - HEADER_SIZE
    roll = rng.random()
    if roll < 0.25:
        out[HEADER_SIZE:] = rng.randbytes(rng.choice((body, 200, 1)))
    elif roll < 0.45:
        del out[HEADER_SIZE + rng.randrange(max(1, body)) :]
    elif roll < 0.65:
        out += rng.randbytes(rng.randint(1, 50))
    else:
        for _ in range(rng.randint(1, 4)):
            i = HEADER_SIZE + rng.randrange(max(1, body))
            if i < len(out):
                out[i] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)))
    return reseal(out)


def absurd_header(rng: random.Random) -> bytes:
    """A batch whose header lies (counts, deltas, codec, magic, timestamps), CRC valid."""
    out = bytearray(valid_batch(rng))
    for _ in range(rng.randint(1, 2)):
        field = rng.choice(
            ("count", "count", "delta", "codec", "magic", "timestamp", "producer", "empty")
        )
        if field == "count":
            _I32.pack_into(out, RECORD_COUNT, rng.choice(ABSURD_I32))
        elif field == "delta":
            _I32.pack_into(out, LAST_OFFSET_DELTA, rng.choice(ABSURD_I32))
        elif field == "codec":
            (attributes,) = _ATTRIBUTES.unpack_from(out, ATTRIBUTES)
            bits = rng.choice((5, 6, 7, 0x20, 0x10, 0x40, -1))
            _ATTRIBUTES.pack_into(
                out, ATTRIBUTES, bits if bits < 0 or bits > 7 else (attributes & ~7) | bits
            )
        elif field == "magic":
            out[MAGIC] = rng.choice((0, 1, 3, 255))
        elif field == "timestamp":
            _I64.pack_into(
                out,
                rng.choice((BASE_TIMESTAMP, MAX_TIMESTAMP)),
                rng.choice((-(2**63), -2, 2**63 - 1, 0)),
            )
        elif field == "producer":
            _I64.pack_into(out, PRODUCER_ID, rng.choice((0, 2**63 - 1, -2)))
            _I32.pack_into(out, BASE_SEQUENCE, rng.choice(ABSURD_I32))
        else:
            del out[HEADER_SIZE:]  # a header and no records, claiming some
            _I32.pack_into(out, RECORD_COUNT, rng.choice((1, 2**31 - 1)))
            _I32.pack_into(out, LAST_OFFSET_DELTA, rng.choice((0, 2**31 - 1)))
    return reseal(out, fix_length=rng.random() < 0.9)


def records_value(rng: random.Random) -> bytes:
    """The `records` bytes of one produced partition: one or more batches, some poisoned."""
    roll = rng.random()
    if roll < 0.15:
        return valid_batch(rng)
    if roll < 0.5:
        first = damaged_records(rng)
    elif roll < 0.85:
        first = absurd_header(rng)
    elif roll < 0.93:
        first = b"".join(valid_batch(rng) for _ in range(rng.randint(2, 4)))
    else:
        first = valid_batch(rng) + rng.randbytes(rng.randint(1, 70))  # a torn second batch
    if rng.random() < 0.2:
        first = valid_batch(rng) + first  # the bad batch after a good one
    return first


assert HEADER.size == HEADER_SIZE
