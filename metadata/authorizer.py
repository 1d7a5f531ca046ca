"""Kafka's StandardAuthorizer over the ACLs of a metadata image: may `principal`, connected
from `host`, perform `operation` on a resource? Contains no I/O: a broker builds one from
its image and its server properties and asks it on every request, from any thread (it is
immutable).

The rules are Kafka's (StandardAuthorizerData):
- a principal named in `super.users` may do everything;
- an ACL applies to a resource when it is LITERAL on the resource's exact name, LITERAL on
  the wildcard `*`, or PREFIXED on a prefix of the name; to a request when its principal is
  the request's or `User:*` and its host is the request's or `*`;
- an applying DENY wins over any ALLOW; ALL matches every operation; an ALLOW of READ,
  WRITE, DELETE or ALTER also allows DESCRIBE, one of ALTER_CONFIGS also DESCRIBE_CONFIGS
  (a DENY implies nothing: DENY READ does not deny DESCRIBE);
- when no ACL at all applies to the resource (any principal, any operation),
  `allow.everyone.if.no.acl.found` decides; when some do but none allows, it is denied.

The ACLs are indexed once per image (`AclIndex`), so a check looks at the ACLs of its
resource only: a dict by (type, name) for LITERAL ones (the wildcard is the name `*`), and
for PREFIXED ones a dict by (type, prefix) probed with the resource name cut at each prefix
length the index holds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from storage.errors import InvalidConfigError
from strom_api.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG = "allow.everyone.if.no.acl.found"

# What an ALLOW ACL of an operation grants besides the operation itself (Kafka's
# IMPLIES_DESCRIBE and IMPLIES_DESCRIBE_CONFIGS).
_IMPLIES_DESCRIBE = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    }
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


@dataclass(frozen=True, slots=True)
class StandardAcl:
    """One ACL as the metadata log holds it (Kafka's StandardAcl): a resource pattern and
    an access control entry. Only concrete values: no ANY, MATCH or UNKNOWN."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType  # LITERAL or PREFIXED
    principal: str  # "Type:name", e.g. User:alice; User:* for everyone
    host: str  # an address, or * for every host
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"StandardAcl(resourceType={self.resource_type.name}, "
            f"resourceName={self.resource_name}, patternType={self.pattern_type.name}, "
            f"principal={self.principal}, host={self.host}, "
            f"operation={self.operation.name}, permissionType={self.permission_type.name})"
        )

    def applies_to(self, resource_type: ResourceType, resource_name: str) -> bool:
        """Whether this ACL's resource pattern covers the named resource."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return resource_name.startswith(self.resource_name)
        return self.resource_name in (resource_name, WILDCARD_RESOURCE)


def parse_principal(text: str) -> tuple[str, str]:
    """`Type:name` split in two (Kafka's SecurityUtils.parseKafkaPrincipal); ValueError with
    Kafka's sentence when there is no type."""
    principal_type, sep, name = text.partition(":")
    if not sep or not principal_type:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return principal_type, name


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    """The authorizer's server properties."""

    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @staticmethod
    def from_properties(props: Mapping[str, str]) -> AuthorizerSettings:
        """Reads `super.users` (Kafka's format: principals separated by `;`, e.g.
        `User:admin;User:broker`) and `allow.everyone.if.no.acl.found` (true or false);
        a bad value raises InvalidConfigError naming it."""
        super_users: set[str] = set()
        for entry in props.get(SUPER_USERS_CONFIG, "").split(";"):
            principal = entry.strip()
            if not principal:
                continue
            try:
                parse_principal(principal)
            except ValueError as e:
                raise InvalidConfigError(
                    f"Invalid value {props[SUPER_USERS_CONFIG]!r} for configuration "
                    f"{SUPER_USERS_CONFIG}: {e}"
                ) from None
            super_users.add(principal)
        raw = str(props.get(ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG, "false")).strip().lower()
        if raw not in ("true", "false"):
            raise InvalidConfigError(
                f"Invalid value {props[ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG]!r} for "
                f"configuration {ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG}: Expected value to "
                "be either true or false"
            )
        return AuthorizerSettings(frozenset(super_users), raw == "true")


class AclIndex:
    """An immutable set of ACLs indexed by resource (see the module's comment). Iterating
    yields every ACL."""

    __slots__ = ("_literal", "_prefixed", "_prefix_lengths", "_size")

    def __init__(self, acls: Iterable[StandardAcl]) -> None:
        literal: dict[tuple[ResourceType, str], list[StandardAcl]] = defaultdict(list)
        prefixed: dict[tuple[ResourceType, str], list[StandardAcl]] = defaultdict(list)
        lengths: dict[ResourceType, set[int]] = defaultdict(set)
        size = 0
        for acl in acls:
            size += 1
            key = (acl.resource_type, acl.resource_name)
            if acl.pattern_type == PatternType.PREFIXED:
                prefixed[key].append(acl)
                lengths[acl.resource_type].add(len(acl.resource_name))
            else:
                literal[key].append(acl)
        self._literal = {k: tuple(v) for k, v in literal.items()}
        self._prefixed = {k: tuple(v) for k, v in prefixed.items()}
        self._prefix_lengths = {t: tuple(sorted(ls)) for t, ls in lengths.items()}
        self._size = size

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[StandardAcl]:
        for group in self._literal.values():
            yield from group
        for group in self._prefixed.values():
            yield from group

    def matching(self, resource_type: ResourceType, resource_name: str) -> Iterator[StandardAcl]:
        """Every ACL whose resource pattern covers the resource: literal, wildcard, then
        prefixed ones."""
        yield from self._literal.get((resource_type, resource_name), ())
        if resource_name != WILDCARD_RESOURCE:
            yield from self._literal.get((resource_type, WILDCARD_RESOURCE), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(resource_name):
                break
            yield from self._prefixed.get((resource_type, resource_name[:length]), ())


@dataclass(frozen=True, slots=True)
class Decision:
    """An authorization result and the rule that gave it, worded as Kafka's audit log
    words it: SuperUser, MatchingAcl(acl=...), DefaultAllow or DefaultDeny."""

    allowed: bool
    rule: str
    acl: StandardAcl | None = None


_SUPER_USER = Decision(True, "SuperUser")
_DEFAULT_DENY = Decision(False, "DefaultDeny")
_DEFAULT_ALLOW = Decision(True, "DefaultAllow")


def _result(
    acl: StandardAcl, principals: tuple[str, str], host: str, operation: AclOperation
) -> bool | None:
    """Whether this ACL (whose resource is known to match) allows (True) or denies (False)
    the request, or None when it does not apply to it (Kafka's findResult)."""
    if acl.principal not in principals:
        return None
    if acl.host != WILDCARD_HOST and acl.host != host:
        return None
    allow = acl.permission_type == AclPermissionType.ALLOW
    if acl.operation != AclOperation.ALL:
        if allow and operation == AclOperation.DESCRIBE:
            implied = acl.operation in _IMPLIES_DESCRIBE
        elif allow and operation == AclOperation.DESCRIBE_CONFIGS:
            implied = acl.operation in _IMPLIES_DESCRIBE_CONFIGS
        else:
            implied = acl.operation == operation
        if not implied:
            return None
    return allow


class StandardAuthorizer:
    """Answers authorization questions over one immutable set of ACLs (an AclIndex, e.g.
    the image's, is reused; any other iterable of ACLs is indexed here)."""

    __slots__ = ("_index", "_settings", "_no_acl")

    def __init__(self, acls: Iterable[StandardAcl], settings: AuthorizerSettings) -> None:
        self._index = acls if isinstance(acls, AclIndex) else AclIndex(acls)
        self._settings = settings
        self._no_acl = _DEFAULT_ALLOW if settings.allow_everyone_if_no_acl_found else _DEFAULT_DENY

    @property
    def settings(self) -> AuthorizerSettings:
        return self._settings

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        return self.explain(principal, host, operation, resource_type, resource_name).allowed

    def explain(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> Decision:
        """The decision with its reason, for the authorizer's log."""
        if principal in self._settings.super_users:
            return _SUPER_USER
        principals = (principal, WILDCARD_PRINCIPAL)
        found_resource_acls = False
        allow_acl: StandardAcl | None = None
        for acl in self._index.matching(resource_type, resource_name):
            found_resource_acls = True
            result = _result(acl, principals, host, operation)
            if result is False:
                return Decision(False, f"MatchingAcl(acl={acl})", acl)
            if result is True and allow_acl is None:
                allow_acl = acl
        if allow_acl is not None:
            return Decision(True, f"MatchingAcl(acl={allow_acl})", allow_acl)
        return _DEFAULT_DENY if found_resource_acls else self._no_acl

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may perform `operation` on at least one resource of the
        type (Kafka's Authorizer.authorizeByResourceType, KIP-679: an idempotent producer
        needs WRITE on some topic): an applying ALLOW of the operation (or ALL) that no
        applying DENY covers — a DENY on the same literal name, on a prefix of it, or on
        the wildcard. Only the operation itself counts, without implications. It reads every
        ACL, as Kafka's default implementation does: it runs once per InitProducerId, not
        per record batch."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True  # super users, and allow.everyone.if.no.acl.found without ACLs
        principals = (principal, WILDCARD_PRINCIPAL)
        allowed: list[StandardAcl] = []
        wildcard_allowed = False
        deny_literal: set[str] = set()
        deny_prefixes: set[str] = set()
        for acl in self._index:
            if acl.resource_type != resource_type or acl.principal not in principals:
                continue
            if acl.host not in (WILDCARD_HOST, host):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            prefixed = acl.pattern_type == PatternType.PREFIXED
            if acl.permission_type == AclPermissionType.DENY:
                if not prefixed and acl.resource_name == WILDCARD_RESOURCE:
                    return False
                (deny_prefixes if prefixed else deny_literal).add(acl.resource_name)
            else:
                if not prefixed and acl.resource_name == WILDCARD_RESOURCE:
                    wildcard_allowed = True  # unless a wildcard DENY follows
                allowed.append(acl)
        if wildcard_allowed:
            return True
        for acl in allowed:
            name = acl.resource_name
            if acl.pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:n] in deny_prefixes for n in range(1, len(name) + 1)):
                return True
        return False
