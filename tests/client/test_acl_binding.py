"""kafka-python's ACL types as strom.admin offers them: the same names and codes, the checks
kafka-python makes when one is built (as StromError INVALID_REQUEST), and the conversion to
ControllerService's messages and back."""

from __future__ import annotations

import pytest

from strom import acl_binding
from strom.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from strom.errors import StromError
from strom_api import acls


def test_the_enums_are_the_shared_vocabulary_under_kafka_pythons_names() -> None:
    assert ACLOperation is acls.AclOperation and ACLOperation.IDEMPOTENT_WRITE == 12
    assert ACLPermissionType is acls.AclPermissionType and ACLPermissionType.ALLOW == 3
    assert ACLResourcePatternType is acls.PatternType and ACLResourcePatternType.PREFIXED == 4
    assert ResourceType is acls.ResourceType and ResourceType.TRANSACTIONAL_ID == 5
    assert all(hasattr(acl_binding, name) for name in acl_binding.__all__)


@pytest.mark.parametrize(
    "build,message",
    [
        (lambda: ResourcePattern(ResourceType.ANY, "t"), "resource_type cannot be ANY"),
        (
            lambda: ResourcePattern(ResourceType.TOPIC, "t", ACLResourcePatternType.MATCH),
            "pattern_type cannot be MATCH on a concrete ResourcePattern",
        ),
        (
            lambda: ACL("User:a", "*", ACLOperation.ANY, ACLPermissionType.ALLOW,
                        ResourcePattern(ResourceType.TOPIC, "t")),
            "operation cannot be ANY",
        ),
        (
            lambda: ACL("User:a", "*", ACLOperation.READ, ACLPermissionType.ANY,
                        ResourcePattern(ResourceType.TOPIC, "t")),
            "permission_type cannot be ANY",
        ),
        (
            lambda: ACL("User:a", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                        ResourcePatternFilter(ResourceType.TOPIC, "t", ACLResourcePatternType.ANY)),
            "resource_pattern must be a ResourcePattern object",
        ),
        (lambda: ResourcePatternFilter(ResourceType.TOPIC, "t", 9), "pattern_type must be one of"),
    ],
)  # fmt: skip
def test_kafka_pythons_checks(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StromError, match=message) as info:
        build()
    assert info.value.name == "INVALID_REQUEST"


def test_round_trip_through_the_wire_messages() -> None:
    pattern = ResourcePattern(ResourceType.GROUP, "g", ACLResourcePatternType.PREFIXED)
    acl = ACL("User:a", "10.0.0.1", ACLOperation.WRITE, ACLPermissionType.DENY, pattern)
    assert ACL.from_pb(acl.binding_pb()) == acl
    everything = ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)
    any_name = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, everything)
    wire = any_name.to_pb()
    assert not wire.HasField("resource_name") and not wire.HasField("principal")
    assert (wire.resource_type, wire.pattern_type, wire.operation, wire.permission_type) == (
        1, 1, 1, 1
    )  # fmt: skip
