"""ACLs as kafka-python's admin client spells them (kafka.admin: ACL, ACLFilter,
ResourcePattern, ResourcePatternFilter, ACLOperation, ACLPermissionType, ResourceType,
ACLResourcePatternType), so code written for KafkaAdminClient reads the same here.

The enums are strom_api.acls's under kafka-python's names (the same classes, with Kafka's
wire codes), not copies. The classes check what kafka-python checks when built (no ANY in
a concrete ACL or pattern; no MATCH in a pattern) and raise StromError INVALID_REQUEST
where kafka-python raises IllegalArgumentError; the controller checks the rest (Kafka's
INVALID_REQUEST sentences). They convert to and from ControllerService's messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

from strom.errors import StromError
from strom_api.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from strom_api.error_codes import ErrorCode
from strom_api.v1 import controller_pb2

__all__ = [
    "ACL",
    "ACLFilter",
    "ACLOperation",
    "ACLPermissionType",
    "ACLResourcePatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
]

ACLOperation = AclOperation
ACLPermissionType = AclPermissionType
ACLResourcePatternType = PatternType

E = TypeVar("E", bound=IntEnum)


def _enum(enum: type[E], value: Any, what: str) -> E:
    try:
        return enum(value)
    except ValueError:
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"{what} must be one of {', '.join(m.name for m in enum)}"
        ) from None


def _refuse(message: str) -> None:
    raise StromError(ErrorCode.INVALID_REQUEST, message)


@dataclass(frozen=True)
class ResourcePatternFilter:
    """A filter on resource patterns: ResourceType.ANY matches every type, a None name
    every name; pattern type ANY matches LITERAL and PREFIXED patterns of that very name,
    MATCH every pattern that applies to a resource of that name."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "resource_type", _enum(ResourceType, self.resource_type, "resource_type")
        )
        object.__setattr__(
            self, "pattern_type", _enum(PatternType, self.pattern_type, "pattern_type")
        )


@dataclass(frozen=True)
class ResourcePattern(ResourcePatternFilter):
    """A concrete resource pattern: a type (not ANY), a name, LITERAL or PREFIXED."""

    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.resource_type == ResourceType.ANY:
            _refuse("resource_type cannot be ANY")
        if self.pattern_type in (PatternType.ANY, PatternType.MATCH):
            name = self.pattern_type.name
            _refuse(f"pattern_type cannot be {name} on a concrete ResourcePattern")


@dataclass(frozen=True)
class ACLFilter:
    """A filter on ACLs, for describe_acls and delete_acls: None principal or host match
    every one, ANY operation or permission type every one."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType
    resource_pattern: ResourcePatternFilter

    def __post_init__(self) -> None:
        object.__setattr__(self, "operation", _enum(AclOperation, self.operation, "operation"))
        object.__setattr__(
            self,
            "permission_type",
            _enum(AclPermissionType, self.permission_type, "permission_type"),
        )
        if not isinstance(self.resource_pattern, ResourcePatternFilter):
            _refuse("resource_pattern must be a ResourcePatternFilter object")

    def to_pb(self) -> controller_pb2.AclBindingFilter:
        out = controller_pb2.AclBindingFilter(
            resource_type=self.resource_pattern.resource_type,
            pattern_type=self.resource_pattern.pattern_type,
            operation=self.operation,
            permission_type=self.permission_type,
        )
        if self.resource_pattern.resource_name is not None:
            out.resource_name = self.resource_pattern.resource_name
        if self.principal is not None:
            out.principal = self.principal
        if self.host is not None:
            out.host = self.host
        return out


@dataclass(frozen=True)
class ACL(ACLFilter):
    """One ACL: principal (`User:alice`), host (`*` for every host), operation,
    permission type (ALLOW or DENY) and a concrete ResourcePattern."""

    principal: str
    host: str
    resource_pattern: ResourcePattern

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.operation == AclOperation.ANY:
            _refuse("operation cannot be ANY")
        if self.permission_type == AclPermissionType.ANY:
            _refuse("permission_type cannot be ANY")
        if not isinstance(self.resource_pattern, ResourcePattern):
            _refuse("resource_pattern must be a ResourcePattern object")

    def binding_pb(self) -> controller_pb2.AclBinding:
        return controller_pb2.AclBinding(
            resource_type=self.resource_pattern.resource_type,
            resource_name=self.resource_pattern.resource_name,
            pattern_type=self.resource_pattern.pattern_type,
            principal=self.principal,
            host=self.host,
            operation=self.operation,
            permission_type=self.permission_type,
        )

    @staticmethod
    def from_pb(b: controller_pb2.AclBinding) -> ACL:
        return ACL(
            b.principal,
            b.host,
            AclOperation(b.operation),
            AclPermissionType(b.permission_type),
            ResourcePattern(
                ResourceType(b.resource_type), b.resource_name, PatternType(b.pattern_type)
            ),
        )
