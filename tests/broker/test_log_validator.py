"""Record-level validation of produced batches (broker/log_validator.py, after Kafka's
LogValidator), through a leader's real append path: every poison batch is refused with
Kafka's error name, leaving the log end and the producer state as they were; every batch a
real producer writes (our encoder, kafka-python's, every codec) is still taken; and whatever
is taken, a consumer can decode."""

from __future__ import annotations

import os

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker import log_validator
from broker.produce_checks import producer_batches
from broker.topic_settings import TopicSettings
from metadata.errors import ApiError
from strom_api import compression
from strom_api.record_batch import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    iter_batches,
)
from strom_api.records import Record, decode_batch, decode_batches, encode_batch
from tests.broker.test_partition import NOW, log_bytes, log_config, single_leader, topic_settings

PID, EPOCH = 7, 0
CODECS = list(compression.NAMES)


def forge(
    payload: bytes,
    count: int,
    *,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    producer: tuple[int, int, int] = (-1, -1, -1),
    base_timestamp: int = NOW,
    max_timestamp: int = NOW,
) -> bytes:
    """A batch with these header fields around `payload`, and a CRC that is right: what a
    broken or hostile producer can send."""
    pid, epoch, seq = producer
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out,
        0,
        0,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        -1,
        2,
        0,
        attributes,
        count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        pid,
        epoch,
        seq,
        count,
    )
    out += payload
    out[17:21] = crc32c(memoryview(out)[CRC_START:]).to_bytes(4, "big")
    return bytes(out)


def records_of(batch: bytes) -> bytes:
    """The record bytes of an uncompressed batch."""
    return batch[HEADER_SIZE:]


def values(n: int, size: int = 5) -> list[Record]:
    return [Record(i, NOW, None, b"%d" % i * size) for i in range(n)]


def plain(n: int = 3) -> bytes:
    return records_of(encode_batch(values(n)))


def varint(value: int) -> bytes:
    zz = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


