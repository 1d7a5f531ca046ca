"""RecordBatch v2 codec (strom_api.record_batch + strom_api.records).

Proves that:
- encode_batch/decode_batch round-trip any records (null or byte keys/values, headers, any
  timestamps, every compression codec, producer fields, CreateTime and LogAppendTime);
- the bytes agree with an independent implementation (kafka-python's DefaultRecordBatch reads
  ours and validates the CRC; its DefaultRecordBatchBuilder writes bytes that ours decodes);
- a batch assembled by hand from Kafka's documented layout decodes to the expected records;
- validation rejects every corruption it can see with InvalidRecordBatchError and nothing
  else (flipped bits in the CRC-covered part, bad magic, truncation, oversized length), and
  the record decoder never lets another exception escape even when a corrupt body carries a
  matching CRC (as a buggy producer's batch would);
- stamp/stamped_prefix rewrite baseOffset and the leader epoch without breaking the CRC.
"""

from __future__ import annotations

import gzip
import struct
import warnings

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():  # kafka-python's import warns about importlib.resources
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from strom_api import compression
from strom_api.record_batch import (
    CRC_START,
    HEADER_SIZE,
    InvalidRecordBatchError,
    iter_batches,
    parse_header,
    peek_offset_and_size,
    stamp,
    stamped_prefix,
    validate_batch,
)
from strom_api.records import Record, decode_batch, decode_batches, encode_batch

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
# What kafka-python can (de)compress here depends on optional packages (lz4, python-snappy,
# zstandard); codecs it cannot handle are skipped in the oracle tests, never faked.
ORACLE_HAS = {
    compression.NONE: True,
    compression.GZIP: kafka_codec.has_gzip(),
    compression.SNAPPY: kafka_codec.has_snappy(),
    compression.LZ4: kafka_codec.has_lz4(),
    compression.ZSTD: kafka_codec.has_zstd(),
}

# --- strategies ----------------------------------------------------------------------------

timestamps = st.one_of(st.just(-1), st.integers(0, 2**45))
blobs = st.one_of(st.none(), st.binary(max_size=64))
header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3
).map(tuple)


@st.composite
def record_lists(draw, max_records=12, gaps=True):
    """Records with rising offsets from 0 (gaps allowed, as after compaction)."""
    n = draw(st.integers(1, max_records))
    offsets, offset = [], draw(st.integers(0, 2**40))
    for _ in range(n):
        offsets.append(offset)
        offset += 1 + (draw(st.integers(0, 3)) if gaps else 0)
    return [
        Record(o, draw(timestamps), draw(blobs), draw(blobs), draw(header_lists)) for o in offsets
    ]


producer_fields = st.fixed_dictionaries(
    {
        "producer_id": st.integers(-1, 2**63 - 1),
        "producer_epoch": st.integers(-1, 2**15 - 1),
        "base_sequence": st.integers(-1, 2**31 - 1),
        "partition_leader_epoch": st.integers(-1, 2**31 - 1),
        "transactional": st.booleans(),
    }
)


def expected_records(records: list[Record], log_append_time: bool, max_ts: int) -> list[Record]:
    if not log_append_time:
        return records
    return [Record(r.offset, max_ts, r.key, r.value, r.headers) for r in records]


def as_text_headers(headers):
    return tuple((name, value) for name, value in headers)


# --- round trip ----------------------------------------------------------------------------


@SETTINGS
@given(
    records=record_lists(),
    codec=st.sampled_from(CODECS),
    fields=producer_fields,
    log_append_time=st.booleans(),
    extra_last=st.integers(0, 5),
)
def test_round_trip(records, codec, fields, log_append_time, extra_last):
    last = records[-1].offset + extra_last
    max_ts = max(r.timestamp for r in records)
    raw = encode_batch(
        records,
        compression_codec=codec,
        log_append_time=log_append_time,
        last_offset=last,
        max_timestamp=max_ts,
        **fields,
    )
    header, decoded = decode_batch(raw)
    assert decoded == expected_records(records, log_append_time, max_ts)
    assert header.size == len(raw)
    assert header.base_offset == records[0].offset
    assert header.last_offset == last
    assert header.record_count == len(records)
    assert header.compression == codec
    assert header.max_timestamp == max_ts
    assert header.base_timestamp == records[0].timestamp
    assert header.log_append_time == log_append_time
    assert header.is_transactional == fields["transactional"]
    assert header.producer_id == fields["producer_id"]
    assert header.producer_epoch == fields["producer_epoch"]
    assert header.base_sequence == fields["base_sequence"]
    assert header.partition_leader_epoch == fields["partition_leader_epoch"]
    assert peek_offset_and_size(raw) == (records[0].offset, len(raw))


