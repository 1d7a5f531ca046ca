"""Fetch on the Kafka listener (issue 20): records written through Strom's own producer are
read by Kafka's clients (confluent-kafka, kafka-python, aiokafka, each by assign()) with the
same offsets, keys, headers and timestamps; raw frames check each served version, topic
ids (v13+), a replica's fetch refused, and bad inputs answered with Kafka's codes."""

from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import subprocess
import time
import uuid

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta

from strom.admin import AdminClient, OffsetSpec, TopicPartition
from strom_api.records import decode_batches
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.data_helpers import (
    BASE_TS,
    DELETE_RECORDS,
    FETCH,
    LIST_OFFSETS,
    OFFSET_FOR_LEADER_EPOCH,
    expected_strom_records,
    fetch_request,
    kafka_topic,
    leader_address,
    leader_epoch,
    list_offsets_request,
    send,
    strom_produced,
    strom_records,
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


@pytest.mark.parametrize("version", range(4, 17))
def test_each_served_version_reads_the_records_as_the_log_holds_them(cluster, written, version):
    topic = topic_id(cluster, written) if version >= 13 else written
    for isolation_level, aborted in ((0, None), (1, ())):
        request = fetch_request(version, [(topic, [(0, 2)])], isolation_level=isolation_level)
        correlation_id, response = fetched(cluster, version, request)
        assert correlation_id == 9
        if version >= 7:  # fetch sessions (KIP-227)
            assert (response.error_code, response.session_id) == (ErrorCode.none, 0)
        [answer] = response.responses
        assert (answer.topic_id if version >= 13 else answer.topic) == topic
        [p] = answer.partitions
        assert (p.error_code, p.high_watermark, p.last_stable_offset) == (
            ErrorCode.none,
            COUNT,
            COUNT,
        )
        assert p.aborted_transactions == aborted
        if version >= 5:
            assert p.log_start_offset == 0
        if version >= 11:
            assert p.preferred_read_replica == -1
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


# --- ListOffsets, OffsetForLeaderEpoch, DeleteRecords ------------------------------------------


def offsets(
    cluster, version: int, topic: str, partitions: list[tuple[int, int]], at: str = ""
) -> list:
    request = list_offsets_request(version, topic, partitions)
    [frame] = send(at or leader_address(cluster, topic, 0), (request, 4))
    assert frame is not None
    [answer] = decode_response(frame, LIST_OFFSETS, version)[1].topics
    return list(answer.partitions)


@pytest.mark.parametrize("version", range(1, 11))
def test_list_offsets_answers_each_served_version(cluster, written, version):
    # earliest, latest, a time (the 4th record's), max timestamp (v7+), earliest local (v8+),
    # latest tiered (v9+): Strom has no remote storage, as Kafka answers without it
    asked = [(0, -2), (0, -1), (0, BASE_TS + 3)]
    expected = [(0, -1), (COUNT, -1), (3, BASE_TS + 3)]
    if version >= 7:
        asked.append((0, -3))
        expected.append((COUNT - 1, BASE_TS + COUNT - 1))
    if version >= 8:
        asked.append((0, -4))
        expected.append((0, -1))
    if version >= 9:
        asked.append((0, -5))
        expected.append((-1, -1))
    # One request each: a partition named twice in a request is refused (the test below).
    answers = [offsets(cluster, version, written, [one])[0] for one in asked]
    assert all(p.error_code == ErrorCode.none for p in answers)
    assert [(p.offset, p.timestamp) for p in answers] == expected
    if version >= 4:  # the epoch that wrote the offset
        assert all(p.leader_epoch >= 0 for p in answers if p.offset >= 0)


def test_list_offsets_bad_inputs_are_answered_with_kafkas_codes(cluster, written):
    at = leader_address(cluster, written, 0)
    [unknown] = offsets(cluster, 7, "no-such-topic", [(0, -1)], at)
    [nothing] = offsets(cluster, 7, written, [(0, -7)])
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    assert nothing.error_code == ErrorCode.invalid_request
    # As Kafka answers ListOffsets v1+: each copy of a partition named twice.
    twice = offsets(cluster, 7, written, [(0, -1), (0, -2)])
    assert [p.error_code for p in twice] == [ErrorCode.invalid_request] * 2


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_answers_where_an_epoch_ends(cluster, written, version):
    epoch = leader_epoch(cluster, written)
    request_type = load_request_schema(OFFSET_FOR_LEADER_EPOCH, version)
    module = __import__(request_type.__module__, fromlist=["OffsetForLeaderTopic"])
    fields = {"replica_id": i32(-1)} if version >= 3 else {}
    asked = [(0, epoch), (0, epoch + 1000), (7, 0)]  # current, none yet, no such partition
    request = request_type(
        topics=(
            module.OffsetForLeaderTopic(
                topic=written,
                partitions=tuple(
                    module.OffsetForLeaderPartition(
                        partition=i32(p), current_leader_epoch=i32(-1), leader_epoch=i32(e)
                    )
                    for p, e in asked
                ),
            ),
        ),
        **fields,
    )
    [frame] = send(leader_address(cluster, written, 0), (request, 6))
    [answer] = decode_response(frame, OFFSET_FOR_LEADER_EPOCH, version)[1].topics
    assert [(p.error_code, p.leader_epoch, p.end_offset) for p in answer.partitions] == [
        (ErrorCode.none, epoch, COUNT),
        (ErrorCode.none, -1, -1),  # Kafka's answer for an epoch above the latest
        (ErrorCode.unknown_topic_or_partition, -1, -1),
    ]


def test_delete_records_moves_the_log_start_as_list_offsets_and_strom_then_see(cluster):
    kafka_topic(cluster, "deleted")
    strom_produced(cluster, "deleted", 5)

    def delete(offset: int, version: int = 2) -> object:
        request_type = load_request_schema(DELETE_RECORDS, version)
        module = __import__(request_type.__module__, fromlist=["DeleteRecordsTopic"])
        request = request_type(
            topics=(
                module.DeleteRecordsTopic(
                    name="deleted",
                    partitions=(
                        module.DeleteRecordsPartition(partition_index=i32(0), offset=offset),
                    ),
                ),
            ),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        )
        [frame] = send(leader_address(cluster, "deleted", 0), (request, 8))
        [answer] = decode_response(frame, DELETE_RECORDS, version)[1].topics
        [p] = answer.partitions
        return p

    for version, offset in ((0, 1), (1, 2), (2, 3)):  # v0 and v1: the same, not flexible
        moved = delete(offset, version)
        assert (moved.error_code, moved.low_watermark) == (ErrorCode.none, offset)
    past = delete(99)
    assert past.error_code == ErrorCode.offset_out_of_range
    [earliest] = offsets(cluster, 7, "deleted", [(0, -2)])
    assert earliest.offset == 3
    with AdminClient(bootstrap(cluster)) as admin:
        low = admin.list_offsets({TopicPartition("deleted", 0): OffsetSpec.earliest()})
    assert low[TopicPartition("deleted", 0)].offset == 3


def test_confluent_kafka_offsets_for_times(cluster, written):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Partition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "group.id": "unused-by-offsets-for-times",
            "enable.auto.commit": False,
        }
    )
    try:
        found = consumer.offsets_for_times([Partition(written, 0, BASE_TS + 2)], timeout=20)
        late = consumer.offsets_for_times([Partition(written, 0, BASE_TS + 600_000)], timeout=20)
        low, high = consumer.get_watermark_offsets(Partition(written, 0), timeout=20)
    finally:
        consumer.close()
    assert [(p.offset, p.error) for p in found] == [(2, None)]
    assert [(p.offset, p.error) for p in late] == [(-1, None)]  # no record that recent
    assert (low, high) == (0, COUNT)


