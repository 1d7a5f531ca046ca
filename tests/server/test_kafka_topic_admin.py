"""The Kafka listener's CreatePartitions (server/kafka/topic_admin.py) against a
controller that answers every topic: the controller's call takes one topic, so a request
naming thousands puts at most CREATE_PARTITIONS_IN_FLIGHT of them in flight at once, and
each topic is still answered, in the request's order."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from metadata.image import MetadataImage
from server.kafka.apis import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, SERVED
from server.kafka.frames import Request
from server.kafka.topic_admin import CREATE_PARTITIONS_IN_FLIGHT, TopicAdmin
from strom_api.v1 import controller_pb2
from tests.server.loop_turns import others_ran
from tests.server.test_kafka_group_apis import _element, sample

TOPICS = 2_000


class CountingController:
    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.asked: list[str] = []

    async def __call__(self, method: str, request: Any) -> Any:
        assert method == "CreatePartitions"
        self.asked.append(request.name)
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.001)  # a round trip to the controller
            return controller_pb2.CreatePartitionsResponse()
        finally:
            self.in_flight -= 1


def test_create_partitions_of_many_topics_keeps_few_calls_in_flight():
    version = SERVED[CREATE_PARTITIONS].max_version
    body_type = load_request_schema(CREATE_PARTITIONS, version)
    topic = dataclasses.replace(sample(_element(body_type, "topics")), assignments=None)
    topics = tuple(dataclasses.replace(topic, name=f"t{i}") for i in range(TOPICS))
    body = dataclasses.replace(sample(body_type), topics=topics, validate_only=False)
    controller = CountingController()
    admin = TopicAdmin(controller, lambda: MetadataImage())
    response = asyncio.run(
        admin.create_partitions(Request(CREATE_PARTITIONS, version, 7, "c", body))
    )
    assert 1 < controller.most <= CREATE_PARTITIONS_IN_FLIGHT
    assert sorted(controller.asked) == sorted(f"t{i}" for i in range(TOPICS))
    assert [r.name for r in response.results] == [f"t{i}" for i in range(TOPICS)]
    assert {r.error_code for r in response.results} == {ErrorCode.none}


async def answering_every_topic(method: str, request: Any) -> Any:
    if method == "CreateTopics":
        return controller_pb2.CreateTopicsResponse(
            topics=[
                controller_pb2.CreateTopicsResponse.Result(
                    name=t.name, topic_id=b"i" * 16, num_partitions=1, replication_factor=1
                )
                for t in request.topics
            ]
        )
    assert method == "DeleteTopics"
    return controller_pb2.DeleteTopicsResponse(
        topics=[controller_pb2.DeleteTopicsResponse.Result(name=n) for n in request.names]
    )


def test_create_and_delete_topics_of_many_names_let_the_loop_run_between_slices():
    """A 1 MB CreateTopics or DeleteTopics names 50,000 topics: the listener's loops over
    them (to the controller's message, and its answer back) run in loop slices."""
    admin = TopicAdmin(answering_every_topic, lambda: MetadataImage())
    names = [f"t{i}" for i in range(5_000)]
    create_version = SERVED[CREATE_TOPICS].max_version
    create_type = load_request_schema(CREATE_TOPICS, create_version)
    topic = dataclasses.replace(sample(_element(create_type, "topics")), assignments=(), configs=())
    create = dataclasses.replace(
        sample(create_type),
        topics=tuple(dataclasses.replace(topic, name=n) for n in names),
        validate_only=False,
    )
    created, turns = asyncio.run(
        others_ran(admin.create_topics(Request(CREATE_TOPICS, create_version, 7, "c", create)))
    )
    assert turns >= 8, "the loop ran nothing else meanwhile"
    assert [t.name for t in created.topics] == names
    assert {t.error_code for t in created.topics} == {ErrorCode.none}
    delete = dataclasses.replace(
        sample(load_request_schema(DELETE_TOPICS, 5)), topic_names=tuple(names)
    )
    deleted, turns = asyncio.run(
        others_ran(admin.delete_topics(Request(DELETE_TOPICS, 5, 7, "c", delete)))
    )
    assert turns >= 8, "the loop ran nothing else meanwhile"
    assert sorted(t.name for t in deleted.responses) == sorted(names)
    assert {t.error_code for t in deleted.responses} == {ErrorCode.none}