def record(
    offset_delta: int,
    *,
    key: bytes | None = None,
    value: bytes | None = b"v",
    ts_delta: int = 0,
    headers: bytes = b"\x00",
    length_adjust: int = 0,
    attributes: int = 0,
) -> bytes:
    """One record's bytes, built field by field so that any field can be wrong."""
    body = bytes([attributes]) + varint(ts_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += headers
    return varint(len(body) + length_adjust) + body


def leader_with_a_producer(tmp_path, settings: TopicSettings | None = None):
    """A leader that already holds one batch of producer PID (sequence 0..1)."""
    p = single_leader(tmp_path, settings)
    first = encode_batch(values(2), producer_id=PID, producer_epoch=EPOCH, base_sequence=0)
    p.append_as_leader(first, -1, NOW)
    return p


def assert_refused(p, data: bytes, error_name: str, now: int = NOW) -> ApiError:
    end, state = p.log.log_end_offset, p.producers.snapshot()
    with pytest.raises(ApiError) as info:
        p.append_as_leader(data, -1, now)
    assert info.value.error_name == error_name, str(info.value)
    assert p.log.log_end_offset == end
    assert p.producers.snapshot() == state
    return info.value


NEXT = (PID, EPOCH, 2)  # the producer's next sequence: its batch would be taken if valid

POISON = {
    # The reproduced problems of issue 16.
    "valid CRC over 200 random bytes": (forge(os.urandom(200), 3, producer=NEXT), "INVALID_RECORD"),
    "compression codec 7": (
        forge(plain(), 3, attributes=7, producer=NEXT),
        "UNSUPPORTED_COMPRESSION_TYPE",
    ),
    "codec 5": (forge(plain(), 3, attributes=5, producer=NEXT), "UNSUPPORTED_COMPRESSION_TYPE"),
    "5 records claimed over 3": (forge(plain(3), 5, producer=NEXT), "INVALID_RECORD"),
    "61 bytes claiming 2^31-1 records": (forge(b"", 2**31 - 1, producer=NEXT), "INVALID_RECORD"),
    # Header consistency.
    "no records at all": (forge(b"", 0, last_offset_delta=0, producer=NEXT), "INVALID_RECORD"),
    "count 0 over records": (forge(plain(3), 0, last_offset_delta=2), "INVALID_RECORD"),
    "count and lastOffsetDelta disagree": (
        forge(plain(3), 3, last_offset_delta=4, producer=NEXT),
        "INVALID_RECORD",
    ),
    "fewer records claimed than there are": (forge(plain(3), 2, producer=NEXT), "INVALID_RECORD"),
    "producer id with sequence -1": (
        forge(plain(), 3, producer=(PID, EPOCH, -1)),
        "INVALID_RECORD",
    ),
    "producer id with epoch -1": (forge(plain(), 3, producer=(PID, -1, 2)), "INVALID_RECORD"),
    "producer id below -1": (forge(plain(), 3, producer=(-5, 0, 0)), "INVALID_RECORD"),
    "LogAppendTime set by the producer": (
        forge(plain(), 3, attributes=TIMESTAMP_TYPE_BIT, producer=NEXT),
        "INVALID_TIMESTAMP",
    ),
    "transactional": (
        forge(plain(), 3, attributes=TRANSACTIONAL_BIT, producer=NEXT),
        "INVALID_RECORD",
    ),
    # Records.
    "offset deltas out of order": (
        forge(record(0) + record(2) + record(1), 3, producer=NEXT),
        "INVALID_RECORD",
    ),
    "offset deltas not from 0": (forge(record(1) + record(2), 2, producer=NEXT), "INVALID_RECORD"),
    "a byte after the last record": (forge(plain() + b"\x00", 3, producer=NEXT), "INVALID_RECORD"),
    "a record length past the batch": (
        forge(record(0) + record(1, length_adjust=40), 2, producer=NEXT),
        "INVALID_RECORD",
    ),
    "a record length short of its fields": (
        forge(record(0, length_adjust=-1) + b"\x00", 1, producer=NEXT),
        "INVALID_RECORD",
    ),
    "a record length longer than its fields": (
        forge(record(0, headers=b"\x00\x00"), 1, producer=NEXT),
        "INVALID_RECORD",
    ),
    "a negative record length": (forge(varint(-7) + b"\x00" * 20, 1), "INVALID_RECORD"),
    "a key past its record": (
        forge(record(0, key=b"k", value=None)[:3] + varint(200) + b"k" * 10, 1),
        "INVALID_RECORD",
    ),
    "a negative header count": (forge(record(0, headers=varint(-1)), 1), "INVALID_RECORD"),
    "a header count past the record": (forge(record(0, headers=varint(50)), 1), "INVALID_RECORD"),
    "a header key of negative length": (
        forge(record(0, headers=varint(1) + varint(-1) + varint(-1)), 1),
        "INVALID_RECORD",
    ),
    "an offset delta varint of 6 bytes": (
        forge(varint(10) + b"\x00\x00" + b"\x80" * 5 + b"\x00" + b"\x01\x01\x00", 1),
        "INVALID_RECORD",
    ),
    # Compressed batches.
    "zstd bytes that do not decompress": (
        forge(b"\x28\xb5\x2f\xfd" + os.urandom(100), 3, attributes=compression.ZSTD, producer=NEXT),
        "INVALID_RECORD",
    ),
    "gzip cut short": (
        forge(compression.compress(compression.GZIP, plain())[:-6], 3, attributes=1),
        "INVALID_RECORD",
    ),
    "zstd over 5 records claimed as 3 compressed": (
        forge(compression.compress(compression.ZSTD, plain(5)), 3, attributes=4, producer=NEXT),
        "INVALID_RECORD",
    ),
    "lz4 over records with bad offsets": (
        forge(compression.compress(compression.LZ4, record(0) + record(0)), 2, attributes=3),
        "INVALID_RECORD",
    ),
    # aiokafka's C reader, the consumer's, would read 0x80 as the start of a varint
    "record attributes with the top bit": (
        forge(record(0) + record(1, attributes=0x80) + record(2), 3, producer=NEXT),
        "INVALID_RECORD",
    ),
    "compressed record attributes with the top bit": (
        forge(
            compression.compress(compression.ZSTD, record(0, attributes=0xFF)),
            1,
            attributes=compression.ZSTD,
            producer=NEXT,
        ),
        "INVALID_RECORD",
    ),
}


def test_record_attributes_below_0x80_are_taken_and_read_back(tmp_path):
    """Kafka leaves them unused and takes any; Strom takes all a C reader reads alike."""
    p = single_leader(tmp_path)
    data = forge(record(0, attributes=0x7F) + record(1, attributes=1), 2)
    assert p.append_as_leader(data, -1, NOW).next_offset == 2
    read = [r for _, batch in decode_batches(log_bytes(p.log)) for r in batch]
    assert [(r.offset, r.value) for r in read] == [(0, b"v"), (1, b"v")]


@pytest.mark.parametrize("name", list(POISON))
def test_poison_batches_are_refused_and_nothing_changes(tmp_path, name):
    data, error_name = POISON[name]
    p = leader_with_a_producer(tmp_path)
    error = assert_refused(p, data, error_name)
    assert "Traceback" not in str(error) and str(error).strip()
    # One poison batch after a good one refuses the whole request.
    good = encode_batch(values(1), producer_id=PID, producer_epoch=EPOCH, base_sequence=2)
    assert_refused(p, good + data, error_name)
    # And the producer goes on where it was.
    assert p.append_as_leader(good, -1, NOW).base_offset == 2


def test_the_error_names_the_batch_and_the_record(tmp_path):
    p = single_leader(tmp_path)
    data = encode_batch(values(2)) + forge(record(0) + record(1) + record(5), 3)
    error = assert_refused(p, data, "INVALID_RECORD")
    assert "Record 2 of batch 1" in str(error) and "offset" in str(error)


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, 4])
def test_a_decompression_bomb_is_refused_without_expanding(tmp_path, codec):
    settings = topic_settings(log=log_config(max_message_bytes=1 << 20))
    p = leader_with_a_producer(tmp_path, settings)
    limit = log_validator.decompression_limit(settings)
    zeros = [Record(i, NOW, None, bytes(1 << 20)) for i in range(limit // (1 << 20) + 1)]
    bomb = encode_batch(zeros, compression_codec=codec)
    assert len(bomb) < 1 << 20
    error = assert_refused(p, bomb, "MESSAGE_TOO_LARGE")
    assert "decompresses to more than" in str(error)
    # Just within the limit it is taken.
    within = encode_batch(zeros[: limit // (1 << 20) - 1], compression_codec=codec)
    assert p.append_as_leader(within, -1, NOW).next_offset == 2 + limit // (1 << 20) - 1


def test_a_compressed_batch_over_max_message_bytes_is_refused_before_decompressing(tmp_path):
    p = single_leader(tmp_path, topic_settings(log=log_config(max_message_bytes=500)))
    big = encode_batch(
        [Record(i, NOW, None, os.urandom(100)) for i in range(10)],
        compression_codec=compression.ZSTD,
    )
    assert_refused(p, big, "MESSAGE_TOO_LARGE")


def test_every_record_timestamp_is_checked_not_only_the_headers(tmp_path):
    settings = topic_settings(timestamp_before_max_ms=1_000, timestamp_after_max_ms=1_000)
    p = single_leader(tmp_path, settings)
    # The header's base and max timestamps are fine; the middle record is an hour old.
    records = [Record(0, NOW, None, b"a"), Record(1, NOW - 3_600_000, None, b"b")]
    records.append(Record(2, NOW + 10, None, b"c"))
    for codec in CODECS:
        data = encode_batch(records, compression_codec=codec, max_timestamp=NOW + 10)
        error = assert_refused(p, data, "INVALID_TIMESTAMP")
        assert "record 1 of batch 0" in str(error)
    # A record without a timestamp (-1) is never out of range.
    none = encode_batch([Record(0, -1, None, b"a"), Record(1, NOW, None, b"b")])
    assert p.append_as_leader(none, -1, NOW).next_offset == 2


def test_a_compacted_topic_refuses_records_without_a_key(tmp_path):
    p = single_leader(tmp_path, topic_settings(log=log_config(cleanup_policy="compact")))
    keyed = [Record(0, NOW, b"k", b"v"), Record(1, NOW, b"", None)]  # empty key, tombstone
    assert p.append_as_leader(encode_batch(keyed), -1, NOW).next_offset == 2
    keyless = keyed + [Record(2, NOW, None, b"v")]
    error = assert_refused(p, encode_batch(keyless), "INVALID_RECORD")
    assert "Record 2 of batch 0" in str(error) and "key" in str(error)


def test_the_max_timestamp_becomes_the_records_largest(tmp_path):
    p = single_leader(tmp_path)
    records = [Record(0, NOW, None, b"a"), Record(1, NOW + 500, None, b"b")]
    for claimed in (NOW, NOW + 9_000, -1):  # too small, too large, missing
        p.append_as_leader(encode_batch(records, max_timestamp=claimed), -1, NOW)
    stored = [h for _, h in iter_batches(log_bytes(p.log))]  # every CRC checked
    assert [h.max_timestamp for h in stored] == [NOW + 500] * 3
    assert p.log.log_end_offset == 6


RICH = [
    Record(0, NOW, b"key", b"value", (("h1", b"x"), ("h2", None))),
    Record(1, NOW - 5_000, None, None),  # older than the first: a negative delta
    Record(2, NOW + 70_000, b"", b""),  # a three-byte timestamp delta
    Record(3, NOW, b"k" * 300, os.urandom(20_000)),  # a three-byte value length
    *[Record(i, NOW + i, None, b"%d" % i) for i in range(4, 9_000)],  # two-byte deltas
]


@pytest.mark.parametrize("codec", CODECS)
def test_batches_of_our_encoder_are_taken_and_read_back(tmp_path, codec):
    settings = topic_settings(log=log_config(max_message_bytes=1 << 22))
    p = single_leader(tmp_path, settings)
    data = encode_batch(RICH, compression_codec=codec)
    data += encode_batch(values(1), compression_codec=codec)
    assert p.append_as_leader(data, -1, NOW).next_offset == len(RICH) + 1
    read = [r for _, batch in decode_batches(log_bytes(p.log)) for r in batch]
    assert [(r.key, r.value, r.headers) for r in read[: len(RICH)]] == [
        (r.key, r.value, r.headers) for r in RICH
    ]


def kafka_python_batch(codec: int, records: list[Record], producer=(-1, -1, -1)) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        batch_size=1 << 30,
    )
    for r in records:
        builder.append(
            r.offset, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers)
        )
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_batches_of_kafka_python_are_taken_and_read_back(tmp_path, codec):
    p = single_leader(tmp_path, topic_settings(log=log_config(max_message_bytes=1 << 22)))
    data = kafka_python_batch(codec, RICH[:200]) + kafka_python_batch(
        codec, values(3), producer=(PID, EPOCH, 0)
    )
    assert p.append_as_leader(data, -1, NOW).next_offset == 203
    read = [r for _, batch in decode_batches(log_bytes(p.log)) for r in batch]
    assert [r.value for r in read[:200]] == [r.value for r in RICH[:200]]


# --- accepted => consumable ------------------------------------------------------------------

SETTINGS = TopicSettings(log=log_config())
SAMPLE = [
    Record(0, NOW, b"k", b"value-0", (("h", b"1"),)),
    Record(1, NOW + 3, None, b"value-1"),
    Record(2, NOW + 1, b"kk", None),
]


def accepted_is_consumable(data: bytes) -> None:
    try:
        out, headers = producer_batches(data, SETTINGS, NOW)
    except ApiError as exc:
        assert exc.error_name in ("CORRUPT_MESSAGE", "INVALID_RECORD"), str(exc)
        return
    for header, (_, records) in zip(headers, decode_batches(out), strict=True):
        assert len(records) == header.record_count
        assert [r.offset for r in records] == list(range(header.record_count))
        assert header.max_timestamp == max(-1, *(r.timestamp for r in records))


@hypothesis_settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(CODECS),
    mutations=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4
    ),
    cut=st.integers(-3, 3),
)
def test_records_mutated_under_a_valid_crc_are_refused_or_consumable(codec, mutations, cut):
    """Mutated record bytes (before compression, so the walk itself is tested for every
    codec), maybe cut or extended, under a recomputed CRC."""
    body = bytearray(records_of(encode_batch(SAMPLE)))
    for at, value in mutations:
        body[at % len(body)] = value
    if cut < 0:
        del body[cut:]
    else:
        body += bytes(cut)
    payload = compression.compress(codec, bytes(body))
    accepted_is_consumable(forge(payload, len(SAMPLE), attributes=codec, max_timestamp=NOW + 3))


