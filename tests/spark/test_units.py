"""The connector's pure parts, without Spark or a cluster: Arrow decoding against the
record codec, option checking, range splitting, the per-trigger rate limit, pickling."""

from __future__ import annotations

import datetime as dt
import pickle
import random

import pytest

from pyspark_strom.arrow_records import decode_to_arrow
from pyspark_strom.options import parse_options
from pyspark_strom.planning import OffsetRange, split
from pyspark_strom.schema import arrow_schema, read_schema
from pyspark_strom.source import StromBatchReader
from pyspark_strom.streaming import StromStreamReader, rate_limit
from strom.errors import StromError
from strom.fetcher import TopicPartition
from strom_api import compression
from strom_api.records import Record, encode_batch

WITH_HEADERS = arrow_schema(read_schema(True))
PLAIN = arrow_schema(read_schema(False))


def random_log(seed):
    rnd = random.Random(seed)
    data, records, offset = b"", [], 0
    for _ in range(25):
        n = rnd.randint(1, 40)
        batch = []
        for i in range(n):
            # Long keys on even seeds, short ones on odd (the two ways of gathering them).
            size = rnd.randint(0, 300 if seed % 2 == 0 else 8)
            key = None if rnd.random() < 0.3 else rnd.randbytes(size)
            value = None if rnd.random() < 0.1 else rnd.randbytes(rnd.choice([0, 5, 200, 3000]))
            headers = tuple(
                (f"h{j}", None if rnd.random() < 0.2 else rnd.randbytes(4))
                for j in range(rnd.choice([0, 0, 1, 3]))
            )
            # Deltas from the batch's first timestamp of 1 to 6 varint bytes.
            ts = 1_700_000_000_000 + rnd.choice([1, 100, 10**5, 10**8, -(10**10)]) * rnd.random()
            ts = int(ts)
            batch.append(Record(offset + i, ts, key, value, headers))
        codec = rnd.choice([compression.NONE, *compression.BY_NAME.values()])
        data += encode_batch(batch, compression_codec=codec)
        records += batch
        offset += n + rnd.choice([0, 0, 3])  # gaps, as compaction leaves
    return data, records


@pytest.mark.parametrize("seed", range(4))
def test_arrow_decoding_matches_the_record_codec(seed):
    data, records = random_log(seed)
    last = records[-1].offset + 1
    for start, end in [(0, last), (7, last - 5), (records[30].offset, records[31].offset)]:
        batch = decode_to_arrow(data, "t", 4, start, end, WITH_HEADERS)
        want = [r for r in records if start <= r.offset < end]
        assert batch is not None and batch.schema.equals(WITH_HEADERS)
        got = batch.to_pylist()
        assert [(g["offset"], g["key"], g["value"]) for g in got] == [
            (r.offset, r.key, r.value) for r in want
        ]
        assert [g["timestamp"] for g in got] == [
            dt.datetime.fromtimestamp(r.timestamp / 1000, dt.UTC) for r in want
        ]
        assert [g["headers"] or [] for g in got] == [
            [{"key": k, "value": v} for k, v in r.headers] for r in want
        ]
        assert {(g["topic"], g["partition"], g["timestampType"]) for g in got} == {("t", 4, 0)}
        plain = decode_to_arrow(data, "t", 4, start, end, PLAIN)
        assert plain.schema.equals(PLAIN) and plain.num_rows == len(want)


def test_log_append_time_and_empty_ranges():
    records = [Record(i, 1000 + i, None, b"x") for i in range(5)]
    data = encode_batch(records, log_append_time=True, max_timestamp=99_000)
    got = decode_to_arrow(data, "t", 0, 0, 5, PLAIN).to_pylist()
    assert {g["timestampType"] for g in got} == {1}
    assert {g["timestamp"] for g in got} == {dt.datetime.fromtimestamp(99, dt.UTC)}
    assert decode_to_arrow(data, "t", 0, 5, 9, PLAIN) is None
    control = encode_batch(records, control=True)
    assert decode_to_arrow(control, "t", 0, 0, 5, PLAIN) is None


def test_a_corrupt_batch_is_refused():
    data = bytearray(encode_batch([Record(0, 1, b"k", b"v" * 50)]))
    data[-3] ^= 0xFF
    with pytest.raises(ValueError, match="CRC"):
        decode_to_arrow(bytes(data), "t", 0, 0, 1, PLAIN)


