"""Every version of every group API the Kafka listener serves, through its dispatcher
(server/kafka/handlers.py) without a socket: a request of that version is answered with a
response of that version that encodes, with Kafka's error code where the one authorizer
refuses (GROUP_AUTHORIZATION_FAILED) and where this broker coordinates nothing
(NOT_COORDINATOR). The cluster tests (tests/kafka_listener/test_group_apis.py) cover the
answers of a real coordinator."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import types
import typing
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from metadata.authorizer import AuthorizerSettings, StandardAcl, StandardAuthorizer
from metadata.image import MetadataImage
from server.kafka.apis import SERVED
from server.kafka.frames import Request, response_frame
from server.kafka.handlers import KafkaApis
from server.metadata_answer import MetadataSources
from server.request_authorization import RequestAuthorizer
from server.request_session import Session, enter, leave
from server.requests.groups import GroupPaths
from strom_api.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.server.group_paths import no_groups
from tests.server.loop_turns import others_ran_as
from tests.server.test_kafka_frames import idle_data_plane

GROUP_APIS = {8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47}
ALICE = Session("User:alice", "127.0.0.1", "KAFKA")


def sample(kind: Any) -> Any:
    """A value of a kio field type: every array with one element, strings "g"."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in typing.get_args(kind) if a is not type(None)))
    if origin is tuple:
        return (sample(typing.get_args(kind)[0]),)
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return kind(**{f.name: sample(hints[f.name]) for f in dataclasses.fields(kind)})
    if issubclass(kind, datetime.timedelta):
        return datetime.timedelta(seconds=10)
    if issubclass(kind, bool):
        return True
    if issubclass(kind, int):
        return kind(1)
    if issubclass(kind, str):
        return kind("g")
    if issubclass(kind, bytes):
        return b"\x00\x01"
    raise AssertionError(f"no sample for {kind}")


def error_codes(value: Any) -> set[ErrorCode]:
    """Every error_code anywhere in a response."""
    found = set()
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name == "error_code":
                found.add(item)
            else:
                found |= error_codes(item)
    elif isinstance(value, tuple):
        for item in value:
            found |= error_codes(item)
    return found


def dispatcher(paths: GroupPaths) -> KafkaApis:
    sources = MetadataSources("cluster", lambda: -1, paths.authz, None, False)
    return KafkaApis("KAFKA", MetadataImage, sources, paths, idle_data_plane())


def answer(apis: KafkaApis, key: int, version: int, **fields: Any) -> Any:
    body_type = load_request_schema(key, version)
    body = sample(body_type)
    body = dataclasses.replace(body, key_type=0) if key == 10 and version >= 1 else body
    body = dataclasses.replace(body, **fields)
    token = enter(ALICE)
    try:
        response = asyncio.run(apis.handle(Request(key, version, 7, "client", body)))
    finally:
        leave(token)
    assert response.__version__ == version
    assert response_frame(7, response)  # encodes in its version
    return response


VERSIONS = [
    (key, version)
    for key in sorted(GROUP_APIS)
    for version in range(SERVED[key].min_version, SERVED[key].max_version + 1)
]


def test_every_group_api_is_served_and_advertised():
    assert GROUP_APIS <= set(SERVED)


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_a_refused_group_is_answered_group_authorization_failed(key, version):
    denying = StandardAuthorizer([], AuthorizerSettings(frozenset(), False))
    paths = dataclasses.replace(no_groups(), authz=RequestAuthorizer(lambda: denying))
    response = answer(dispatcher(paths), key, version)
    if key == 16:  # ListGroups leaves out what may not be described, silently
        assert response.groups == ()
        assert error_codes(response) == {ErrorCode.none}
    else:
        assert error_codes(response) == {ErrorCode.group_authorization_failed}


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_a_broker_that_coordinates_nothing_answers_not_coordinator(key, version):
    if key == 10:
        pytest.skip("FindCoordinator: a broker answers it for any group (cluster tests)")
    response = answer(dispatcher(no_groups()), key, version)
    if key == 16:
        assert response.groups == ()
        assert error_codes(response) == {ErrorCode.none}
    elif key == 13 and version >= 3:
        # LeaveGroup v3+: the group's error at the top, the members unanswered
        assert response.error_code == ErrorCode.not_coordinator
        assert response.members == ()
    else:
        assert ErrorCode.not_coordinator in error_codes(response)
        assert error_codes(response) <= {ErrorCode.none, ErrorCode.not_coordinator}