@hypothesis_settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    mutations=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=3
    ),
)
def test_compressed_bytes_mutated_under_a_valid_crc_are_refused_or_consumable(codec, mutations):
    data = bytearray(encode_batch(SAMPLE, compression_codec=codec))
    for at, value in mutations:
        data[HEADER_SIZE + at % (len(data) - HEADER_SIZE)] = value
    data[17:21] = crc32c(memoryview(data)[CRC_START:]).to_bytes(4, "big")
    accepted_is_consumable(bytes(data))


maybe_bytes = st.one_of(st.none(), st.binary(max_size=20), st.integers(0, 9_000).map(bytes))


@hypothesis_settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-100_000, 100_000),
            maybe_bytes,
            maybe_bytes,
            st.lists(
                st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
                max_size=2,
            ),
        ),
        min_size=1,
        max_size=150,
    ),
    st.sampled_from(CODECS),
)
def test_every_well_formed_batch_is_taken_with_its_true_max_timestamp(fields, codec):
    """Varint widths of 1, 2 and 3 bytes in every field, negative deltas, empty and null
    keys and values, headers: whatever our encoder writes, the walk takes."""
    records = [
        Record(i, NOW + ts, key, value, tuple(headers))
        for i, (ts, key, value, headers) in enumerate(fields)
    ]
    settings = TopicSettings(log=log_config(max_message_bytes=1 << 24))
    data = encode_batch(records, compression_codec=codec, max_timestamp=NOW)
    out, headers = producer_batches(data, settings, NOW)
    assert headers[0].max_timestamp == max(r.timestamp for r in records)
    assert decode_batch(out)[1] == records


def test_the_scan_accepts_exactly_what_decode_batch_reads_on_valid_input():
    for codec in CODECS:
        data = encode_batch(RICH[:300], compression_codec=codec)
        out, headers = producer_batches(data, SETTINGS, NOW)
        assert decode_batch(out)[1] == decode_batch(data)[1]
        assert headers[0].record_count == 300
