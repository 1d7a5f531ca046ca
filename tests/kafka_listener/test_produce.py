"""Produce and InitProducerId on the Kafka listener (issue 20): records sent by Kafka's own
clients (confluent-kafka's idempotent acks=all producer with every compression codec,
kafka-python, aiokafka) and by raw frames land in Strom's logs, read back through Strom's
own client with the same offsets, keys, headers and timestamps; acks=0 takes no response
(closing the connection on a failure, as Kafka does); bad inputs are answered with Kafka's
error codes, the connection kept."""

from __future__ import annotations

import asyncio
import datetime
import time

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32Timedelta, i64

from strom_api.compression import ZSTD
from strom_api.records import Record, encode_batch
from tests.kafka_listener.data_helpers import (
    BASE_TS,
    INIT_PRODUCER_ID,
    METADATA,
    PRODUCE,
    batch,
    kafka_address,
    kafka_topic,
    leader_address,
    leaders,
    produce_request,
    send,
    strom_records,
)
from tests.kafka_listener.kafka_cluster import decode_response
from tests.kafka_listener.test_framing import metadata_v12
from tests.node_integration.node_cluster import wait_until

HEADERS = [("trace", b"t-1"), ("empty", b"")]


def test_acks_0_takes_no_response_and_the_next_request_is_answered_under_its_own_id(cluster):
    kafka_topic(cluster, "fire-and-forget")
    address = leader_address(cluster, "fire-and-forget", 0)
    fire = produce_request(9, [("fire-and-forget", 0, batch(b"a", b"b"))], acks=0)
    metadata = metadata_v12("fire-and-forget")
    frames = send(address, (fire, 1), (metadata, 2), (fire, 3), (metadata, 4), replies=2)
    assert [decode_response(f, METADATA, 12)[0] for f in frames] == [2, 4]
    assert [r.value for r in strom_records(cluster, "fire-and-forget", 1, 4)] == [b"a", b"b"] * 2


def test_an_acks_0_produce_that_fails_closes_its_connection_as_kafka_does(cluster):
    kafka_topic(cluster, "acks-0-failing")
    address = leader_address(cluster, "acks-0-failing", 0)
    failing = produce_request(9, [("acks-0-failing", 5, batch(b"x"))], acks=0)  # no partition 5
    assert send(address, (failing, 1)) == [None]  # closed, and nothing else
    leader = leaders(cluster, "acks-0-failing")[0]
    reason = "an acks=0 produce request failed for acks-0-failing-5: UNKNOWN_TOPIC_OR_PARTITION"
    wait_until(lambda: reason in cluster.log_text(leader), 10, "the log line")
    [frame] = send(address, (metadata_v12("acks-0-failing"), 2))  # the listener serves on
    assert frame is not None
    with pytest.raises(AssertionError):  # nothing was written either
        strom_records(cluster, "acks-0-failing", 1, 1, timeout_s=1)


@pytest.mark.parametrize("version", range(3, 11))
def test_each_served_version_answers_the_offsets(cluster, version):
    topic = f"versions-{version}"
    kafka_topic(cluster, topic)
    address = leader_address(cluster, topic, 0)
    first = produce_request(version, [(topic, 0, batch(b"1", b"2", b"3"))])
    second = produce_request(version, [(topic, 0, batch(b"4"))])
    frames = send(address, (first, 1), (second, 2))
    answers = [decode_response(f, PRODUCE, version) for f in frames]
    assert [a[0] for a in answers] == [1, 2]
    offsets = []
    for _, response in answers:
        [topic_answer] = response.responses
        [p] = topic_answer.partition_responses
        assert (p.error_code, p.log_append_time) == (ErrorCode.none, None)
        if version >= 5:
            assert p.log_start_offset == 0
        offsets.append(p.base_offset)
        assert response.throttle_time.total_seconds() == 0
    assert offsets == [0, 3]


