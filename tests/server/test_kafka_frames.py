"""The Kafka listener's frames and table, sans-I/O (server/kafka/frames.py, apis.py): every
version the table serves has kio's request and response classes, ApiVersions advertises
the table and nothing else, and a response frame carries its size and correlation id."""

from __future__ import annotations

import asyncio
import datetime
import struct
import typing
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from broker.producer_ids import ProducerIdManager
from broker.replica_config import ReplicaConfig
from broker.replica_manager import ReplicaManager
from metadata.image import MetadataImage
from server.kafka.api_versions import api_versions_response
from server.kafka.apis import SERVED
from server.kafka.data_plane import DataPlane
from server.kafka.frames import (
    InvalidRequest,
    Request,
    holds_many,
    parse_request,
    response_frame,
)
from server.kafka.handlers import KafkaApis
from server.metadata_answer import MetadataSources
from server.request_authorization import RequestAuthorizer
from tests.server.group_paths import no_groups


async def _no_controller(method: str, request: Any) -> None:
    return None


async def _nothing() -> None:
    return None


def idle_data_plane() -> DataPlane:
    """A broker holding no partition (the tests here send no data-plane request)."""
    replicas = ReplicaManager(1, None, ReplicaConfig(), {}, _no_controller, lambda: 1)  # type: ignore[arg-type]
    producer_ids = ProducerIdManager(1, lambda: 1, _no_controller)
    return DataPlane(replicas, producer_ids, RequestAuthorizer(), _nothing)


def test_every_served_version_has_its_request_and_response_classes():
    for api in SERVED.values():
        for version in range(api.min_version, api.max_version + 1):
            assert load_request_schema(api.key, version).__api_key__ == api.key
            assert load_response_schema(api.key, version).__version__ == version


@pytest.mark.parametrize("version", range(5))
def test_api_versions_advertises_the_table(version):
    response = api_versions_response(version)
    assert response.error_code == ErrorCode.none
    assert {(k.api_key, k.min_version, k.max_version) for k in response.api_keys} == {
        (a.key, a.min_version, a.max_version) for a in SERVED.values()
    }


def test_a_response_frame_is_its_size_then_the_header_then_the_body():
    frame = response_frame(1234, api_versions_response(0))
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    assert struct.unpack_from(">i", frame, 4) == (1234,)  # header v0: the correlation id


def test_an_api_the_table_lacks_is_refused_with_kafkas_words():
    frame = struct.pack(">hhih", 0, 11, 1, -1)  # Produce v11
    with pytest.raises(
        InvalidRequest, match="api key PRODUCE with version 11 which is not enabled"
    ):
        parse_request(frame)


@pytest.mark.parametrize(
    "name, version, valid",
    [
        ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0", True),
        ("apache-kafka-java", "4.0.0", True),
        ("bad name", "1.0", False),
        ("-leading", "1.0", False),
        ("name", "", False),
    ],
)
def test_api_versions_v3_names_its_client_software_as_kafka_requires(name, version, valid):
    """KIP-511: Kafka answers a v3+ request with an invalid name or version INVALID_REQUEST."""
    request = load_request_schema(18, 3)(client_software_name=name, client_software_version=version)
    parsed = Request(18, 3, 1, "test", request)
    apis = KafkaApis(
        "KAFKA",
        MetadataImage,
        MetadataSources("cluster", lambda: -1, RequestAuthorizer(), None, False),
        no_groups(),
        idle_data_plane(),
    )
    response = asyncio.run(apis.handle(parsed))
    assert response.error_code == (ErrorCode.none if valid else ErrorCode.invalid_request)
    assert len(response.api_keys) == len(SERVED)


def test_holds_many_counts_every_level_and_passes_null_arrays():
    """frames.holds_many decides which responses are encoded off the loop; a Fetch answer's
    aborted_transactions is a nullable array, null for read_uncommitted (4add3d1 took its
    len() and every Fetch v4+ answer failed to encode: the Kafka-protocol fuzzer)."""
    response_type = load_response_schema(1, 7)
    topic_type = typing.get_args(typing.get_type_hints(response_type)["responses"])[0]
    partition_type = typing.get_args(typing.get_type_hints(topic_type)["partitions"])[0]

    def fetch_answer(partitions: int) -> Any:
        partition = partition_type(
            partition_index=i32(0),
            error_code=ErrorCode.none,
            high_watermark=i64(0),
            last_stable_offset=i64(0),
            log_start_offset=i64(0),
            aborted_transactions=None,
            records=None,
        )
        topic = topic_type(topic="t", partitions=(partition,) * partitions)
        return response_type(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            session_id=i32(0),
            responses=(topic,),
        )

    assert not holds_many(fetch_answer(3), 10)
    assert holds_many(fetch_answer(9), 10)  # 1 topic + 9 partitions
    assert response_frame(1, fetch_answer(3))
