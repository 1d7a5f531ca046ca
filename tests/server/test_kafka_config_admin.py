"""The Kafka listener's config APIs (server/kafka/config_admin.py) against a controller
that answers every resource: a request's resources are converted both ways in loop slices
(a 1 MB DescribeConfigs may name 33,333 of them, each answered with its entries: the
Kafka-protocol fuzzer's seed 24, case 517, 0.43 s of the loop)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from server.kafka.apis import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, SERVED
from server.kafka.config_admin import ConfigAdmin
from server.kafka.frames import Request
from strom_api.v1 import controller_pb2
from tests.server.loop_turns import others_ran
from tests.server.test_kafka_group_apis import MANY, _element, sample

TOPIC = 2  # Kafka's ConfigResource type of a topic


async def every_resource_answered(method: str, request: Any) -> Any:
    if method == "DescribeConfigs":
        return controller_pb2.DescribeConfigsResponse(
            results=[
                controller_pb2.DescribeConfigsResponse.Result(
                    resource=r,
                    entries=[
                        controller_pb2.DescribeConfigsResponse.Entry(
                            name="retention.ms", value="1000", source="DYNAMIC_TOPIC_CONFIG"
                        )
                    ],
                )
                for r in request.resources
            ]
        )
    assert method == "IncrementalAlterConfigs"
    return controller_pb2.IncrementalAlterConfigsResponse(
        results=[
            controller_pb2.IncrementalAlterConfigsResponse.Result(resource=r.resource)
            for r in request.resources
        ]
    )


def _naming_many(key: int, version: int) -> Request:
    body_type = load_request_schema(key, version)
    resource = dataclasses.replace(sample(_element(body_type, "resources")), resource_type=TOPIC)
    if key == DESCRIBE_CONFIGS:
        resource = dataclasses.replace(resource, configuration_keys=None)
    else:
        resource = dataclasses.replace(resource, configs=())
    resources = tuple(dataclasses.replace(resource, resource_name=f"t{i}") for i in range(MANY))
    body = dataclasses.replace(sample(body_type), resources=resources)
    return Request(key, version, 7, "client", body)


@pytest.mark.parametrize(
    "key",
    [DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, ALTER_CONFIGS],
    ids=lambda k: SERVED[k].name,
)
def test_many_resources_are_converted_both_ways_in_slices(key):
    admin = ConfigAdmin(every_resource_answered)
    handler = {
        DESCRIBE_CONFIGS: admin.describe_configs,
        INCREMENTAL_ALTER_CONFIGS: admin.incremental_alter_configs,
        ALTER_CONFIGS: admin.alter_configs,
    }[key]
    request = _naming_many(key, SERVED[key].max_version)
    response, turns = asyncio.run(others_ran(handler(request)))
    assert turns >= 12, "the loop ran nothing else meanwhile"
    results = response.results if key == DESCRIBE_CONFIGS else response.responses
    assert len(results) == MANY
    assert {r.error_code for r in results} == {ErrorCode.none}
    if key == DESCRIBE_CONFIGS:
        assert all(len(r.configs) == 1 for r in results)


@pytest.mark.parametrize(
    "key", [INCREMENTAL_ALTER_CONFIGS, ALTER_CONFIGS], ids=lambda k: SERVED[k].name
)
def test_one_resource_of_many_configs_is_converted_in_slices(key):
    """A 1 MB request fits one resource with tens of thousands of configs: the slices count
    its configs, not just its resources."""
    asked: list[Any] = []

    async def controller(method: str, request: Any) -> Any:
        asked.append(request)
        return await every_resource_answered(method, request)

    admin = ConfigAdmin(controller)
    handler = (
        admin.incremental_alter_configs if key == INCREMENTAL_ALTER_CONFIGS else admin.alter_configs
    )
    body_type = load_request_schema(key, SERVED[key].max_version)
    resource_type = _element(body_type, "resources")
    config = dataclasses.replace(sample(_element(resource_type, "configs")), value="1000")
    configs = tuple(dataclasses.replace(config, name=f"c{i}") for i in range(MANY))
    resource = dataclasses.replace(sample(resource_type), resource_type=TOPIC, configs=configs)
    body = dataclasses.replace(sample(body_type), resources=(resource,))
    request = Request(key, SERVED[key].max_version, 7, "client", body)
    response, turns = asyncio.run(others_ran(handler(request)))
    assert turns >= 4, "the loop ran nothing else meanwhile"
    assert [r.error_code for r in response.responses] == [ErrorCode.none]
    (sent,) = asked
    assert sent.replace == (key == ALTER_CONFIGS)
    assert [op.name for op in sent.resources[0].ops] == [f"c{i}" for i in range(MANY)]
