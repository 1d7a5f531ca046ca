"""decode_batch reads records with aiokafka's C reader (strom_api/native_records.py) and falls
back to its own Python decoder: both must read every batch alike, valid or not."""

from __future__ import annotations

import struct

from crc32c import crc32c
from hypothesis import example, given
from hypothesis import strategies as st

from broker.log_validator import MalformedRecordError, scan_records
from strom_api import compression, native_records
from strom_api.record_batch import CRC_START, HEADER_SIZE, InvalidRecordBatchError, validate_batch
from strom_api.records import Record, decode_batch, decode_batch_portable, encode_batch, read_batch
from tests.strom_api.test_record_batch import (
    CODECS,
    SETTINGS,
    fix_crc_and_length,
    mutate,
    mutations,
    record_lists,
    sample_batch,
)


def outcome(decode, raw: bytes):
    try:
        return decode(raw)
    except InvalidRecordBatchError as exc:
        return ("InvalidRecordBatchError", str(exc))


def test_the_c_reader_is_installed_and_reads_batches_of_every_codec():
    """The test extra (and the package) install aiokafka with its extensions; without them
    decode_batch still works, only slower, so nothing else would notice."""
    assert native_records.available()
    records = [Record(i, 1000 + i, b"k", b"v" * i, (("h", b"x"),)) for i in range(5)]
    for codec in CODECS:
        batch = encode_batch(records, compression_codec=codec)
        _, read = read_batch(batch)
        assert all(type(r) is not Record for r in read)  # the C reader's records
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in read] == [
            (r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records
        ]
        assert decode_batch(batch)[1] == records


@SETTINGS
@given(
    records=record_lists(),
    codec=st.sampled_from(CODECS),
    log_append_time=st.booleans(),
    transactional=st.booleans(),
)
def test_both_readers_read_valid_batches_alike(records, codec, log_append_time, transactional):
    raw = encode_batch(
        records,
        compression_codec=codec,
        log_append_time=log_append_time,
        transactional=transactional,
    )
    assert decode_batch(raw) == decode_batch_portable(raw)


def broker_takes(raw: bytes) -> bool:
    """Whether a leader's record walk (broker/log_validator.py) takes the batch's records."""
    try:
        header = validate_batch(raw)
        section = compression.decompress(header.compression, raw[HEADER_SIZE:])
        scan_records(section, 0, len(section), header.record_count)
    except (InvalidRecordBatchError, MalformedRecordError, ValueError):
        return False
    return True


@SETTINGS
@given(codec=st.sampled_from(CODECS), ops=mutations)
@example(codec=compression.NONE, ops=[("cut", 100, 0)])
@example(codec=compression.NONE, ops=[("set", 62, 0x80)])  # the first record's attributes
def test_both_readers_agree_on_corrupt_batches_a_broker_takes(codec, ops):
    """Garbled records under a valid CRC: whatever a Strom log can hold, both read alike.
    (Records whose attributes byte has its top bit set, which brokers refuse, the C reader
    misreads: it takes that byte for the start of a varint.)"""
    raw = fix_crc_and_length(mutate(sample_batch(codec), ops))
    if broker_takes(raw):
        assert outcome(decode_batch, raw) == outcome(decode_batch_portable, raw)
    else:
        outcome(decode_batch, raw)  # no other exception than InvalidRecordBatchError


def with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


def test_a_header_name_that_is_not_utf8_reads_as_kafka_does():
    """The C reader refuses it; the Python decoder replaces the bytes (as Java's String
    constructor does) and its answer stands."""
    raw = bytearray(encode_batch([Record(0, 1, None, b"v", (("ab", b"x"),))]))
    at = raw.index(b"ab")
    raw[at : at + 2] = b"\xff\xfe"
    batch = with_crc(raw)
    assert native_records.read(memoryview(batch)) is None
    [record] = decode_batch(batch)[1]
    assert record.headers == (("\ufffd\ufffd", b"x"),)


def test_a_negative_header_count_is_read_as_none_by_both():
    raw = bytearray(encode_batch([Record(0, 1, None, b"v")]))
    assert raw[-1] == 0  # the last record's header count
    raw[-1] = 1  # zig-zag -1
    batch = with_crc(raw)
    assert outcome(decode_batch, batch) == outcome(decode_batch_portable, batch)
