"""How AdminClient.describe_consumer_groups reads members' assignments (strom/group_admin.py):
a consumer group's are ConsumerProtocolAssignments; bytes that are not one are
CORRUPT_MESSAGE with a sentence (a Kafka client's members wrote them, e.g. through the
Kafka listener), never a traceback; a group of another protocol type has none to read."""

from __future__ import annotations

import pytest

from strom.assignors import Assignment, MalformedAssignment, decode_assignment, encode_assignment
from strom.errors import StromError
from strom.fetcher import TopicPartition
from strom.group_admin import _assigned
from strom_api.v1 import client_pb2

Group = client_pb2.DescribeGroupsResponse.Group


def group(protocol_type: str, assignment: bytes) -> tuple[object, object]:
    g = Group(group_id="g", protocol_type=protocol_type)
    member = g.members.add(member_id="m-1", assignment=assignment)
    return g, member


def test_a_consumer_groups_assignment_is_read():
    data = encode_assignment(Assignment((("orders", 0), ("orders", 2))))
    assert _assigned(*group("consumer", data)) == (
        TopicPartition("orders", 0),
        TopicPartition("orders", 2),
    )


def test_bytes_that_are_not_an_assignment_are_corrupt_message_with_a_sentence():
    with pytest.raises(MalformedAssignment):
        decode_assignment(b"\x00\x01\x00\x00\x00\x05xy")
    with pytest.raises(StromError) as raised:
        _assigned(*group("consumer", b"\x00\x01\x00\x00\x00\x05xy"))
    assert raised.value.name == "CORRUPT_MESSAGE"
    assert "member m-1 of group g" in str(raised.value)


def test_another_protocol_types_assignment_is_not_read():
    assert _assigned(*group("connect", b"\x00\x01\x00\x00\x00\x05xy")) == ()
