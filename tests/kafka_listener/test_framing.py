"""The Kafka listener's connection layer against real node processes, over raw sockets:
Kafka's framing and headers, pipelined requests answered in order, ApiVersions advertising
exactly what is served (and its KIP-511 fallback), and every malformed frame closing its
own connection only, with a log line saying why (issue 20)."""

from __future__ import annotations

import dataclasses
import socket
import struct
import typing
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v5.request import MetadataRequest as MetadataV5
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.request import MetadataRequestTopic as TopicV12
from kio.schema.types import TopicName

from server.kafka.apis import SERVED
from tests.kafka_listener.kafka_cluster import (
    MAX_REQUEST_BYTES,
    connect,
    decode_response,
    raw_frame,
    read_frame,
    request_frame,
)
from tests.node_integration.node_cluster import wait_until

# apis.SERVED, by API key (the table the dispatcher also serves from)
ADVERTISED = sorted((a.key, a.min_version, a.max_version) for a in SERVED.values())

API_VERSIONS, METADATA, PRODUCE = 18, 3, 0


def kafka_address(cluster, node: int = 1) -> str:
    return f"{cluster.host[node]}:{cluster.kafka_port[node]}"


def metadata_v12(*names: str) -> MetadataV12:
    return MetadataV12(
        topics=tuple(TopicV12(topic_id=None, name=TopicName(n)) for n in names) if names else None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def _with_leftover(frame: bytes) -> bytes:
    data = frame[4:] + b"\x01\x02\x03"
    return struct.pack(">i", len(data)) + data


def metadata_v5() -> MetadataV5:
    return MetadataV5(topics=None, allow_auto_topic_creation=False)


def still_serves(cluster) -> None:
    """Another connection is answered: only the offending one was closed."""
    with connect(kafka_address(cluster)) as sock:
        sock.sendall(request_frame(api_versions(3), 77))
        frame = read_frame(sock)
    assert frame is not None
    correlation_id, response = decode_response(frame, API_VERSIONS, 3)
    assert correlation_id == 77 and response.error_code == ErrorCode.none


def closed_with(cluster, data: bytes, reason: str, half_close: bool = False) -> None:
    """`data` sent on a fresh connection is refused by closing it, the node's log says
    `reason`, and the listener still serves others."""
    with connect(kafka_address(cluster)) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        assert read_frame(sock) is None
    wait_until(lambda: reason in cluster.log_text(1), 10, f"the log line: {reason}")
    still_serves(cluster)


def api_versions(version: int) -> Any:
    request_type = load_request_schema(API_VERSIONS, version)
    if version >= 3:
        return request_type(client_software_name="strom-test", client_software_version="1.0")
    return request_type()


def test_api_versions_advertises_exactly_what_is_served(cluster):
    with connect(kafka_address(cluster)) as sock:
        for version in range(5):  # librdkafka sends v3, kafka-python v4, aiokafka v0
            sock.sendall(request_frame(api_versions(version), 100 + version))
            frame = read_frame(sock)
            assert frame is not None
            correlation_id, response = decode_response(frame, API_VERSIONS, version)
            assert correlation_id == 100 + version
            assert response.error_code == ErrorCode.none
            assert [
                (k.api_key, k.min_version, k.max_version) for k in response.api_keys
            ] == ADVERTISED


def test_a_newer_api_versions_is_answered_in_v0_with_the_served_ranges(cluster):
    """KIP-511: the client retries with a version inside the ranges it is sent."""
    with connect(kafka_address(cluster)) as sock:
        # v9's body is unknown to the broker: a v2 header, then anything.
        header = struct.pack(">hhih", API_VERSIONS, 9, 41, 4) + b"java" + b"\x00"
        data = header + b"\x07future\x02" + b"\x00"
        sock.sendall(struct.pack(">i", len(data)) + data)
        frame = read_frame(sock)
        assert frame is not None
        correlation_id, response = decode_response(frame, API_VERSIONS, 0)
    assert correlation_id == 41
    assert response.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == ADVERTISED


def test_pipelined_requests_are_answered_in_order(cluster):
    requests = [
        (request_frame(metadata_v12("orders"), 1), METADATA, 12),
        (request_frame(api_versions(3), 2), API_VERSIONS, 3),
        (request_frame(metadata_v5(), 3), METADATA, 5),
        (request_frame(metadata_v12("payments", "orders"), 4), METADATA, 12),
        (request_frame(api_versions(0), 5), API_VERSIONS, 0),
    ]
    with connect(kafka_address(cluster)) as sock:
        sock.sendall(b"".join(frame for frame, _, _ in requests))  # all before any answer
        answers = []
        for _, key, version in requests:
            frame = read_frame(sock)
            assert frame is not None
            answers.append(decode_response(frame, key, version))
    assert [c for c, _ in answers] == [1, 2, 3, 4, 5]
    assert [t.name for t in answers[0][1].topics] == ["orders"]
    assert sorted(t.name for t in answers[2][1].topics) == ["orders", "payments"]
    assert [t.name for t in answers[3][1].topics] == ["payments", "orders"]


def test_metadata_names_an_unknown_topic_unknown(cluster):
    with connect(kafka_address(cluster)) as sock:
        sock.sendall(request_frame(metadata_v12("nope", "orders"), 9))
        frame = read_frame(sock)
    assert frame is not None
    _, response = decode_response(frame, METADATA, 12)
    nope, orders = response.topics
    assert (nope.name, nope.error_code, nope.partitions) == (
        "nope",
        ErrorCode.unknown_topic_or_partition,
        (),
    )
    assert orders.error_code == ErrorCode.none and len(orders.partitions) == 3
    assert orders.topic_id != uuid.UUID(int=0)
    assert {b.port for b in response.brokers} == set(cluster.kafka_port.values())
    assert response.controller_id in cluster.kafka_port


def test_metadata_v0_asks_for_every_topic_with_an_empty_list_v1_for_none(cluster):
    v0 = load_request_schema(METADATA, 0)(topics=())
    v1 = load_request_schema(METADATA, 1)(topics=())
    with connect(kafka_address(cluster)) as sock:
        sock.sendall(request_frame(v0, 1) + request_frame(v1, 2))
        _, every = decode_response(read_frame(sock), METADATA, 0)
        _, none = decode_response(read_frame(sock), METADATA, 1)
    assert {"orders", "payments"} <= {t.name for t in every.topics}
    assert len(every.brokers) == 3
    assert none.topics == () and len(none.brokers) == 3


def test_metadata_by_topic_id(cluster):
    with connect(kafka_address(cluster)) as sock:
        sock.sendall(request_frame(metadata_v12("orders"), 1))
        _, by_name = decode_response(read_frame(sock), METADATA, 12)
        orders_id = by_name.topics[0].topic_id
        unknown = uuid.uuid4()
        by_id = MetadataV12(
            topics=(TopicV12(topic_id=orders_id, name=None), TopicV12(topic_id=unknown, name=None)),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        sock.sendall(request_frame(by_id, 2))
        _, response = decode_response(read_frame(sock), METADATA, 12)
    found, missing = response.topics
    assert (found.name, found.topic_id, found.error_code) == ("orders", orders_id, ErrorCode.none)
    assert (missing.name, missing.topic_id, missing.error_code) == (
        None,
        unknown,
        ErrorCode.unknown_topic_id,
    )


def test_metadata_v10_and_v11_refuse_a_topic_named_by_no_name(cluster):
    """Topic ids name topics from v12 (KafkaApis refuses a null name below it): a v10 answer
    cannot carry a null name, and one was written, closing the connection (the
    Kafka-protocol fuzzer, seed 5 case 688). Answered INVALID_REQUEST under an empty name."""
    for version in (10, 11):
        schema = load_request_schema(METADATA, version)
        topic_type = typing.get_args(typing.get_args(typing.get_type_hints(schema)["topics"])[0])[0]
        flags = {
            f.name: False
            for f in dataclasses.fields(schema)
            if f.name.startswith(("allow", "incl"))
        }
        unnamed_topic = topic_type(topic_id=uuid.uuid4(), name=None)
        orders_topic = topic_type(topic_id=uuid.UUID(int=0), name="orders")
        request = schema(topics=(unnamed_topic, orders_topic), **flags)
        with connect(kafka_address(cluster)) as sock:
            sock.sendall(request_frame(request, 1))
            _, response = decode_response(read_frame(sock), METADATA, version)
        orders, unnamed = response.topics
        assert (unnamed.name, unnamed.error_code) == ("", ErrorCode.invalid_request)
        assert orders.name == "orders" and orders.error_code == ErrorCode.none


@pytest.mark.parametrize(
    "data, reason",
    [
        (struct.pack(">i", -5), "Invalid receive (size = -5)"),
        (
            struct.pack(">i", MAX_REQUEST_BYTES + 1),
            f"Invalid receive (size = {MAX_REQUEST_BYTES + 1} larger than {MAX_REQUEST_BYTES}, "
            "socket.request.max.bytes)",
        ),
        (raw_frame(9999, 0, 1), "Unknown API key 9999"),
        (
            raw_frame(PRODUCE, 11, 1),
            "Received request api key PRODUCE with version 11 which is not enabled",
        ),
        (
            raw_frame(METADATA, 14, 1),
            "Received request api key METADATA with version 14 which is not enabled",
        ),
        (
            raw_frame(METADATA, 5, 1, b"\x00\x00\x00\x05\x00"),  # 5 topics, then nothing
            "the Metadata v5 request does not decode",
        ),
        (struct.pack(">i", 2) + b"\x00\x03", "a request of 2 bytes is shorter than its header"),
    ],
    ids=[
        "negative",
        "oversized",
        "unknown-key",
        "not-served",
        "newer-version",
        "undecodable",
        "short",
    ],
)
def test_a_malformed_frame_closes_that_connection_only(cluster, data, reason):
    with connect(kafka_address(cluster)) as bystander:  # open before, still served after
        closed_with(cluster, data, reason)
        bystander.sendall(request_frame(metadata_v12("orders"), 5))
        frame = read_frame(bystander)
    assert frame is not None and decode_response(frame, METADATA, 12)[0] == 5


def test_bytes_after_a_request_body_are_ignored_as_kafka_ignores_them(cluster):
    """librdkafka 2.16's Metadata v13 request for every topic carries 3 such bytes."""
    with connect(kafka_address(cluster)) as sock:
        sock.sendall(_with_leftover(request_frame(metadata_v5(), 6)))
        frame = read_frame(sock)
    assert frame is not None
    correlation_id, response = decode_response(frame, METADATA, 5)
    assert correlation_id == 6 and {"orders", "payments"} <= {t.name for t in response.topics}


def test_a_connection_ending_inside_a_frame_is_closed_with_a_reason(cluster):
    closed_with(
        cluster,
        struct.pack(">i", 100) + b"\x00" * 10,
        "the connection ended inside a frame: 10 of 100 bytes came",
        half_close=True,
    )


def test_requests_are_counted_under_kafkas_request_metric_names(cluster):
    with connect(kafka_address(cluster)) as sock:
        sock.sendall(request_frame(metadata_v12(), 1))
        assert read_frame(sock) is not None
    samples = cluster.scrape(1)
    key = (
        "kafka_network_requestmetrics_requests_total",
        (("request", "Metadata"), ("version", "12")),
    )
    assert samples[key] >= 1
    assert samples[("strom_kafka_request_duration_seconds_count", (("request", "Metadata"),))] >= 1


def test_sasl_requests_on_a_plaintext_listener_are_answered_illegal_sasl_state(cluster):
    """As Kafka's KafkaApis answers them on a listener that does not authenticate."""
    with connect(kafka_address(cluster)) as sock:
        sock.sendall(request_frame(load_request_schema(17, 1)(mechanism="PLAIN"), 1))
        frame = read_frame(sock)
        assert frame is not None
        _, handshake = decode_response(frame, 17, 1)
        assert handshake.error_code == ErrorCode.illegal_sasl_state
        sock.sendall(request_frame(api_versions(3), 2))  # the connection goes on
        assert read_frame(sock) is not None
        sock.sendall(request_frame(load_request_schema(36, 2)(auth_bytes=b"\0a\0b"), 3))
        frame = read_frame(sock)
        assert frame is not None
        _, authenticate = decode_response(frame, 36, 2)
        assert authenticate.error_code == ErrorCode.illegal_sasl_state
        assert read_frame(sock) is None  # then closed