BASE = {"strom.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


@pytest.mark.parametrize(
    ("extra", "streaming", "message"),
    [
        ({"subscribe": " , "}, False, "'subscribe' must name at least one topic"),
        ({"subscribePattern": "("}, False, "'subscribePattern' is not a regular expression"),
        ({"assign": '{"t": "0"}'}, False, "'assign' must be JSON like"),
        ({"startingOffsets": '{"t":{"0":-1}}'}, False, "offset -1 for t-0"),
        ({"endingOffsets": '{"t":{"0":-2}}'}, False, "offset -2 for t-0"),
        ({"endingOffsets": "earliest"}, False, "cannot be earliest"),
        ({"endingOffsets": "latest"}, True, "is for batch queries only"),
        ({"startingTimestamp": "yesterday"}, False, "'startingTimestamp' must be a timestamp"),
        ({"maxOffsetsPerTrigger": "-5"}, True, "'maxOffsetsPerTrigger' must be a positive"),
        ({"failOnDataLoss": "maybe"}, False, "'failOnDataLoss' must be true or false"),
        ({"startingOffsetsByTimestampStrategy": "first"}, False, "must be error or latest"),
        ({"strom.bootstrap.servers": ""}, False, "'strom.bootstrap.servers' (or"),
        ({"strom.bootstrap.servers": "broker1"}, False, "'broker1' is not host:port"),
        # What Spark's Kafka source refuses, in its words (KafkaSourceProvider)
        ({"kafka.auto.offset.reset": "earliest"}, False, "set the source option 'startingoffsets'"),
        ({"Kafka.Enable.Auto.Commit": "true"}, True, "'enable.auto.commit' is not supported"),
        ({"kafka.value.deserializer": "x"}, False, "'value.deserializer' is not supported"),
    ],
)
def test_bad_options_are_named(extra, streaming, message):
    other_source = {"assign", "subscribePattern"} & set(extra)
    base = {k: v for k, v in BASE.items() if not (other_source and k == "subscribe")}
    with pytest.raises(StromError) as caught:
        parse_options({**base, **extra}, streaming=streaming)
    assert caught.value.name == "INVALID_CONFIG"
    assert message in caught.value.message


def test_options_are_case_insensitive_and_kafka_names_work():
    opts = parse_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Assign": '{"t":[1,0]}', "STARTINGOFFSETS": "earliest"}
    )
    assert opts.bootstrap == "h:1"
    assert opts.assign == (TopicPartition("t", 1), TopicPartition("t", 0))
    streaming = parse_options({**BASE, "startingOffsets": '{"t":{"0":-1}}'}, streaming=True)
    assert streaming.starting.offsets == {TopicPartition("t", 0): -1}


def test_split_by_max_records_then_min_partitions():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 50, 60), OffsetRange("t", 2, 5, 5)]
    assert split(ranges, None, None) == ranges[:2]
    capped = split(ranges, None, 30)
    assert [(r.partition, r.start, r.end) for r in capped] == [
        (0, 0, 25),
        (0, 25, 50),
        (0, 50, 75),
        (0, 75, 100),
        (1, 50, 60),
    ]
    spread = split(ranges, 10, None)
    assert [(r.partition, r.size) for r in spread] == [
        (0, 11),
        (0, 11),
        (0, 11),
        (0, 11),
        (0, 11),
        (0, 11),
        (0, 11),
        (0, 11),
        (0, 12),
        (1, 10),
    ]


def test_rate_limit_shares_by_backlog_and_never_exceeds():
    a, b, c = (TopicPartition("t", i) for i in range(3))
    begin = {a: 0, b: 100, c: 7}
    latest = {a: 1000, b: 200, c: 7}
    ends = rate_limit(begin, latest, 110)
    assert ends == {a: 100, b: 110, c: 7}
    assert rate_limit(begin, latest, 5000) == latest
    odd = rate_limit({a: 0, b: 0, c: 0}, {a: 1, b: 1, c: 1}, 2)
    assert sum(odd.values()) == 2


def test_readers_pickle_with_plain_values_only():
    opts = parse_options({**BASE, "minPartitions": "4"})
    for reader in (StromBatchReader(opts), StromStreamReader(parse_options(BASE, True))):
        copy = pickle.loads(pickle.dumps(reader))
        assert copy.opts == reader.opts
    assert pickle.loads(pickle.dumps(OffsetRange("t", 1, 2, 3))) == OffsetRange("t", 1, 2, 3)


def test_serializers_are_refused_by_the_writer_as_by_sparks_kafka_sink():
    from pyspark_strom.options import parse_write_options

    for key in ("kafka.key.serializer", "kafka.value.serializer", "kafka.interceptor.classes"):
        with pytest.raises(StromError) as caught:
            parse_write_options({"kafka.bootstrap.servers": "h:1", "topic": "t", key: "x"})
        assert caught.value.name == "INVALID_CONFIG"
        assert f"'{key[len('kafka.') :]}' is not supported" in caught.value.message