@SETTINGS
@given(batches=st.lists(record_lists(max_records=4), min_size=1, max_size=4))
def test_decode_batches_walks_concatenated_batches(batches):
    raw = b"".join(encode_batch(records) for records in batches)
    assert [records for _, records in decode_batches(raw)] == batches
    assert [pos for pos, _ in iter_batches(raw)] == _positions(batches)


def _positions(batches):
    out, pos = [], 0
    for records in batches:
        out.append(pos)
        pos += len(encode_batch(records))
    return out


def test_control_flag_and_empty_batch():
    raw = encode_batch([], base_offset=7, last_offset=9, max_timestamp=5, control=True)
    header, records = decode_batch(raw)
    assert (header.is_control, header.base_offset, header.last_offset) == (True, 7, 9)
    assert records == []


# --- kafka-python as an independent oracle -----------------------------------------------


def _oracle_codec(codec):
    if not ORACLE_HAS[codec]:
        pytest.skip(f"kafka-python lacks the {compression.NAMES[codec]} library here")


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: compression.NAMES[c])
@settings(max_examples=60, deadline=None)
@given(records=record_lists(gaps=False), fields=producer_fields)
def test_kafka_python_reads_our_bytes(codec, records, fields):
    _oracle_codec(codec)
    raw = encode_batch(records, compression_codec=codec, **fields)
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc()
    assert theirs.magic == 2
    assert theirs.base_offset == records[0].offset
    assert theirs.last_offset_delta == len(records) - 1
    assert theirs.records_count == len(records)
    assert theirs.compression_type == codec
    assert theirs.producer_id == fields["producer_id"]
    assert theirs.producer_epoch == fields["producer_epoch"]
    assert theirs.base_sequence == fields["base_sequence"]
    assert theirs.leader_epoch == fields["partition_leader_epoch"]
    assert theirs.is_transactional == fields["transactional"]
    assert theirs.max_timestamp == max(r.timestamp for r in records)
    got = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in theirs]
    assert got == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: compression.NAMES[c])
@settings(max_examples=60, deadline=None)
@given(records=record_lists(gaps=False), transactional=st.booleans())
def test_we_read_kafka_python_bytes(codec, records, transactional):
    _oracle_codec(codec)
    # kafka-python's producer numbers records 0..n-1 and leaves baseOffset to the broker.
    records = [
        Record(i, max(r.timestamp, 0), r.key, r.value, r.headers) for i, r in enumerate(records)
    ]
    producer_id, epoch, seq = (7, 3, 11) if transactional else (-1, -1, -1)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 30,
    )
    for r in records:
        assert builder.append(r.offset, r.timestamp, r.key, r.value, list(r.headers)) is not None
    raw = bytes(builder.build())
    header, decoded = decode_batch(raw)
    assert decoded == records
    assert header.is_transactional == transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        producer_id,
        epoch,
        seq,
    )
    # kafka-python falls back to no compression when compressing would not shrink the batch.
    assert header.compression == DefaultRecordBatch(raw).compression_type
    assert header.compression in (codec, compression.NONE)


def test_gzip_payload_is_standard_gzip():
    records = [Record(0, 1, b"k", b"v" * 100)]
    raw = encode_batch(records, compression_codec=compression.GZIP)
    body = gzip.decompress(raw[HEADER_SIZE:])
    assert body == encode_batch(records)[HEADER_SIZE:]


def test_snappy_is_xerial_framed_and_raw_snappy_is_accepted():
    import cramjam

    records = [Record(0, 1, b"k", b"abc" * 50_000)]  # > one 32 KiB xerial block
    plain_body = encode_batch(records)[HEADER_SIZE:]
    raw = encode_batch(records, compression_codec=compression.SNAPPY)
    assert raw[HEADER_SIZE:].startswith(b"\x82SNAPPY\x00")
    assert decode_batch(raw)[1] == records
    # Other clients send unframed snappy: same header, raw block as the payload.
    raw_block = bytes(cramjam.snappy.compress_raw(plain_body))
    assert compression.decompress(compression.SNAPPY, raw_block) == plain_body


# --- a batch built by hand from Kafka's documented layout --------------------------------


def zigzag_varint(value: int) -> bytes:
    """Kafka's varint: zig-zag (protobuf sint64), then 7 bits a byte, low bits first."""
    n = (value << 1) if value >= 0 else ((-value) << 1) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def hand_record(ts_delta, offset_delta, key, value, headers):
    def field(data):
        return zigzag_varint(-1) if data is None else zigzag_varint(len(data)) + data

    body = b"\x00" + zigzag_varint(ts_delta) + zigzag_varint(offset_delta)
    body += field(key) + field(value) + zigzag_varint(len(headers))
    for name, hvalue in headers:
        body += field(name.encode()) + field(hvalue)
    return zigzag_varint(len(body)) + body


