"""The Kafka listener's cluster admin APIs (server/kafka/cluster_admin.py) on a dispatcher
without a cluster: what they answer without asking the controller."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from server.kafka.apis import (
    ALTER_PARTITION_REASSIGNMENTS,
    DESCRIBE_QUORUM,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
    SERVED,
)
from server.kafka.cluster_admin import ClusterAdmin
from server.kafka.frames import Request
from server.request_authorization import RequestAuthorizer
from strom_api.v1 import controller_pb2
from tests.server.group_paths import no_groups
from tests.server.loop_turns import others_ran, others_ran_as
from tests.server.test_kafka_group_apis import ALICE, MANY, _element, dispatcher, sample


@pytest.mark.parametrize("shape", ["one topic of many partitions", "many topics of one"])
def test_describe_quorum_of_partitions_other_than_the_metadata_log_is_answered_in_slices(shape):
    """Every partition but __cluster_metadata-0 asked alone is UNKNOWN_TOPIC_OR_PARTITION, as
    Kafka's KafkaRaftClient answers; a request of 180,000 partitions held the loop 1 s (the
    Kafka-protocol fuzzer, seed 8 case 303)."""
    version = SERVED[DESCRIBE_QUORUM].max_version
    body_type = load_request_schema(DESCRIBE_QUORUM, version)
    topic_type = _element(body_type, "topics")
    partition = sample(_element(topic_type, "partitions"))
    if shape == "one topic of many partitions":
        partitions = tuple(
            dataclasses.replace(partition, partition_index=i32(i)) for i in range(MANY)
        )
        topics = (dataclasses.replace(sample(topic_type), topic_name="t", partitions=partitions),)
    else:  # the fuzzer's seed 26, case 412: 34,615 topics held the loop 0.3 s
        topics = tuple(
            dataclasses.replace(sample(topic_type), topic_name=f"t{i}", partitions=(partition,))
            for i in range(MANY)
        )
    request = Request(DESCRIBE_QUORUM, version, 7, "client", sample(body_type))
    request = dataclasses.replace(request, body=dataclasses.replace(request.body, topics=topics))
    apis = dispatcher(no_groups())
    response, turns = asyncio.run(others_ran_as(ALICE, apis.handle(request)))
    assert turns >= 4, "the loop ran nothing else meanwhile"
    answered = [p for t in response.topics for p in t.partitions]
    assert len(answered) == MANY
    assert {p.error_code for p in answered} == {ErrorCode.unknown_topic_or_partition}


class EchoingController:
    """Answers ElectLeaders and AlterPartitionReassignments with a success for every
    partition asked, and ListPartitionReassignments with every partition asked in progress."""

    async def __call__(self, method: str, request: Any) -> Any:
        if method == "ElectLeaders":
            asked = [p for p in request.partitions]
            return controller_pb2.ElectLeadersResponse(
                results=[controller_pb2.PartitionResult(partition=p) for p in asked]
            )
        if method == "AlterPartitionReassignments":
            return controller_pb2.AlterPartitionReassignmentsResponse(
                results=[
                    controller_pb2.PartitionResult(partition=r.partition)
                    for r in request.reassignments
                ]
            )
        assert method == "ListPartitionReassignments"
        return controller_pb2.ListPartitionReassignmentsResponse(
            reassignments=[
                controller_pb2.ListPartitionReassignmentsResponse.Ongoing(
                    partition=p, replicas=[1, 2, 3], adding_replicas=[3]
                )
                for p in request.partitions
            ]
        )


def _one_topic_of_many(
    key: int, version: int, topics_field: str, name_field: str, topics: int = 1
) -> Request:
    """A request of API `key` naming MANY partitions of topic "t", or `topics` topics of
    MANY // topics partitions each."""
    body_type = load_request_schema(key, version)
    topic_type = _element(body_type, topics_field)
    topic = sample(topic_type)
    if key == ELECT_LEADERS:
        partitions: Any = tuple(i32(i) for i in range(MANY))
        topic = dataclasses.replace(topic, **{name_field: "t", "partitions": partitions})
    elif key == ALTER_PARTITION_REASSIGNMENTS:
        partition = sample(_element(topic_type, "partitions"))
        partitions = tuple(
            dataclasses.replace(partition, partition_index=i32(i), replicas=(i32(1),))
            for i in range(MANY)
        )
        topic = dataclasses.replace(topic, **{name_field: "t", "partitions": partitions})
    else:
        indexes = tuple(i32(i) for i in range(MANY))
        topic = dataclasses.replace(topic, **{name_field: "t", "partition_indexes": indexes})
    if topics > 1:
        field = "partition_indexes" if key == LIST_PARTITION_REASSIGNMENTS else "partitions"
        share = getattr(topic, field)[: MANY // topics]
        many = tuple(
            dataclasses.replace(topic, **{name_field: f"t{i}", field: share}) for i in range(topics)
        )
    else:
        many = (topic,)
    body = dataclasses.replace(sample(body_type), **{topics_field: many})
    return Request(key, version, 7, "client", body)


@pytest.mark.parametrize(
    ("key", "topics_field", "name_field", "answers"),
    [
        (ELECT_LEADERS, "topic_partitions", "topic", "replica_election_results"),
        (ALTER_PARTITION_REASSIGNMENTS, "topics", "name", "responses"),
        (LIST_PARTITION_REASSIGNMENTS, "topics", "name", "topics"),
    ],
    ids=["ElectLeaders", "AlterPartitionReassignments", "ListPartitionReassignments"],
)
@pytest.mark.parametrize("topics", [1, 10], ids=["one topic", "10 topics"])
def test_partition_admin_requests_are_converted_both_ways_in_slices(
    key, topics_field, name_field, answers, topics
):
    """The request's partitions into the controller's message, and the controller's answer
    of each back, with the loop let run between slices: one topic of 250,000 partitions is
    a 1 MB request (the Kafka-protocol fuzzer's ElectLeaders of seed 24, case 517)."""
    version = SERVED[key].max_version
    admin = ClusterAdmin(EchoingController(), "KAFKA", RequestAuthorizer())
    handler = {
        ELECT_LEADERS: admin.elect_leaders,
        ALTER_PARTITION_REASSIGNMENTS: admin.alter_partition_reassignments,
        LIST_PARTITION_REASSIGNMENTS: admin.list_partition_reassignments,
    }[key]
    request = _one_topic_of_many(key, version, topics_field, name_field, topics)
    response, turns = asyncio.run(others_ran(handler(request)))
    # Request, answer and response each in 5 or more slices, however the partitions are
    # shared among topics (each topic's 500 here would not fill a slice of its own).
    assert turns >= 12, "the loop ran nothing else meanwhile"
    answered = getattr(response, answers)
    assert len(answered) == topics
    partitions = [
        p for t in answered for p in (t.partition_result if key == ELECT_LEADERS else t.partitions)
    ]
    assert len(partitions) == MANY
