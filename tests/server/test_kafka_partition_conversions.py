"""The Kafka listener's ListOffsets, OffsetForLeaderEpoch and DeleteRecords convert a
request's partitions to the shared path's items, and its answers back, in loop slices, as
the shared path (server/requests/) works them: a 1 MB request may name 250,000 partitions
(the Kafka-protocol fuzzer's ListOffsets of 37,500 topics, seed 18 case 390, and
OffsetForLeaderEpoch, seed 20 case 325: 0.25-0.36 s of the loop converting)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from broker.producer_ids import ProducerIdManager
from server.kafka.apis import DELETE_RECORDS, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, SERVED
from server.kafka.data_plane import DataPlane
from server.kafka.delete_records_api import delete_records_api
from server.kafka.frames import Request
from server.kafka.offsets_api import list_offsets_api, offset_for_leader_epoch_api
from tests.server.loop_turns import others_ran_as
from tests.server.test_client_requests import ALICE, OPEN, leading, run
from tests.server.test_kafka_group_apis import MANY, _element, sample


async def _nothing() -> None:
    return None


def _naming_many(key: int, version: int) -> Any:
    """A request of `key` naming MANY partitions of topic "gone", which nobody holds."""
    body_type = load_request_schema(key, version)
    topic_type = _element(body_type, "topics")
    partition = sample(_element(topic_type, "partitions"))
    if key == LIST_OFFSETS:
        partitions = [
            dataclasses.replace(partition, partition_index=i32(i), timestamp=i64(-1))
            for i in range(MANY)
        ]
        topic = dataclasses.replace(sample(topic_type), name="gone")
    elif key == OFFSET_FOR_LEADER_EPOCH:
        partitions = [dataclasses.replace(partition, partition=i32(i)) for i in range(MANY)]
        topic = dataclasses.replace(sample(topic_type), topic="gone")
    else:
        partitions = [dataclasses.replace(partition, partition_index=i32(i)) for i in range(MANY)]
        topic = dataclasses.replace(sample(topic_type), name="gone")
    topic = dataclasses.replace(topic, partitions=tuple(partitions))
    return dataclasses.replace(sample(body_type), topics=(topic,))


@pytest.mark.parametrize(
    ("key", "handler"),
    [
        (LIST_OFFSETS, list_offsets_api),
        (OFFSET_FOR_LEADER_EPOCH, offset_for_leader_epoch_api),
        (DELETE_RECORDS, delete_records_api),
    ],
    ids=["ListOffsets", "OffsetForLeaderEpoch", "DeleteRecords"],
)
def test_partitions_are_converted_both_ways_in_slices(tmp_path, key, handler):
    manager, _ = leading(tmp_path, [1])
    plane = DataPlane(manager, ProducerIdManager(1, lambda: 1, None), OPEN, _nothing)  # type: ignore[arg-type]
    version = SERVED[key].max_version
    request = Request(key, version, 7, "client", _naming_many(key, version))

    response, turns = run(manager, others_ran_as(ALICE, handler(plane, request)))
    # The shared path's slices (5) and the listener's both ways (5 each).
    assert turns >= 12, "the loop ran nothing else meanwhile"
    [topic] = response.topics
    assert len(topic.partitions) == MANY
    assert {p.error_code for p in topic.partitions} == {ErrorCode.unknown_topic_or_partition}