def test_hand_built_batch_decodes():
    base_offset, base_ts = 1000, 1_700_000_000_000
    recs = [
        (0, 0, b"key-a", b"value-a", []),
        (5, 1, None, b"no key", [("trace", b"\x01\x02")]),
        (-3, 2, b"key-c", None, [("a", None), ("b", b"")]),
    ]
    payload = b"".join(hand_record(*r) for r in recs)
    attributes = 0  # no compression, CreateTime, not transactional, not control
    after_crc = (
        struct.pack(">hiqqqhii", attributes, 2, base_ts, base_ts + 5, 42, 1, 9, len(recs)) + payload
    )
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, rest
    raw = struct.pack(">qiibI", base_offset, batch_length, 17, 2, crc) + after_crc
    assert len(raw) == 61 + len(payload)

    header, records = decode_batch(raw)
    assert records == [
        Record(1000, base_ts, b"key-a", b"value-a", ()),
        Record(1001, base_ts + 5, None, b"no key", (("trace", b"\x01\x02"),)),
        Record(1002, base_ts - 3, b"key-c", None, (("a", None), ("b", b""))),
    ]
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (1000, 17, crc)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 1, 9)
    assert header.max_timestamp == base_ts + 5 and header.last_offset == 1002
    # And our encoder writes exactly these bytes for the same input.
    ours = encode_batch(
        records, producer_id=42, producer_epoch=1, base_sequence=9, partition_leader_epoch=17
    )
    assert ours == raw


def test_zigzag_helper_matches_kafka_examples():
    # Values from Kafka's protocol guide / protobuf's zig-zag table.
    assert zigzag_varint(0) == b"\x00"
    assert zigzag_varint(-1) == b"\x01"
    assert zigzag_varint(1) == b"\x02"
    assert zigzag_varint(-64) == b"\x7f"
    assert zigzag_varint(64) == b"\x80\x01"


# --- validation: corruptions --------------------------------------------------------------


def sample_batch(codec=compression.NONE):
    records = [Record(i, 1000 + i, b"k%d" % i, b"v" * (i * 7), (("h", b"x"),)) for i in range(6)]
    return encode_batch(records, compression_codec=codec, partition_leader_epoch=3)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: compression.NAMES[c])
def test_every_single_bit_flip_after_the_crc_start_is_rejected(codec):
    raw = sample_batch(codec)
    for byte in range(CRC_START - 4, len(raw)):  # the crc field itself, then what it covers
        for bit in range(8):
            bad = bytearray(raw)
            bad[byte] ^= 1 << bit
            with pytest.raises(InvalidRecordBatchError):
                validate_batch(bad)
            with pytest.raises(InvalidRecordBatchError):
                decode_batch(bytes(bad))


def test_flips_in_the_uncovered_fields_pass_the_crc():
    """baseOffset and partitionLeaderEpoch are outside the CRC by design (the leader stamps
    them); this is why recovery cannot rely on the CRC alone for offsets."""
    raw = sample_batch()
    for byte in (*range(0, 8), *range(12, 16)):
        bad = bytearray(raw)
        bad[byte] ^= 0x01
        validate_batch(bad)


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_bad_magic(magic):
    bad = bytearray(sample_batch())
    bad[16] = magic
    with pytest.raises(InvalidRecordBatchError, match="magic"):
        parse_header(bad)


def test_every_truncation_is_rejected():
    raw = sample_batch()
    for cut in range(len(raw)):
        with pytest.raises(InvalidRecordBatchError):
            validate_batch(raw[:cut])


@pytest.mark.parametrize("extra", [1, 7, 2**20, 2**31 - 1 - 49])
def test_length_beyond_the_buffer(extra):
    bad = bytearray(sample_batch())
    (length,) = struct.unpack_from(">i", bad, 8)
    struct.pack_into(">i", bad, 8, min(length + extra, 2**31 - 1))
    with pytest.raises(InvalidRecordBatchError, match="remain"):
        validate_batch(bad)


@pytest.mark.parametrize("length", [-1, 0, 48])
def test_length_shorter_than_header(length):
    bad = bytearray(sample_batch())
    struct.pack_into(">i", bad, 8, length)
    with pytest.raises(InvalidRecordBatchError):
        validate_batch(bad)


