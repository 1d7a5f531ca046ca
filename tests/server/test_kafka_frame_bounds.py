"""server/kafka/frame_bounds.py: what Kafka's generated parsers refuse is refused before kio
reads the body (its native reader reserves an array's declared count up front: a 20-byte
Metadata request declaring 2^35 topics aborted the node). Each frame here is a request
header then a body of a few bytes, as a fuzzer sent them (the Kafka-listener probe)."""

from __future__ import annotations

import datetime
import io
import struct
import typing
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from server.kafka.frames import InvalidRequest, fitted, parse_request, response_frame


def header(key: int, version: int, flexible: bool) -> bytes:
    head = struct.pack(">hhih", key, version, 7, 2) + b"fz"  # client_id "fz"
    return head + (b"\x00" if flexible else b"")  # v2: no tagged fields


METADATA, DELETE_GROUPS, CREATE_TOPICS, API_VERSIONS = 3, 42, 19, 18


@pytest.mark.parametrize(
    "frame, refusal",
    [
        (  # Metadata v12, topics: a 35-bit compact count (kio accepted it, then aborted)
            header(METADATA, 12, True) + b"\xff\xff\xff\xff\x7f",
            "a varint is longer than 5 bytes or above 2^32 - 1",
        ),
        (  # the same with 2^32 - 2 topics in a 5-byte varint
            header(METADATA, 12, True) + b"\xff\xff\xff\xff\x0f",
            "Tried to allocate a collection of size 4294967294 for topics, but there are "
            "only 0 bytes remaining.",
        ),
        (  # DeleteGroups v1 (legacy): 2^31 - 1 group names
            header(DELETE_GROUPS, 1, False) + struct.pack(">i", 2**31 - 1),
            "Tried to allocate a collection of size 2147483647 for groups_names",
        ),
        (  # DeleteGroups v1: groups_names null, which is not nullable
            header(DELETE_GROUPS, 1, False) + struct.pack(">i", -1),
            "non-nullable field groups_names was serialized as null",
        ),
        (  # DeleteGroups v2 (flexible): a compact array, null (0)
            header(DELETE_GROUPS, 2, True) + b"\x00\x00",
            "non-nullable field groups_names was serialized as null",
        ),
        (  # DeleteGroups v2: one group name of 40,000 bytes (compact: length + 1)
            header(DELETE_GROUPS, 2, True) + b"\x02" + b"\xc1\xb8\x02" + b"g" * 40_000 + b"\x00",
            "string field groups_names had invalid length 40000",
        ),
        (  # CreateTopics v4 (legacy): a topic whose name runs past the frame
            header(CREATE_TOPICS, 4, False) + struct.pack(">ih", 1, 100) + b"short",
            "the frame ends inside field name",
        ),
        (  # ApiVersions v3 whose header declares 2^32 - 1 tagged fields
            struct.pack(">hhih", API_VERSIONS, 3, 7, 2) + b"fz\xff\xff\xff\xff\x0f",
            "4294967295 tagged fields declared",
        ),
    ],
    ids=[
        "varint-35-bits",
        "compact-count-2^32",
        "legacy-count-2^31",
        "legacy-null-array",
        "compact-null-array",
        "string-40000",
        "string-past-the-end",
        "header-tag-count",
    ],
)
def test_a_body_kafka_would_refuse_is_an_invalid_request(frame, refusal):
    with pytest.raises(InvalidRequest, match="not decode") as caught:
        parse_request(frame)
    assert refusal in str(caught.value)


def test_a_well_formed_body_still_parses():
    frame = header(DELETE_GROUPS, 2, True) + b"\x03" + b"\x02a" + b"\x03bc" + b"\x00"
    request = parse_request(frame)
    assert request.body.groups_names == ("a", "bc")
    legacy = header(DELETE_GROUPS, 1, False) + struct.pack(">ih", 1, 3) + b"abc"
    assert parse_request(legacy).body.groups_names == ("abc",)


