"""`strom acls`: kafka-acls.sh --add, --remove and --list with AdminClient (create_acls,
delete_acls, describe_acls, as kafka-acls.sh uses Kafka's Admin), with Kafka's options,
checks and output.

As Kafka's AclCommand:
- resources: --topic, --group, --transactional-id (each repeatable) and --cluster, with
  --resource-pattern-type (LITERAL, the default, or PREFIXED to add; ANY and MATCH too to
  list and remove); --cluster is the LITERAL kafka-cluster resource;
- entries: --allow-principal/--deny-principal (repeatable, `Type:name`) from
  --allow-host/--deny-host (default `*` once a principal is given), for every --operation
  (repeatable, Kafka's names in any case, e.g. Read, IdempotentWrite; default All); each
  operation must be one the resource type supports;
- --producer: Write, Describe, Create on the topics (Write, Describe on transactional ids),
  with --idempotent IdempotentWrite on the cluster; --consumer: Read, Describe on the topics
  and Read on the groups;
- --add prints `Adding ACLs for resource `ResourcePattern(...)`:` and the entries, then the
  resources' ACLs as --list does; --remove asks `(y/n)` per resource unless --force, and
  deletes the given entries, or every ACL of the resource when no principal is given;
- --list prints `Current ACLs for resource `...`:` per resource (every resource when none
  is named), with --principal only that principal's, under `ACLs for principal `...``.
Bad options print Kafka's sentence and exit 1 before anything is sent; a refusal by the
controller prints `Error while executing ACL command : NAME: message` and exits 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from strom.admin import ACL, ACLFilter, AdminClient, ResourcePattern, ResourcePatternFilter
from strom.errors import StromError
from strom_api.acls import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

Out = Callable[[str], None]
Ask = Callable[[str], bool]

# Kafka's AclEntry.supportedOperations, plus All for every type.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE),
}


def operation_name(operation: AclOperation) -> str:
    """Kafka's name of an operation (SecurityUtils.operationName): IDEMPOTENT_WRITE is
    IdempotentWrite."""
    return "".join(part.capitalize() for part in operation.name.split("_"))


def _key(text: str) -> str:
    return text.replace("_", "").replace("-", "").lower()


_OPERATIONS = {_key(op.name): op for op in AclOperation if op is not AclOperation.UNKNOWN}


class UsageError(Exception):
    """Options kafka-acls.sh refuses: its sentence, exit 1."""


@dataclass(frozen=True, order=True)
class Pattern:
    """A resource pattern or, with ANY/MATCH or a None name, a pattern filter; printed as
    Kafka prints ResourcePattern and ResourcePatternFilter."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    @property
    def specific(self) -> bool:
        return self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)

    def text(self, as_filter: bool = False) -> str:
        kind = "ResourcePatternFilter" if as_filter else "ResourcePattern"
        name = "null" if self.name is None else self.name
        return (
            f"{kind}(resourceType={self.resource_type.name}, name={name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, order=True)
class Entry:
    """Kafka's AccessControlEntry."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, "
            f"operation={self.operation.name}, permissionType={self.permission_type.name})"
        )


# --- from options to resources and entries (pure; UsageError with Kafka's sentence) --------


def _pattern_type(args: argparse.Namespace) -> PatternType:
    text = (args.resource_pattern_type or "LITERAL").strip().upper()
    if text not in ("ANY", "MATCH", "LITERAL", "PREFIXED"):
        raise UsageError(f"Unknown resource-pattern-type: {args.resource_pattern_type}")
    return PatternType[text]


def _principals(values: Iterable[str] | None) -> list[str]:
    out = []
    for raw in values or ():
        principal = raw.strip()
        kind, sep, _ = principal.partition(":")
        if not sep or not kind:
            raise UsageError(
                f"expected a string in format principalType:principalName but got {principal}"
            )
        out.append(principal)
    return list(dict.fromkeys(out))


def _operations(values: Iterable[str] | None) -> list[AclOperation]:
    out = []
    for raw in values or ["All"]:
        operation = _OPERATIONS.get(_key(raw.strip()))
        if operation is None:
            raise UsageError(f"Unknown operation name {raw.strip()}")
        out.append(operation)
    return list(dict.fromkeys(out))


def resource_patterns(args: argparse.Namespace, required: bool = True) -> list[Pattern]:
    """Kafka's getResourceFilter: topics, the cluster (LITERAL only), groups, transactional
    ids, in that order."""
    pattern_type = _pattern_type(args)
    patterns = [Pattern(ResourceType.TOPIC, t.strip(), pattern_type) for t in args.topic or ()]
    if pattern_type == PatternType.LITERAL and (args.cluster or args.idempotent):
        patterns.append(Pattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    patterns += [Pattern(ResourceType.GROUP, g.strip(), pattern_type) for g in args.group or ()]
    patterns += [
        Pattern(ResourceType.TRANSACTIONAL_ID, t.strip(), pattern_type)
        for t in args.transactional_id or ()
    ]
    if not patterns and required:
        raise UsageError(
            "You must provide at least one resource: --topic <topic> or --cluster or "
            "--group <group> or --transactional-id <transactionalId>"
        )
    return list(dict.fromkeys(patterns))


def _hosts(hosts: list[str] | None, principals: list[str]) -> list[str]:
    if hosts:
        return list(dict.fromkeys(h.strip() for h in hosts))
    return ["*"] if principals else []


def entries(args: argparse.Namespace, operations: Iterable[AclOperation]) -> list[Entry]:
    """Kafka's getAcl: every allowed principal from every allowed host, and every denied
    one from every denied host, for every operation."""
    ops = list(operations)
    out: list[Entry] = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        names = _principals(principals)
        for principal in names:
            for host in _hosts(hosts, names):
                out += [Entry(principal, host, op, permission) for op in ops]
    return out


def pattern_entries(args: argparse.Namespace) -> dict[Pattern, list[Entry]]:
    """Kafka's getResourceFilterToAcls: the resources and the entries for each."""
    patterns = resource_patterns(args)
    plan: dict[Pattern, list[Entry]] = {}
    if not args.producer and not args.consumer:
        acl_entries = entries(args, _operations(args.operation))
        plan = {p: list(acl_entries) for p in patterns}
    if args.producer:
        topic_ops = [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
        tx_ops = [AclOperation.WRITE, AclOperation.DESCRIBE]
        for p in patterns:
            if p.resource_type == ResourceType.TOPIC:
                plan[p] = entries(args, topic_ops)
            elif p.resource_type == ResourceType.TRANSACTIONAL_ID:
                plan[p] = entries(args, tx_ops)
            elif p.resource_type == ResourceType.CLUSTER and args.idempotent:
                plan[p] = entries(args, [AclOperation.IDEMPOTENT_WRITE])
    if args.consumer:
        for p in patterns:
            if p.resource_type == ResourceType.TOPIC:
                ops = [AclOperation.READ, AclOperation.DESCRIBE]
            elif p.resource_type == ResourceType.GROUP:
                ops = [AclOperation.READ]
            else:
                continue
            plan[p] = list(dict.fromkeys(plan.get(p, []) + entries(args, ops)))
    for p, acl_entries in plan.items():
        valid = SUPPORTED_OPERATIONS[p.resource_type] + (AclOperation.ALL,)
        if any(e.operation not in valid for e in acl_entries):
            names = ", ".join(operation_name(op) for op in valid)
            raise UsageError(
                f"ResourceType {p.resource_type.name} only supports operations {names}"
            )
    return plan


def usage_problem(args: argparse.Namespace) -> str | None:
    """The option combinations kafka-acls.sh refuses (AclCommandOptions.checkArgs) and the
    values it cannot parse, as its sentence; None when the options fit together."""
    actions = [args.add, args.remove, args.list]
    if sum(actions) != 1:
        return "Command must include exactly one action: --list, --add, --remove. "
    if args.list:
        for name in ("producer", "consumer", "allow_host", "allow_principal", "deny_host",
                     "deny_principal"):  # fmt: skip
            if getattr(args, name):
                return f'Option "[list]" can\'t be used with option "[{name.replace("_", "-")}]"'
    if args.principal and not args.list:
        return "The --principal option is only available if --list is set"
    if args.producer or args.consumer:
        for name in ("operation", "deny_principal", "deny_host"):
            if getattr(args, name):
                used = "producer" if args.producer else "consumer"
                return f'Option "[{used}]" can\'t be used with option "[{name.replace("_", "-")}]"'
    if args.producer and not (args.topic or args.transactional_id):
        return "With --producer you must specify a --topic"
    if args.idempotent and not args.producer:
        return "The --idempotent option is only available if --producer is set"
    if args.consumer and (
        not args.topic
        or not args.group
        or (not args.producer and (args.cluster or args.transactional_id))
    ):
        return (
            "With --consumer you must specify a --topic and a --group and no --cluster or "
            "--transactional-id option should be specified."
        )
    try:
        pattern_type = _pattern_type(args)
        if args.add and pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return (
                f"A '--resource-pattern-type' value of '{pattern_type.name}' is not valid "
                "when adding acls."
            )
        if args.list:
            resource_patterns(args, required=False)
            _principals(args.principal)
        else:
            plan = pattern_entries(args)
            if args.add and any(not e for e in plan.values()):
                return (
                    "You must specify one of: --allow-principal, --deny-principal when trying "
                    "to add ACLs."
                )
    except UsageError as exc:
        return str(exc)
    return None


# --- asking AdminClient -----------------------------------------------------------------


def _filter(pattern: Pattern, entry: Entry | None = None) -> ACLFilter:
    resource = ResourcePatternFilter(pattern.resource_type, pattern.name, pattern.pattern_type)
    if entry is None:
        return ACLFilter(None, None, AclOperation.ANY, AclPermissionType.ANY, resource)
    return ACLFilter(entry.principal, entry.host, entry.operation, entry.permission_type, resource)


def _acl(pattern: Pattern, entry: Entry) -> ACL:
    assert pattern.name is not None  # usage_problem: --add names its resources
    resource = ResourcePattern(pattern.resource_type, pattern.name, pattern.pattern_type)
    return ACL(entry.principal, entry.host, entry.operation, entry.permission_type, resource)


def _block(header: str, acl_entries: Iterable[Entry]) -> str:
    """Kafka's layout: the header, a line per entry indented by a tab, a blank line."""
    return f"{header} \n " + "\n".join(f"\t{e}" for e in acl_entries) + " \n"


def _describe(admin: AdminClient, patterns: list[Pattern]) -> dict[Pattern, set[Entry]]:
    filters = [_filter(p) for p in patterns] or [
        _filter(Pattern(ResourceType.ANY, None, PatternType.ANY))
    ]
    found: dict[Pattern, set[Entry]] = {}
    for acl_filter in filters:
        acls, _ = admin.describe_acls(acl_filter)
        for acl in acls:
            resource = acl.resource_pattern
            pattern = Pattern(resource.resource_type, resource.resource_name, resource.pattern_type)
            entry = Entry(acl.principal, acl.host, acl.operation, acl.permission_type)
            found.setdefault(pattern, set()).add(entry)
    return found


def list_acls(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    found = _describe(admin, resource_patterns(args, required=False))
    principals = _principals(args.principal)
    if not principals:
        for pattern in sorted(found):
            out(_block(f"Current ACLs for resource `{pattern.text()}`:", sorted(found[pattern])))
        return
    for principal in principals:
        out(f"ACLs for principal `{principal}`")
        for pattern in sorted(found):
            mine = sorted(e for e in found[pattern] if e.principal == principal)
            if mine:
                out(_block(f"Current ACLs for resource `{pattern.text()}`:", mine))


def _raise_first(errors: Iterable[StromError | None]) -> None:
    """The first refusal among per-item results, as the tool's error (Kafka's
    `all().get()` raises the first failure)."""
    for error in errors:
        if error is not None:
            raise error


def add_acls(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    for pattern, acl_entries in pattern_entries(args).items():
        out(_block(f"Adding ACLs for resource `{pattern.text()}`:", acl_entries))
        created = admin.create_acls([_acl(pattern, e) for e in acl_entries])
        _raise_first(error for _, error in created["failed"])
    list_acls(admin, args, out)


def remove_acls(admin: AdminClient, args: argparse.Namespace, out: Out, ask: Ask) -> None:
    for pattern, acl_entries in pattern_entries(args).items():
        if acl_entries:
            question = (
                "Are you sure you want to remove ACLs: \n "
                + "\n".join(f"\t{e}" for e in acl_entries)
                + f" \n from resource filter `{pattern.text(as_filter=True)}`? (y/n)"
            )
            filters = [_filter(pattern, e) for e in acl_entries]
        else:
            question = (
                "Are you sure you want to delete all ACLs for resource filter "
                f"`{pattern.text(as_filter=True)}`? (y/n)"
            )
            filters = [_filter(pattern)]
        if not args.force and not ask(question):
            continue
        _raise_first(error for _, _, error in admin.delete_acls(filters))
    list_acls(admin, args, out)


def _ask(question: str) -> bool:
    """kafka-acls.sh's confirmAction: the question, then a line that must be y (any case);
    no terminal or end of input is a no."""
    print(question, flush=True)
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() == "y"


def run(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    if args.add:
        add_acls(admin, args, out)
    elif args.remove:
        remove_acls(admin, args, out, _ask)
    else:
        list_acls(admin, args, out)