mutations = st.lists(
    st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 7)),
        st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 255)),
        st.tuples(st.just("cut"), st.integers(0, 10_000), st.just(0)),
        st.tuples(st.just("append"), st.integers(1, 64), st.integers(0, 255)),
    ),
    min_size=1,
    max_size=4,
)


def mutate(raw: bytes, ops) -> bytearray:
    bad = bytearray(raw)
    for op, where, arg in ops:
        if op == "append":
            bad += bytes([arg]) * where
        elif not bad:
            continue
        elif op == "flip":
            bad[where % len(bad)] ^= 1 << arg
        elif op == "set":
            bad[where % len(bad)] = arg
        else:
            del bad[where % len(bad) :]
    return bad


@SETTINGS
@given(codec=st.sampled_from(CODECS), ops=mutations)
def test_random_corruption_only_ever_raises_invalid_batch(codec, ops):
    bad = mutate(sample_batch(codec), ops)
    try:
        decode_batch(bytes(bad))
    except InvalidRecordBatchError:
        pass


def fix_crc_and_length(bad: bytearray) -> bytes:
    if len(bad) >= HEADER_SIZE:
        struct.pack_into(">i", bad, 8, len(bad) - 12)
        struct.pack_into(">I", bad, 17, crc32c(bytes(bad[CRC_START:])))
    return bytes(bad)


@SETTINGS
@given(codec=st.sampled_from(CODECS), ops=mutations)
@example(codec=compression.SNAPPY, ops=[("cut", 100, 0)])  # a torn xerial block length
@example(codec=compression.GZIP, ops=[("cut", 90, 0)])  # a truncated gzip stream
# Attributes with their top bit set: a negative int16, which the C reader's copy of the
# header once encoded as unsigned (OverflowError).
@example(codec=compression.ZSTD, ops=[("set", 21, 0x80)])
def test_corrupt_body_with_a_matching_crc_only_raises_invalid_batch(codec, ops):
    """A producer computes the CRC over whatever it sends, so a garbled body can carry a
    valid CRC; decoding it (ListOffsets by time, the cleaner) must still fail cleanly."""
    bad = fix_crc_and_length(mutate(sample_batch(codec), ops))
    try:
        decode_batch(bad)
    except InvalidRecordBatchError:
        pass


@pytest.mark.parametrize("codec", CODECS[1:], ids=lambda c: compression.NAMES[c])
def test_truncated_compressed_body_with_matching_crc_is_invalid(codec):
    """Each codec's own error (cramjam.DecompressionError, not a ValueError) must surface as
    InvalidRecordBatchError, which callers such as LogSegment.find_offset_by_timestamp and the
    cleaner translate to CORRUPT_MESSAGE."""
    raw = sample_batch(codec)
    bad = fix_crc_and_length(bytearray(raw[: HEADER_SIZE + (len(raw) - HEADER_SIZE) // 2]))
    with pytest.raises(InvalidRecordBatchError):
        decode_batch(bad)


def test_torn_xerial_snappy_block_length_is_invalid():
    """A xerial snappy payload cut inside a 4-byte block length (struct.error today)."""
    raw = sample_batch(compression.SNAPPY)
    bad = fix_crc_and_length(bytearray(raw[: HEADER_SIZE + 16 + 2]))  # header + 2 of 4 bytes
    with pytest.raises(InvalidRecordBatchError):
        decode_batch(bad)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_is_invalid(codec_id):
    bad = bytearray(sample_batch())
    bad[22] = (bad[22] & ~0x07) | codec_id
    with pytest.raises(InvalidRecordBatchError):
        decode_batch(fix_crc_and_length(bad))


# --- stamping ----------------------------------------------------------------------------


@SETTINGS
@given(
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**63 - 1),
    epoch=st.integers(-1, 2**31 - 1),
)
def test_stamp_keeps_the_crc_valid(codec, base_offset, epoch):
    raw = sample_batch(codec)
    _, original = decode_batch(raw)
    assume(base_offset + 5 < 2**63)
    buf = bytearray(b"junk" + raw)
    stamp(buf, 4, base_offset, epoch)
    header = validate_batch(buf, 4)
    assert (header.base_offset, header.partition_leader_epoch) == (base_offset, epoch)
    assert header.crc == parse_header(raw).crc
    _, records = decode_batch(buf, 4)
    assert [r.offset - base_offset for r in records] == [r.offset for r in original]
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (r.key, r.value, r.timestamp) for r in original
    ]

    prefixed = stamped_prefix(memoryview(raw)[:16], base_offset, epoch) + raw[16:]
    assert prefixed == bytes(buf[4:])