def test_zstd_before_produce_v7_is_refused_as_kafka_refuses_it(cluster):
    """KIP-110: zstd batches need Produce v7; the request's other partitions go on to the
    shared path and are answered in their place (partition 5 does not exist)."""
    kafka_topic(cluster, "zstd-versions")
    now = int(time.time() * 1000)
    zstd = encode_batch([Record(0, now, b"k", b"v" * 100, [])], compression_codec=ZSTD)
    answers = {}
    for version in (6, 7):
        request = produce_request(
            version, [("zstd-versions", 5, batch(b"x")), ("zstd-versions", 0, zstd)]
        )
        [frame] = send(leader_address(cluster, "zstd-versions", 0), (request, version))
        answers[version] = [
            (p.index, p.error_code, p.base_offset)
            for t in decode_response(frame, PRODUCE, version)[1].responses
            for p in t.partition_responses
        ]
    assert answers[6] == [
        (5, ErrorCode.unknown_topic_or_partition, -1),
        (0, ErrorCode.unsupported_compression_type, -1),
    ]
    assert answers[7] == [(5, ErrorCode.unknown_topic_or_partition, -1), (0, ErrorCode.none, 0)]


def test_a_log_append_time_topic_answers_the_time_it_stamped(cluster):
    kafka_topic(cluster, "append-time", **{"message.timestamp.type": "LogAppendTime"})
    before = time.time()
    request = produce_request(9, [("append-time", 0, batch(b"v", timestamp=1000))])
    [frame] = send(leader_address(cluster, "append-time", 0), (request, 1))
    [p] = decode_response(frame, PRODUCE, 9)[1].responses[0].partition_responses
    assert p.error_code == ErrorCode.none
    assert before - 1 <= p.log_append_time.timestamp() <= time.time() + 1
    [record] = strom_records(cluster, "append-time", 1, 1)
    assert record.timestamp == round(p.log_append_time.timestamp() * 1000)


def test_a_follower_answers_not_leader_with_the_leader_and_its_kafka_endpoint(cluster):
    kafka_topic(cluster, "moved")
    leader = leaders(cluster, "moved")[0]
    follower = next(n for n in cluster.ids if n != leader)
    request = produce_request(10, [("moved", 0, batch(b"v"))])
    [frame] = send(kafka_address(cluster, follower), (request, 1))
    response = decode_response(frame, PRODUCE, 10)[1]
    [p] = response.responses[0].partition_responses
    assert p.error_code == ErrorCode.not_leader_or_follower
    assert p.error_message and "moved-0" in p.error_message
    assert p.current_leader.leader_id == leader and p.current_leader.leader_epoch >= 0
    assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [
        (leader, cluster.host[leader], cluster.kafka_port[leader])
    ]


def test_bad_inputs_are_answered_with_kafkas_codes_and_the_connection_kept(cluster):
    kafka_topic(cluster, "bad-inputs")
    address = leader_address(cluster, "bad-inputs", 0)
    unknown = produce_request(9, [("no-such-topic", 0, batch(b"v"))], acks=1)
    twice = produce_request(9, [("bad-inputs", 0, batch(b"a")), ("bad-inputs", 0, batch(b"b"))])
    acks_2 = produce_request(9, [("bad-inputs", 0, batch(b"v"))], acks=2)
    no_records = produce_request(9, [("bad-inputs", 0, None)])
    frames = send(
        address,
        (unknown, 1),
        (twice, 2),
        (acks_2, 3),
        (no_records, 4),
        (metadata_v12("bad-inputs"), 5),
    )
    assert all(f is not None for f in frames)
    codes = [
        [
            p.error_code
            for t in decode_response(f, PRODUCE, 9)[1].responses
            for p in t.partition_responses
        ]
        for f in frames[:4]
    ]
    assert codes[0] == [ErrorCode.unknown_topic_or_partition]
    assert codes[1] == [ErrorCode.invalid_request] * 2
    assert codes[2] == [ErrorCode.invalid_required_acks]
    assert codes[3] == [ErrorCode.invalid_record]  # no batch, as Kafka's validateRecords
    assert decode_response(frames[4], METADATA, 12)[0] == 5
    with pytest.raises(AssertionError):  # none of them wrote anything
        strom_records(cluster, "bad-inputs", 1, 1, timeout_s=1)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_init_producer_id_gives_an_idempotent_producer_its_id_in_each_version(cluster, version):
    request_type = load_request_schema(INIT_PRODUCER_ID, version)
    fields = {"producer_id": i64(-1), "producer_epoch": i16(-1)} if version >= 3 else {}
    request = request_type(
        transactional_id=None,
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
        **fields,
    )
    [frame] = send(kafka_address(cluster, 1), (request, 1))
    response = decode_response(frame, INIT_PRODUCER_ID, version)[1]
    assert (response.error_code, response.producer_epoch) == (ErrorCode.none, 0)
    assert response.producer_id >= 0
    if version >= 3:  # KIP-360: the producer keeps its id, its epoch bumped
        bump = request_type(
            transactional_id=None,
            transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
            producer_id=response.producer_id,
            producer_epoch=response.producer_epoch,
        )
        [frame] = send(kafka_address(cluster, 2), (bump, 2))
        bumped = decode_response(frame, INIT_PRODUCER_ID, version)[1]
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (
            ErrorCode.none,
            response.producer_id,
            1,
        )


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_idempotent_acks_all_producer_with_each_codec(cluster, codec):
    from confluent_kafka import Producer

    topic = f"librdkafka-{codec}"
    kafka_topic(cluster, topic, 3)
    producer = Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 5,
        }
    )
    delivered = []

    def on_delivery(error, message):
        assert error is None, error
        delivered.append((message.partition(), message.offset(), message.key()))

    sent = {}
    base = int(time.time() * 1000) - 10_000
    for i in range(60):
        key = f"key-{i}".encode()
        sent[key] = (f"value-{i}".encode() * 20, base + i)
        producer.produce(
            topic,
            sent[key][0],
            key,
            headers=[*HEADERS, ("i", str(i).encode())],
            timestamp=base + i,
            on_delivery=on_delivery,
        )
    assert producer.flush(30) == 0
    assert len(delivered) == 60
    records = strom_records(cluster, topic, 3, 60)
    assert sorted((r.partition, r.offset, r.key) for r in records) == sorted(delivered)
    for r in records:
        value, timestamp = sent[r.key]
        assert (r.value, r.timestamp) == (value, timestamp)
        assert r.headers == [*HEADERS, ("i", r.key.split(b"-")[1])]
    read = [
        (m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers())
        for m in librdkafka_read(cluster, topic, 3, 60)
    ]
    assert read == [
        (r.partition, r.offset, r.key, r.value, r.timestamp, r.headers) for r in records
    ]