def test_kcat_produces_with_keys_and_headers_and_consumes_from_the_beginning(cluster):
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (Debian package kcat; .ci/run installs it)")
    kafka_topic(cluster, "kcat")
    produced = subprocess.run(
        [kcat, "-P", "-b", cluster.kafka_bootstrap(), "-t", "kcat", "-p", "0", "-K", ":"]
        + ["-H", "trace=t-1", "-H", "source=kcat"],
        input="k1:first\nk2:second\nk3:third\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [kcat, "-C", "-b", cluster.kafka_bootstrap(), "-t", "kcat", "-o", "beginning", "-e", "-J"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.returncode == 0, consumed.stderr
    messages = [json.loads(line) for line in consumed.stdout.splitlines() if line.strip()]
    assert [(m["partition"], m["offset"], m["key"], m["payload"]) for m in messages] == [
        (0, 0, "k1", "first"),
        (0, 1, "k2", "second"),
        (0, 2, "k3", "third"),
    ]
    assert all(m["headers"] == ["trace", "t-1", "source", "kcat"] for m in messages)
    # the same records through Strom's own client
    records = strom_records(cluster, "kcat", 1, 3)
    assert [(r.key, r.value, r.headers) for r in records] == [
        (k, v, [("trace", b"t-1"), ("source", b"kcat")])
        for k, v in ((b"k1", b"first"), (b"k2", b"second"), (b"k3", b"third"))
    ]
    assert [r.timestamp for r in records] == [m["ts"] for m in messages]
