"""Batch reads through `spark.read.format("strom")` against a real cluster: contents,
offset ranges, minPartitions splitting, headers, timestamps, and clear errors."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.spark.spark_helpers import delete_below, make_topic, produce

BASE_TS = 1_750_000_000_000


@pytest.fixture(scope="module")
def events(strom_cluster, servers):
    """600 records over 6 partitions: keys on most, headers on every third, timestamps
    BASE_TS + i s."""
    make_topic(strom_cluster, "events", 6)
    records = []
    for i in range(600):
        key = None if i % 10 == 0 else b"k%d" % i
        headers = [("n", b"%d" % i), ("null", None)] if i % 3 == 0 else []
        records.append((b"v%d" % i, key, i % 6, BASE_TS + i * 1000, headers))
    sent = produce(servers, "events", records)
    return records, sent


def load(spark, servers, **options):
    reader = spark.read.format("strom").option("strom.bootstrap.servers", servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_reads_everything_produced_with_kafkas_schema(spark, servers, events):
    records, sent = events
    df = load(spark, servers, subscribe="events", includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = df.collect()
    assert len(rows) == 600
    got = {
        (r.partition, r.offset): (
            r.key,
            r.value,
            r.topic,
            r.timestamp.astimezone(dt.UTC),
            r.timestampType,
            [(h.key, h.value) for h in r.headers] if r.headers is not None else None,
        )
        for r in rows
    }
    want = {
        (m.partition, m.offset): (
            key,
            value,
            "events",
            dt.datetime.fromtimestamp(ts / 1000, dt.UTC),
            0,
            headers or None,
        )
        for (value, key, _, ts, headers), m in zip(records, sent, strict=True)
    }
    assert got == want
    assert {r.partition for r in rows} == set(range(6))


def test_offset_ranges_and_min_partitions_split_the_same_records(spark, servers, events):
    starting = '{"events":{"0":10,"1":-2,"2":0,"3":0,"4":0,"5":95}}'
    ending = '{"events":{"0":60,"1":20,"2":-1,"3":0,"4":100,"5":-1}}'
    whole = load(spark, servers, subscribe="events", startingOffsets=starting, endingOffsets=ending)
    split = load(
        spark, servers, subscribe="events", startingOffsets=starting, endingOffsets=ending,
        minPartitions="12",
    )
    capped = load(
        spark, servers, assign='{"events":[0,1,2,3,4,5]}', startingOffsets=starting,
        endingOffsets=ending, maxRecordsPerPartition="7",
    )
    # One batch per Fetch: each task reads its range in many fetches, one ahead of decoding.
    tiny = load(
        spark, servers, subscribe="events", startingOffsets=starting, endingOffsets=ending,
        **{"kafka.max.partition.fetch.bytes": "100"},
    )
    # 5 non-empty ranges (3 is empty): 50 + 20 + 100 + 100 + 5 = 275 records.
    assert whole.rdd.getNumPartitions() == 5
    assert split.rdd.getNumPartitions() >= 12
    assert capped.rdd.getNumPartitions() == 8 + 3 + 15 + 15 + 1
    expected = (
        [(0, o) for o in range(10, 60)]
        + [(1, o) for o in range(0, 20)]
        + [(2, o) for o in range(100)]
        + [(4, o) for o in range(100)]
        + [(5, o) for o in range(95, 100)]
    )
    for df in (whole, split, capped, tiny):
        got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
        assert got == expected


def test_timestamps_choose_the_range(spark, servers, events):
    # Records i = 120..239 have timestamps BASE_TS + 120 s .. BASE_TS + 239 s.
    df = load(
        spark, servers, subscribe="events",
        startingTimestamp=str(BASE_TS + 120_000), endingTimestamp=str(BASE_TS + 240_000),
    )
    values = sorted(int(r.value[1:]) for r in df.select("value").collect())
    assert values == list(range(120, 240))
    stamps = df.agg({"timestamp": "min"}).collect()[0][0].astimezone(dt.UTC)
    assert stamps == dt.datetime.fromtimestamp((BASE_TS + 120_000) / 1000, dt.UTC)

    # Per partition: partition p from record 6 * 10 + p on, up to record 6 * 20 + p (excluded).
    by_ts = {"events": {str(p): BASE_TS + (60 + p) * 1000 for p in range(6)}}
    until = {"events": {str(p): BASE_TS + (120 + p) * 1000 for p in range(6)}}
    df = load(
        spark, servers, subscribe="events",
        startingOffsetsByTimestamp=json.dumps(by_ts), endingOffsetsByTimestamp=json.dumps(until),
    )
    assert sorted(int(r.value[1:]) for r in df.select("value").collect()) == list(range(60, 120))

    # After the last record: an error by default, the end with the "latest" strategy.
    future = str(BASE_TS + 10**9)
    with pytest.raises(Exception) as caught:
        load(spark, servers, subscribe="events", startingTimestamp=future).count()
    assert "OFFSET_OUT_OF_RANGE: events-" in str(caught.value)
    assert "has no record at or after timestamp" in str(caught.value)
    late = load(
        spark, servers, subscribe="events", startingTimestamp=future,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert late.count() == 0


def test_a_pattern_reads_matching_topics_only(spark, strom_cluster, servers, events):
    make_topic(strom_cluster, "eventsbis", 2)
    produce(servers, "eventsbis", [(b"x", None, 0, None, []), (b"y", None, 1, None, [])])
    df = load(spark, servers, subscribePattern="events.*")
    counts = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    assert counts == {"events": 600, "eventsbis": 2}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"subscribe": "no-such-topic"}, "UNKNOWN_TOPIC_OR_PARTITION: topic 'no-such-topic'"),
        ({"assign": '{"events":[9]}'}, "UNKNOWN_TOPIC_OR_PARTITION: partition 9 of topic"),
        ({"subscribe": "events", "minPartitions": "zero"}, "option 'minPartitions' must be"),
        ({"subscribe": "events", "startingOffsets": "latest"}, "cannot be latest for a batch"),
        ({"subscribe": "events", "startingOffsets": "{bad"}, "'startingOffsets' must be JSON"),
        ({"subscribe": "events", "includeHeaders": "yes"}, "option 'includeHeaders' must be true"),
        ({"subscribe": "events", "assign": '{"events":[0]}'}, "exactly one of the options"),
    ],
)
def test_clear_errors(spark, servers, events, options, expected):
    with pytest.raises(Exception) as caught:
        load(spark, servers, **options).count()
    assert expected in str(caught.value)


def test_an_unreachable_cluster_is_named(spark):
    with pytest.raises(Exception) as caught:
        options = {"subscribe": "events", "kafka.request.timeout.ms": "1500"}
        load(spark, "127.0.0.1:1", **options).count()
    assert "NETWORK_EXCEPTION: no broker answered" in str(caught.value)
    assert "127.0.0.1:1" in str(caught.value)


def test_deleted_offsets_fail_the_read_unless_failondataloss_is_false(
    spark, strom_cluster, servers
):
    make_topic(strom_cluster, "trimmed", 1)
    produce(servers, "trimmed", [(b"t%d" % i, None, 0, None, []) for i in range(50)])
    delete_below(servers, "trimmed", 0, 20)
    starting = '{"trimmed":{"0":5}}'
    with pytest.raises(Exception) as caught:
        load(spark, servers, subscribe="trimmed", startingOffsets=starting).count()
    assert "OFFSET_OUT_OF_RANGE: trimmed-0: offsets 5..19 are no longer in the log" in str(
        caught.value
    )
    df = load(spark, servers, subscribe="trimmed", startingOffsets=starting, failOnDataLoss="false")
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(20, 50))
    earliest = load(spark, servers, subscribe="trimmed")
    assert earliest.count() == 30
