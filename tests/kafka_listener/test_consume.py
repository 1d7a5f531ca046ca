"""Fetch on the Kafka listener (issue 20): records written through Strom's own producer are
read by Kafka's clients (confluent-kafka, kafka-python, aiokafka, each by assign()) with the
same offsets, keys, headers and timestamps; raw frames check each served version, topic
ids (v13+), the answer of a broker without fetch session slots (KIP-227), a replica's fetch
refused, and bad inputs answered with Kafka's codes."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from strom_api.records import decode_batches
from tests.kafka_listener.data_helpers import (
    FETCH,
    expected_strom_records,
    fetch_request,
    kafka_topic,
    leader_address,
    send,
    strom_produced,
    topic_id,
)
from tests.kafka_listener.kafka_cluster import decode_response

COUNT = 7


@pytest.fixture(scope="module")
def written(cluster) -> str:
    """A one-partition topic holding COUNT records written through Strom's producer."""
    kafka_topic(cluster, "written")
    strom_produced(cluster, "written", COUNT)
    return "written"


def fetched(cluster, version: int, request) -> tuple[int, object]:
    [frame] = send(leader_address(cluster, "written", 0), (request, 9))
    assert frame is not None
    return decode_response(frame, FETCH, version)


@pytest.mark.parametrize("version", range(11, 17))
def test_each_served_version_reads_the_records_as_the_log_holds_them(cluster, written, version):
    topic = topic_id(cluster, written) if version >= 13 else written
    for isolation_level, aborted in ((0, None), (1, ())):
        request = fetch_request(version, [(topic, [(0, 2)])], isolation_level=isolation_level)
        correlation_id, response = fetched(cluster, version, request)
        assert correlation_id == 9
        assert (response.error_code, response.session_id) == (ErrorCode.none, 0)
        [answer] = response.responses
        assert (answer.topic_id if version >= 13 else answer.topic) == topic
        [p] = answer.partitions
        assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (
            ErrorCode.none,
            COUNT,
            COUNT,
            0,
        )
        assert (p.preferred_read_replica, p.aborted_transactions) == (-1, aborted)
        records = [r for _, batch in decode_batches(p.records) for r in batch]
        # whole batches: from the one holding offset 2, to the end
        assert [r.offset for r in records if r.offset >= 2] == list(range(2, COUNT))
        assert [r.key for r in records] == [f"key-{r.offset}".encode() for r in records]


def test_an_unknown_topic_id_is_answered_unknown_topic_id(cluster, written):
    missing = uuid.uuid4()
    request = fetch_request(13, [(missing, [(0, 0)]), (topic_id(cluster, written), [(0, 0)])])
    _, response = fetched(cluster, 13, request)
    unknown, known = response.responses
    assert unknown.topic_id == missing
    assert [p.error_code for p in unknown.partitions] == [ErrorCode.unknown_topic_id]
    assert [p.error_code for p in known.partitions] == [ErrorCode.none]


def test_without_session_slots_full_fetches_are_answered_and_incremental_ones_refused(
    cluster, written
):
    """As a Kafka broker with max.incremental.fetch.session.cache.slots=0 (KIP-227)."""
    for session_id, epoch in ((0, 0), (0, -1), (1234, 0)):  # full fetches, sessions closed
        request = fetch_request(
            12, [(written, [(0, 0)])], session_id=session_id, session_epoch=epoch
        )
        _, response = fetched(cluster, 12, request)
        assert (response.error_code, response.session_id) == (ErrorCode.none, 0)
        assert [p.error_code for p in response.responses[0].partitions] == [ErrorCode.none]
    for session_id, epoch in ((1234, 1), (0, 5)):  # incremental: no such session
        request = fetch_request(
            12, [(written, [(0, 0)])], session_id=session_id, session_epoch=epoch
        )
        _, response = fetched(cluster, 12, request)
        assert response.error_code == ErrorCode.fetch_session_id_not_found
        assert (response.session_id, response.responses) == (0, ())


@pytest.mark.parametrize("version", [11, 15])
def test_a_replicas_fetch_is_refused_not_leader_or_follower(cluster, written, version):
    """Strom's followers fetch over ReplicaService (replica_id before v15, replica_state
    from v15)."""
    topic = topic_id(cluster, written) if version >= 13 else written
    _, response = fetched(
        cluster, version, fetch_request(version, [(topic, [(0, 0)])], replica_id=2)
    )
    [p] = response.responses[0].partitions
    assert (p.error_code, p.records) == (ErrorCode.not_leader_or_follower, b"")


def test_bad_inputs_are_answered_with_kafkas_codes(cluster, written):
    twice = fetch_request(12, [(written, [(0, 0), (0, 1)])])
    unknown = fetch_request(12, [("no-such-topic", [(0, 0)])])
    past_the_end = fetch_request(12, [(written, [(0, COUNT + 100)])])
    frames = send(leader_address(cluster, written, 0), (twice, 1), (unknown, 2), (past_the_end, 3))
    codes = [
        [p.error_code for t in decode_response(f, FETCH, 12)[1].responses for p in t.partitions]
        for f in frames
    ]
    assert codes == [
        [ErrorCode.invalid_request] * 2,
        [ErrorCode.unknown_topic_or_partition],
        [ErrorCode.offset_out_of_range],
    ]


def test_a_fetch_at_the_end_waits_max_wait_for_min_bytes(cluster, written):
    request = fetch_request(12, [(written, [(0, COUNT)])], max_wait_ms=600, min_bytes=1)
    start = time.monotonic()
    _, response = fetched(cluster, 12, request)
    assert time.monotonic() - start >= 0.5
    [p] = response.responses[0].partitions
    assert (p.error_code, p.records) == (ErrorCode.none, b"")


def test_confluent_kafka_reads_strom_records_by_assign(cluster, written):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "group.id": "unused-by-assign",  # librdkafka's consumer needs one
            "enable.auto.commit": False,  # nothing to commit: close() asks no coordinator
        }
    )
    try:
        consumer.assign([TopicPartition(written, 0, 0)])
        messages = []
        deadline = time.monotonic() + 30
        while len(messages) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                messages.append(message)
    finally:
        consumer.close()
    assert [(m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers()) for m in messages] == [
        (o, k, v, t, h) for o, k, v, t, h in expected_strom_records(COUNT)
    ]


def test_kafka_python_reads_strom_records_by_assign(cluster, written):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=cluster.kafka_bootstrap(),
        enable_auto_commit=False,
        request_timeout_ms=30_000,
    )
    try:
        partition = TopicPartition(written, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        records = []
        deadline = time.monotonic() + 30
        while len(records) < COUNT and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (o, k, v, t, h) for o, k, v, t, h in expected_strom_records(COUNT)
    ]


def test_aiokafka_reads_strom_records_by_assign(cluster, written):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def consume() -> list:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=cluster.kafka_bootstrap(), enable_auto_commit=False
        )
        await asyncio.wait_for(consumer.start(), 30)
        try:
            partition = TopicPartition(written, 0)
            consumer.assign([partition])
            consumer.seek(partition, 0)
            records = []
            while len(records) < COUNT:
                records.append(await asyncio.wait_for(consumer.getone(), 30))
            return records
        finally:
            await asyncio.wait_for(consumer.stop(), 30)

    records = asyncio.run(consume())
    assert [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in records] == [
        (o, k, v, t, h) for o, k, v, t, h in expected_strom_records(COUNT)
    ]