def librdkafka_read(cluster, topic: str, partitions: int, count: int) -> list:
    """`count` messages read by confluent-kafka's consumer by assign() from offset 0, by
    partition and offset."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "group.id": "unused-by-assign",  # librdkafka's consumer needs one
            "enable.auto.commit": False,  # nothing to commit: close() asks no coordinator
        }
    )
    messages = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                messages.append(message)
    finally:
        consumer.close()
    assert len(messages) == count
    return sorted(messages, key=lambda m: (m.partition(), m.offset()))


def test_kafka_python_produces_records_strom_reads(cluster):
    from kafka import KafkaProducer

    kafka_topic(cluster, "kafka-python-produced")
    producer = KafkaProducer(
        bootstrap_servers=cluster.kafka_bootstrap(), acks="all", request_timeout_ms=10_000
    )
    try:
        metadata = [
            producer.send(
                "kafka-python-produced",
                f"v{i}".encode(),
                key=f"k{i}".encode(),
                headers=HEADERS,
                timestamp_ms=BASE_TS + i,
            ).get(timeout=30)
            for i in range(5)
        ]
    finally:
        producer.close(timeout=10)
    assert [m.offset for m in metadata] == list(range(5))
    records = strom_records(cluster, "kafka-python-produced", 1, 5)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (i, f"k{i}".encode(), f"v{i}".encode(), BASE_TS + i, HEADERS) for i in range(5)
    ]


def test_aiokafka_produces_records_strom_reads(cluster):
    from aiokafka import AIOKafkaProducer

    kafka_topic(cluster, "aiokafka-produced")

    async def produce() -> list[int]:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap(), acks="all", enable_idempotence=True
        )
        await asyncio.wait_for(producer.start(), 30)
        try:
            return [
                (
                    await asyncio.wait_for(
                        producer.send_and_wait(
                            "aiokafka-produced",
                            f"v{i}".encode(),
                            key=f"k{i}".encode(),
                            headers=HEADERS,
                            timestamp_ms=BASE_TS + i,
                        ),
                        30,
                    )
                ).offset
                for i in range(5)
            ]
        finally:
            await asyncio.wait_for(producer.stop(), 30)

    assert asyncio.run(produce()) == list(range(5))
    records = strom_records(cluster, "aiokafka-produced", 1, 5)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (i, f"k{i}".encode(), f"v{i}".encode(), BASE_TS + i, HEADERS) for i in range(5)
    ]
