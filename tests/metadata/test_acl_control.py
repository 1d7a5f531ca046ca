"""CreateAcls, DeleteAcls and DescribeAcls as pure functions over an image: Kafka's
validations with INVALID_REQUEST, idempotent creation, filters with ANY and MATCH, and the
records they produce replayed into the next image."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import pytest
from google.protobuf.message import Message

from metadata.acl_control import (
    MAX_ACLS_PER_REQUEST,
    AclBindingFilter,
    create_acls,
    delete_acls,
    describe_acls,
    from_code,
)
from metadata.authorizer import StandardAcl
from metadata.delta import MetadataDelta
from metadata.errors import ApiError
from metadata.image import EMPTY_IMAGE, MetadataImage
from strom_api.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from strom_api.v1 import metadata_pb2 as pb

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(
    name: str = "orders",
    *,
    rtype: ResourceType = TOPIC,
    pattern: PatternType = LITERAL,
    principal: str = "User:alice",
    host: str = "*",
    op: AclOperation = Op.READ,
    permission: AclPermissionType = ALLOW,
) -> StandardAcl:
    return StandardAcl(rtype, name, pattern, principal, host, op, permission)


def sequential_ids() -> Callable[[], bytes]:
    counter = itertools.count(1)
    return lambda: next(counter).to_bytes(16, "big")


def apply(image: MetadataImage, records: Sequence[Message]) -> MetadataImage:
    return MetadataDelta(image).replay_all(records).apply(image.offset + len(records), 1)


def with_acls(*acls: StandardAcl) -> MetadataImage:
    records, results = create_acls(EMPTY_IMAGE, acls, sequential_ids())
    assert results == [None] * len(acls)
    return apply(EMPTY_IMAGE, records)


@pytest.mark.parametrize(
    "bad,message",
    [
        (acl(rtype=ResourceType.ANY), "Invalid resourceType ANY"),
        (acl(rtype=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (acl(pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl(pattern=PatternType.ANY), "Invalid patternType ANY"),
        (acl(op=Op.ANY), "Invalid operation ANY"),
        (acl(op=Op.UNKNOWN), "Invalid operation UNKNOWN"),
        (acl(permission=AclPermissionType.ANY), "Invalid permissionType ANY"),
        (acl(""), "Resource name should not be empty"),
        (
            acl("my-cluster", rtype=CLUSTER, op=Op.ALTER),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (
            acl(principal="alice"),
            "Invalid principal: expected a string in format principalType:principalName but "
            "got alice",
        ),
        (acl(host=""), "Host should not be empty"),
    ],
)
def test_invalid_creations_are_refused_alone(bad: StandardAcl, message: str) -> None:
    good = acl("payments")
    records, results = create_acls(EMPTY_IMAGE, [bad, good], sequential_ids())
    error = results[0]
    assert isinstance(error, ApiError)
    assert error.error_name == "INVALID_REQUEST" and message in error.message
    assert results[1] is None
    # Only the good one is written.
    assert [r.resource_name for r in records] == ["payments"]  # type: ignore[attr-defined]


def test_unknown_wire_codes_read_as_unknown() -> None:
    assert from_code(AclOperation, 77) is AclOperation.UNKNOWN
    assert from_code(ResourceType, 2) is ResourceType.TOPIC


def test_creation_is_idempotent() -> None:
    image = with_acls(acl())
    # Again, and twice within one request: no new record, success each time.
    records, results = create_acls(image, [acl(), acl("x"), acl("x")], sequential_ids())
    assert results == [None, None, None]
    assert len(records) == 1
    assert len(apply(image, records).acls.by_id) == 2


def test_a_new_id_never_reuses_a_live_one() -> None:
    image = with_acls(acl())
    taken = next(iter(image.acls.by_id))
    draws = iter([taken, taken, b"\x09" * 16])
    records, _ = create_acls(image, [acl("other")], lambda: next(draws))
    assert [r.id for r in records] == [b"\x09" * 16]  # type: ignore[attr-defined]


def test_too_many_creations_are_refused_whole() -> None:
    with pytest.raises(ApiError, match="at most 1000 ACL creations") as info:
        create_acls(EMPTY_IMAGE, [acl(str(i)) for i in range(MAX_ACLS_PER_REQUEST + 1)])
    assert info.value.error_name == "INVALID_REQUEST"
    with pytest.raises(ApiError, match="at most 1000 ACL deletion filters"):
        delete_acls(EMPTY_IMAGE, [AclBindingFilter()] * (MAX_ACLS_PER_REQUEST + 1))


ACLS = [
    acl("orders"),
    acl("orders", principal="User:bob", op=Op.WRITE),
    acl("ord", pattern=PREFIXED, permission=DENY, op=Op.ALL),
    acl("*", principal="User:*", op=Op.DESCRIBE),
    acl("orders", rtype=GROUP),
    acl("kafka-cluster", rtype=CLUSTER, op=Op.IDEMPOTENT_WRITE, host="10.0.0.1"),
]


@pytest.mark.parametrize(
    "acl_filter,expected",
    [
        (AclBindingFilter(), ACLS),
        (AclBindingFilter(resource_type=TOPIC), ACLS[:4]),
        # LITERAL on the name: the exact pattern only.
        (AclBindingFilter(TOPIC, "orders", LITERAL), ACLS[:2]),
        # ANY pattern type on a name: every pattern with that very name.
        (AclBindingFilter(TOPIC, "ord", PatternType.ANY), [ACLS[2]]),
        # MATCH: every ACL that applies to a topic named orders.
        (AclBindingFilter(TOPIC, "orders", PatternType.MATCH), ACLS[:4]),
        (AclBindingFilter(TOPIC, "other", PatternType.MATCH), [ACLS[3]]),
        (AclBindingFilter(principal="User:bob"), [ACLS[1]]),
        (AclBindingFilter(host="10.0.0.1"), [ACLS[5]]),
        (AclBindingFilter(operation=Op.ALL), [ACLS[2]]),
        (AclBindingFilter(permission_type=DENY), [ACLS[2]]),
        (AclBindingFilter(resource_type=ResourceType.TRANSACTIONAL_ID), []),
    ],
)
def test_describe_filters(acl_filter: AclBindingFilter, expected: list[StandardAcl]) -> None:
    image = with_acls(*ACLS)
    assert sorted(describe_acls(image, acl_filter), key=str) == sorted(expected, key=str)


@pytest.mark.parametrize(
    "acl_filter,message",
    [
        (AclBindingFilter(resource_type=ResourceType.UNKNOWN), "Unknown patternFilter."),
        (AclBindingFilter(pattern_type=PatternType.UNKNOWN), "Unknown patternFilter."),
        (AclBindingFilter(operation=Op.UNKNOWN), "Unknown entryFilter."),
        (
            AclBindingFilter(permission_type=AclPermissionType.UNKNOWN),
            "Unknown entryFilter.",
        ),
    ],
)
def test_unknown_filters_are_refused(acl_filter: AclBindingFilter, message: str) -> None:
    image = with_acls(*ACLS)
    with pytest.raises(ApiError, match=message):
        describe_acls(image, acl_filter)
    records, results = delete_acls(image, [acl_filter])
    assert records == []
    error = results[0].error
    assert error is not None and error.error_name == "INVALID_REQUEST"


def test_delete_removes_every_match_once_and_answers_which() -> None:
    image = with_acls(*ACLS)
    filters = [
        AclBindingFilter(TOPIC, "orders", PatternType.MATCH, principal="User:alice"),
        AclBindingFilter(TOPIC, "orders", LITERAL),  # overlaps the first on ACLS[0]
        AclBindingFilter(resource_type=ResourceType.USER),
    ]
    records, results = delete_acls(image, filters)
    assert set(results[0].deleted) == {ACLS[0], ACLS[2]}
    assert set(results[1].deleted) == {ACLS[0], ACLS[1]}
    assert results[2].deleted == () and results[2].error is None
    assert all(isinstance(r, pb.RemoveAccessControlEntryRecord) for r in records)
    assert len(records) == 3  # ACLS[0] once
    after = apply(image, records)
    assert set(after.acls.by_id.values()) == set(ACLS) - {ACLS[0], ACLS[1], ACLS[2]}
    # Nothing more to delete: no records.
    assert delete_acls(after, filters[:2])[0] == []
