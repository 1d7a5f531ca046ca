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
from server.kafka.apis import CREATE_PARTITIONS, SERVED
from server.kafka.frames import Request
from server.kafka.topic_admin import CREATE_PARTITIONS_IN_FLIGHT, TopicAdmin
from strom_api.v1 import controller_pb2
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