def test_a_commit_to_a_topic_it_may_not_read_is_topic_authorization_failed():
    """READ on the group but not on the topic: that topic's partitions are refused, and
    nothing reaches the coordinator (which here would answer NOT_COORDINATOR)."""
    group_only = StandardAcl(
        ResourceType.GROUP,
        "g",
        PatternType.LITERAL,
        ALICE.principal,
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    authorizer = StandardAuthorizer([group_only], AuthorizerSettings(frozenset(), False))
    paths = dataclasses.replace(no_groups(), authz=RequestAuthorizer(lambda: authorizer))
    for version in range(SERVED[8].min_version, SERVED[8].max_version + 1):
        response = answer(dispatcher(paths), 8, version)
        assert error_codes(response) == {ErrorCode.topic_authorization_failed}


MANY = 5_000  # partitions or groups named in one request


def _element(kind: Any, field: str) -> Any:
    """The element type of a tuple field (perhaps nullable) of a kio dataclass."""
    hint = typing.get_type_hints(kind)[field]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return typing.get_args(hint)[0]


def _naming_many(key: int, version: int) -> Any:
    """A request of the group API `key` naming MANY partitions (or groups)."""
    body_type = load_request_schema(key, version)
    body = sample(body_type)
    if key in (8, 47):  # OffsetCommit, OffsetDelete
        topic_type = _element(body_type, "topics")
        partition = sample(_element(topic_type, "partitions"))
        partitions = tuple(
            dataclasses.replace(partition, partition_index=i32(i)) for i in range(MANY)
        )
        topic = dataclasses.replace(sample(topic_type), partitions=partitions)
        return dataclasses.replace(body, topics=(topic,))
    if key == 9:  # OffsetFetch v8+: groups of topics
        group_type = _element(body_type, "groups")
        topic_type = _element(group_type, "topics")
        topic = dataclasses.replace(
            sample(topic_type), partition_indexes=tuple(i32(i) for i in range(MANY))
        )
        group = dataclasses.replace(sample(group_type), topics=(topic,))
        return dataclasses.replace(body, groups=(group,))
    if key == 13:  # LeaveGroup v3+: members
        member = sample(_element(body_type, "members"))
        members = tuple(dataclasses.replace(member, member_id=f"m{i}") for i in range(MANY))
        return dataclasses.replace(body, members=members)
    names = tuple(f"g{i}" for i in range(MANY))
    if key == 15:  # DescribeGroups
        return dataclasses.replace(body, groups=names)
    assert key == 42  # DeleteGroups
    return dataclasses.replace(body, groups_names=names)


@pytest.mark.parametrize("key", [8, 9, 13, 15, 42, 47], ids=lambda k: SERVED[k].name)
def test_a_group_request_naming_many_lets_the_loop_run_between_slices(key):
    """Converted, worked and answered in slices (server/loop_slices.py): a task waiting on
    the same loop runs before the answer is done (here every item is answered at once,
    NOT_COORDINATOR, with no await that would let it run otherwise)."""
    version = SERVED[key].max_version
    apis = dispatcher(no_groups())
    request = Request(key, version, 7, "client", _naming_many(key, version))
    response, turns = asyncio.run(others_ran_as(ALICE, apis.handle(request)))
    assert turns >= 4, "the loop ran nothing else meanwhile"
    assert response_frame(7, response)
    assert ErrorCode.not_coordinator in error_codes(response)


def test_an_offset_commit_too_large_for_one_batch_is_refused_on_every_partition():
    """Kafka's INVALID_COMMIT_OFFSET_SIZE before the coordinator is asked (which here would
    answer NOT_COORDINATOR): 30,000 offsets of group "g" and topic "t" take at least
    30,000 x 43 bytes, more than __consumer_offsets' max.message.bytes; 20,000 fit."""
    for count, expected in (
        (30_000, ErrorCode.invalid_commit_offset_size),
        (20_000, ErrorCode.not_coordinator),
    ):
        body_type = load_request_schema(8, 9)
        topic_type = _element(body_type, "topics")
        partition = dataclasses.replace(
            sample(_element(topic_type, "partitions")), committed_metadata=""
        )
        topic = dataclasses.replace(sample(topic_type), name="t", partitions=(partition,) * count)
        body = dataclasses.replace(sample(body_type), group_id="g", topics=(topic,))
        token = enter(ALICE)
        try:
            response = asyncio.run(dispatcher(no_groups()).handle(Request(8, 9, 7, "c", body)))
        finally:
            leave(token)
        [answered] = response.topics
        assert len(answered.partitions) == count
        assert error_codes(response) == {expected}


def test_an_offset_fetch_of_many_groups_lets_the_loop_run_between_slices():
    """OffsetFetch v8+ batches groups: one of 32,142 groups held the loop 1.35 s (the
    Kafka-protocol fuzzer, seed 7 case 761), each group's fetch answered without a wait."""
    version = SERVED[9].max_version
    body_type = load_request_schema(9, version)
    group_type = _element(body_type, "groups")
    group = sample(group_type)
    groups = tuple(dataclasses.replace(group, group_id=f"g{i}") for i in range(MANY))
    request = Request(
        9, version, 7, "client", dataclasses.replace(sample(body_type), groups=groups)
    )
    apis = dispatcher(no_groups())
    response, turns = asyncio.run(others_ran_as(ALICE, apis.handle(request)))
    assert turns >= 4, "the loop ran nothing else meanwhile"
    assert len(response.groups) == MANY


def test_find_coordinator_of_many_keys_lets_the_loop_run_between_slices():
    """FindCoordinator v4+ batches keys: 64,285 of them held the loop 0.65 s (the
    Kafka-protocol fuzzer, seed 19 case 581), each key answered without a wait that
    suspends (here COORDINATOR_NOT_AVAILABLE: __consumer_offsets does not exist yet)."""
    version = SERVED[10].max_version
    body = dataclasses.replace(
        sample(load_request_schema(10, version)),
        key_type=0,
        coordinator_keys=tuple(f"g{i}" for i in range(MANY)),
    )
    apis = dispatcher(no_groups())
    response, turns = asyncio.run(
        others_ran_as(ALICE, apis.handle(Request(10, version, 7, "c", body)))
    )
    assert turns >= 4, "the loop ran nothing else meanwhile"
    assert len(response.coordinators) == MANY
    assert {c.error_code for c in response.coordinators} == {ErrorCode.coordinator_not_available}