def test_a_tagged_field_kio_does_not_know_is_skipped_as_kafka_skips_it():
    """KIP-482: a newer client may send tags this schema lacks; kio raised KeyError for
    them. Cut out of the body, known tags and the fields around them stay."""
    body = b"\x03fz\x021" + b"\x02" + b"\x05\x01\x00" + b"\x07\x02ab"  # two unknown tags
    request = parse_request(header(API_VERSIONS, 3, True) + body)
    assert (request.body.client_software_name, request.body.client_software_version) == ("fz", "1")
    # Nested: a Metadata v12 topic entry with an unknown tag, then the request's own fields.
    topic = bytes(16) + b"\x02t" + b"\x01\x09\x01\x00"  # id, name "t", tag 9 (1 byte)
    body = b"\x02" + topic + b"\x01\x00\x00"  # one topic; allow_auto, authorized ops; no tags
    request = parse_request(header(METADATA, 12, True) + body)
    assert [t.name for t in request.body.topics] == ["t"]
    assert request.body.allow_auto_topic_creation is True


def test_a_header_tag_is_skipped_too():
    """RequestHeader v2's tagged fields: kio knows none, Kafka skips them."""
    head = struct.pack(">hhih", API_VERSIONS, 3, 7, 2) + b"fz\x01\x00\x01\x00"
    request = parse_request(head + b"\x03fz\x021\x00")
    assert (request.correlation_id, request.client_id) == (7, "fz")
    assert request.body.client_software_name == "fz"


def test_a_fitted_response_cuts_only_long_error_messages():
    response_type = load_response_schema(19, 3)
    topic_type = typing.get_args(typing.get_type_hints(response_type)["topics"])[0]

    def response(message: str) -> Any:
        topic = topic_type(name="t", error_code=ErrorCode.none, error_message=message)
        return response_type(throttle_time=datetime.timedelta(0), topics=(topic,))

    long = response("\u00e9" * 20_000)  # 40,000 bytes
    cut = fitted(long).topics[0].error_message
    assert len(cut.encode()) <= 32_767 and cut.endswith("...") and cut.startswith("\u00e9")
    assert fitted(long).topics[0].name == "t"
    response_frame(1, fitted(long))  # encodes
    short = response("m")
    assert fitted(short) is short


FETCH = 1


def fetch_v12(cluster_id: str | None) -> bytes:
    """A Fetch v12 request of no topics, written by kio, with `cluster_id` (tag 0)."""
    schema = load_request_schema(FETCH, 12)
    body = schema(
        cluster_id=cluster_id,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(),
        forgotten_topics_data=(),
        rack_id="",
    )
    out = io.BytesIO()
    entity_writer(schema)(out, body)
    return header(FETCH, 12, True) + out.getvalue()


def test_a_tagged_field_kio_knows_is_bounded_as_the_untagged_ones():
    """Fetch v12's tagged cluster_id: a string over 32,767 bytes is refused as Kafka's parser
    refuses it (before, the bounds walk skipped known tags by their size, and kio took it);
    a value running past the size its tag declares is refused too."""
    assert parse_request(fetch_v12("c" * 100)).body.cluster_id == "c" * 100
    with pytest.raises(InvalidRequest, match="string field cluster_id had invalid length 40000"):
        parse_request(fetch_v12("c" * 40_000))
    frame = bytearray(fetch_v12("abc"))
    tagged = frame.rindex(b"\x00\x04\x04abc")  # tag 0, size 4: compact length 4, "abc"
    frame[tagged + 1] = 2  # the tag's size says 2 bytes: the string runs past it
    with pytest.raises(InvalidRequest, match="tagged field cluster_id runs past its size 2"):
        parse_request(bytes(frame))


OFFSET_COMMIT = 8


def test_a_retention_time_beyond_what_kio_reads_is_taken_as_the_longest_it_reads():
    """OffsetCommit v2-4's retention_time is an int64 of milliseconds, read by kio as a
    timedelta of +-2^63 microseconds: beyond it the request did not decode and its connection
    closed (the Kafka-protocol fuzzer, seed 2 case 360). Kafka takes any int64."""
    schema = load_request_schema(OFFSET_COMMIT, 2)

    def commit(retention_ms: int) -> bytes:
        body = schema(
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            retention_time=datetime.timedelta(milliseconds=0),
            topics=(),
        )
        out = io.BytesIO()
        entity_writer(schema)(out, body)
        data = bytearray(out.getvalue())
        at = 2 + 1 + 4 + 2  # group_id "g", generation, member_id ""
        data[at : at + 8] = retention_ms.to_bytes(8, "big", signed=True)
        return header(OFFSET_COMMIT, 2, False) + bytes(data)

    longest = (2**63 - 1) // 1000
    for asked, taken in ((2**63 - 1, longest), (-(2**63), -longest), (-1, -1), (60_000, 60_000)):
        request = parse_request(commit(asked))
        assert request.body.retention_time == datetime.timedelta(milliseconds=taken)
