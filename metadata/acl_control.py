"""CreateAcls, DeleteAcls and DescribeAcls as the controller runs them (Kafka's
AclControlManager, with the checks Kafka's brokers make first in AclApis): pure functions
over a MetadataImage that return the records to write and a result per entry, changing
nothing themselves (the records change the image once committed and replayed).

- A creation is checked (INVALID_REQUEST with Kafka's sentence: an UNKNOWN or ANY resource
  type, pattern type other than LITERAL/PREFIXED, UNKNOWN or ANY operation, permission other
  than ALLOW/DENY, an empty resource name, a CLUSTER resource not named kafka-cluster, a
  principal without its `Type:` prefix); one that passes gets an AccessControlEntryRecord
  with a fresh id, unless the same ACL exists already (in the image or earlier in the
  request): then it succeeds without a record, as Kafka's does.
- A deletion filter (ANY matches every value, MATCH every pattern that applies to the name,
  an unset string every string: Kafka's AclBindingFilter) removes every ACL it matches and
  answers which; an ACL two filters match gets one RemoveAccessControlEntryRecord.
- A description lists the image's ACLs that one filter matches.

A request holds at most MAX_ACLS_PER_REQUEST creations or filters, refused whole beyond
that: each creation costs a record and a check on the controller's event loop, and a
runaway script should not write a million ACLs in one commit. Kafka has no such bound; a
thousand is far above what kafka-acls.sh sends (a handful per resource).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from google.protobuf.message import Message

from metadata.authorizer import StandardAcl, parse_principal
from metadata.errors import ApiError
from metadata.image import MetadataImage, acl_record
from metadata.records import new_acl_id
from strom_api.acls import (
    CLUSTER_NAME,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from strom_api.error_codes import ErrorCode
from strom_api.v1 import metadata_pb2 as pb

MAX_ACLS_PER_REQUEST = 1000

E = TypeVar("E", bound=IntEnum)


def from_code(enum: type[E], code: int) -> E:
    """The enum value of a wire code, UNKNOWN for a code Kafka does not define (Kafka's
    ResourceType.fromCode and friends), so a bad code is refused as UNKNOWN is."""
    try:
        return enum(code)
    except ValueError:
        return enum["UNKNOWN"]


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: a resource pattern filter and an entry filter. ANY matches
    every value; `None` strings match every string; the pattern type MATCH matches every
    ACL that would apply to a resource of that name (literal, wildcard or prefix)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def unknown(self) -> str | None:
        """Kafka's validateFilter: a filter with an UNKNOWN part matches nothing
        meaningful and is refused."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if (
            self.operation == AclOperation.UNKNOWN
            or self.permission_type == AclPermissionType.UNKNOWN
        ):
            return "Unknown entryFilter."
        return None

    def matches(self, acl: StandardAcl) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: StandardAcl) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        # MATCH: the ACLs that apply to a resource named resource_name.
        if acl.pattern_type == PatternType.PREFIXED:
            return self.resource_name.startswith(acl.resource_name)
        return acl.resource_name in (self.resource_name, WILDCARD_RESOURCE)

    def _matches_entry(self, acl: StandardAcl) -> bool:
        return (
            self.principal in (None, acl.principal)
            and self.host in (None, acl.host)
            and self.operation in (AclOperation.ANY, acl.operation)
            and self.permission_type in (AclPermissionType.ANY, acl.permission_type)
        )


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_REQUEST, message)


def validate_new_acl(acl: StandardAcl) -> None:
    """Kafka's checks of one creation (AclApis, then AclControlManager.validateNewAcl)."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise _invalid(f"Invalid resourceType {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise _invalid(f"Invalid patternType {acl.pattern_type.name}")
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise _invalid(f"Invalid operation {acl.operation.name}")
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise _invalid(f"Invalid permissionType {acl.permission_type.name}")
    if not acl.resource_name:
        raise _invalid("Resource name should not be empty")
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    try:
        parse_principal(acl.principal)
    except ValueError as exc:
        raise _invalid(f"Invalid principal: {exc}") from None
    if not acl.host:
        raise _invalid("Host should not be empty; use * for every host")


def check_count(count: int, what: str) -> None:
    """INVALID_REQUEST past MAX_ACLS_PER_REQUEST: asked again by the controller's service
    before it converts a request's bindings (100,000 of them took half a second)."""
    if count > MAX_ACLS_PER_REQUEST:
        raise _invalid(
            f"A request may hold at most {MAX_ACLS_PER_REQUEST} {what}; this one holds {count}."
        )


def create_acls(
    image: MetadataImage,
    acls: Sequence[StandardAcl],
    new_id: Callable[[], bytes] = new_acl_id,
) -> tuple[list[Message], list[ApiError | None]]:
    """The records that create `acls` and a result per creation (None: created or already
    there)."""
    check_count(len(acls), "ACL creations")
    existing = set(image.acls.by_id.values())
    records: list[Message] = []
    results: list[ApiError | None] = []
    for acl in acls:
        try:
            validate_new_acl(acl)
        except ApiError as error:
            results.append(error)
            continue
        if acl not in existing:
            existing.add(acl)
            acl_id = new_id()
            while acl_id in image.acls.by_id:  # Kafka's newAclId: never reuse a live id
                acl_id = new_id()
            records.append(acl_record(acl_id, acl))
        results.append(None)
    return records, results


@dataclass(frozen=True, slots=True)
class DeleteAclsResult:
    """One filter's result: an error, or the ACLs it deleted."""

    error: ApiError | None = None
    deleted: tuple[StandardAcl, ...] = ()


def delete_acls(
    image: MetadataImage, filters: Sequence[AclBindingFilter]
) -> tuple[list[Message], list[DeleteAclsResult]]:
    """The records that delete every ACL a filter matches, and per filter what it deleted."""
    check_count(len(filters), "ACL deletion filters")
    removed: dict[bytes, None] = {}  # ids, in the order first matched
    results: list[DeleteAclsResult] = []
    for acl_filter in filters:
        problem = acl_filter.unknown()
        if problem is not None:
            results.append(DeleteAclsResult(_invalid(problem)))
            continue
        matched = _matching(image, acl_filter)
        removed.update(dict.fromkeys(acl_id for acl_id, _ in matched))
        results.append(DeleteAclsResult(deleted=tuple(acl for _, acl in matched)))
    records: list[Message] = [pb.RemoveAccessControlEntryRecord(id=acl_id) for acl_id in removed]
    return records, results


def describe_acls(image: MetadataImage, acl_filter: AclBindingFilter) -> list[StandardAcl]:
    """The ACLs `acl_filter` matches, in a stable order (by resource, then entry)."""
    problem = acl_filter.unknown()
    if problem is not None:
        raise _invalid(problem)
    return [acl for _, acl in _matching(image, acl_filter)]


def _sort_key(acl: StandardAcl) -> tuple[int, str, int, str, str, int, int]:
    return (
        acl.resource_type,
        acl.resource_name,
        acl.pattern_type,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission_type,
    )


def _matching(
    image: MetadataImage, acl_filter: AclBindingFilter
) -> list[tuple[bytes, StandardAcl]]:
    found: Iterable[tuple[bytes, StandardAcl]] = (
        (acl_id, acl) for acl_id, acl in image.acls.by_id.items() if acl_filter.matches(acl)
    )
    return sorted(found, key=lambda item: _sort_key(item[1]))
