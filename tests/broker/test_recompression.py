"""Broker-side compression.type (issue 17), as Kafka's LogValidator applies it: `producer`
stores the producer's bytes untouched; a codec, or `uncompressed`, rewrites each batch in
another codec into that one, keeping its records, offset deltas, timestamps and producer
id, epoch and sequence, with a new CRC-32C. Through producer_batches and a leader's real
append; the end-to-end read with the strom client is in tests/client/test_producer.py."""

from __future__ import annotations

import pytest

from broker.produce_checks import producer_batches
from broker.topic_settings import TopicSettings, topic_settings
from metadata.errors import ApiError
from metadata.image import EMPTY_IMAGE
from storage.errors import InvalidConfigError
from strom_api import compression
from strom_api.record_batch import TIMESTAMP_TYPE_BIT, iter_batches, parse_header
from strom_api.records import Record, decode_batch, decode_batches, encode_batch
from tests.broker.test_partition import NOW, log_bytes, log_config, single_leader

RECORDS = [
    Record(0, NOW - 5, b"k", b"a" * 300, (("h", b"1"),)),
    Record(1, NOW, None, b"b" * 300),
    Record(2, NOW - 2, b"kk", None),
]
PRODUCER = {"producer_id": 42, "producer_epoch": 3, "base_sequence": 17}
CODECS = list(compression.NAMES)


def settings(compression_type: str, **config) -> TopicSettings:
    return TopicSettings.from_configs(
        {"compression.type": compression_type, **log_config(**config).to_properties()}
    )


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_a_batch_is_stored_in_the_topics_codec_with_everything_else_kept(source, target):
    sent = encode_batch(RECORDS, compression_codec=source, **PRODUCER)
    out, [header] = producer_batches(sent, settings(target), NOW)
    [(pos, stored)] = list(iter_batches(out))  # whole, and its CRC-32C right
    codec = compression.NONE if target == "uncompressed" else compression.BY_NAME[target]
    assert stored == header and stored.compression == codec
    before = parse_header(sent)
    same = ("last_offset_delta", "base_timestamp", "max_timestamp", "record_count")
    same += ("producer_id", "producer_epoch", "base_sequence")
    assert {f: getattr(stored, f) for f in same} == {f: getattr(before, f) for f in same}
    assert decode_batch(out)[1] == decode_batch(sent)[1] == RECORDS
    if source == codec:
        assert bytes(out) == sent  # nothing to do: the producer's bytes


def test_producer_keeps_the_producers_bytes_without_a_copy():
    sent = encode_batch(RECORDS, compression_codec=compression.GZIP, **PRODUCER)
    out, _ = producer_batches(sent, settings("producer"), NOW)
    assert out is sent


def test_every_batch_of_a_request_is_recompressed_in_order_and_a_matching_one_kept():
    batches = [
        encode_batch(
            RECORDS, compression_codec=codec, base_sequence=seq, producer_id=5, producer_epoch=0
        )
        for seq, codec in enumerate([compression.GZIP, compression.ZSTD, compression.NONE])
    ]
    out, headers = producer_batches(b"".join(batches), settings("zstd"), NOW)
    assert [h.compression for h in headers] == [compression.ZSTD] * 3
    assert [h.base_sequence for h in headers] == [0, 1, 2]
    assert bytes(out).count(batches[1]) == 1  # already zstd: stored as sent
    assert [records for _, records in decode_batches(out)] == [RECORDS] * 3


def test_a_recompressed_batch_is_stamped_on_a_log_append_time_topic():
    sent = encode_batch(RECORDS, compression_codec=compression.GZIP)
    chosen = TopicSettings.from_configs(
        {
            "compression.type": "lz4",
            "message.timestamp.type": "LogAppendTime",
            **log_config().to_properties(),
        }
    )
    out, [header] = producer_batches(sent, chosen, NOW + 1000)
    assert header.compression == compression.LZ4 and header.attributes & TIMESTAMP_TYPE_BIT
    assert header.max_timestamp == NOW + 1000
    assert [r.timestamp for r in decode_batch(out)[1]] == [NOW + 1000] * 3


def test_a_wrong_max_timestamp_is_corrected_as_the_batch_is_recompressed():
    sent = encode_batch(RECORDS, compression_codec=compression.SNAPPY, max_timestamp=NOW - 99)
    out, [header] = producer_batches(sent, settings("gzip"), NOW)
    assert header.max_timestamp == NOW and parse_header(out).max_timestamp == NOW


def test_a_batch_too_large_once_uncompressed_is_message_too_large():
    """Kafka checks max.message.bytes again after recompression: a well-compressed batch
    stored uncompressed may no longer fit."""
    big = [Record(i, NOW, None, b"z" * 1000) for i in range(20)]
    sent = encode_batch(big, compression_codec=compression.ZSTD)
    chosen = settings("uncompressed", max_message_bytes=4096)
    assert len(sent) < 4096
    with pytest.raises(ApiError) as refused:
        producer_batches(sent, chosen, NOW)
    assert refused.value.error_name == "MESSAGE_TOO_LARGE"
    assert "uncompressed" in refused.value.message and "max.message.bytes" in refused.value.message


def test_a_bad_batch_is_refused_before_anything_is_recompressed():
    good = encode_batch(RECORDS, compression_codec=compression.GZIP)
    bad = bytearray(encode_batch(RECORDS))
    bad[-1] ^= 0xFF  # the CRC no longer matches
    with pytest.raises(ApiError) as refused:
        producer_batches(good + bytes(bad), settings("zstd"), NOW)
    assert refused.value.error_name == "CORRUPT_MESSAGE"


def test_the_leader_stores_the_recompressed_batch(tmp_path):
    chosen = settings("zstd")
    partition = single_leader(tmp_path, chosen)
    sent = encode_batch(
        RECORDS, compression_codec=compression.GZIP, **{**PRODUCER, "base_sequence": 0}
    )
    append = partition.append_as_leader(sent, -1, NOW)
    retry = partition.append_as_leader(sent, -1, NOW)  # the same sequence again
    assert retry.duplicate and retry.base_offset == append.base_offset == 0
    [(header, records)] = list(decode_batches(log_bytes(partition.log)))
    assert header.compression == compression.ZSTD and records == RECORDS
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 0)


@pytest.mark.parametrize(
    ("static", "expected"),
    [
        ({}, None),
        ({"compression.type": "lz4"}, compression.LZ4),
        ({"compression.type": "uncompressed"}, compression.NONE),
    ],
)
def test_the_broker_wide_compression_type_is_the_topics_default(static, expected):
    assert topic_settings(EMPTY_IMAGE, "t", static, 1).compression == expected


def test_an_unknown_compression_type_is_refused_by_name():
    with pytest.raises(InvalidConfigError, match="compression.type"):
        TopicSettings.from_configs({"compression.type": "brotli"})
