"""`strom acls` without a cluster: the options kafka-acls.sh refuses (its sentence on stderr,
exit 1, nothing sent: the bootstrap address has no server), and the ACLs each option set
stands for (--producer, --consumer, operations by Kafka's names in any case)."""

from __future__ import annotations

import pytest

from strom_api.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from strom_tools import acl_command
from strom_tools.acl_command import Entry, Pattern, pattern_entries
from strom_tools.cli import build_parser
from tests.tools.tool_runs import run

BOOT = ["--bootstrap-server", "127.0.0.1:1"]  # nothing listens: a usage error never connects

BAD = [
    (["--add", "--topic", "t"],
     "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."),
    (["--add", "--allow-principal", "alice", "--topic", "t"],
     "expected a string in format principalType:principalName but got alice"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
     "Unknown operation name Fly"),
    (["--add", "--allow-principal", "User:a", "--operation", "IdempotentWrite", "--topic", "t"],
     "ResourceType TOPIC only supports operations Read, Write, Create, Delete, Alter, Describe, "
     "DescribeConfigs, AlterConfigs, All"),
    (["--add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"],
     "ResourceType GROUP only supports operations Read, Delete, Describe, All"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type",
      "match"], "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    (["--list", "--resource-pattern-type", "fuzzy"], "Unknown resource-pattern-type: fuzzy"),
    (["--list", "--remove"], "Command must include exactly one action: --list, --add, --remove."),
    ([], "Command must include exactly one action: --list, --add, --remove."),
    (["--list", "--allow-principal", "User:a"],
     'Option "[list]" can\'t be used with option "[allow-principal]"'),
    (["--add", "--principal", "User:a", "--topic", "t"],
     "The --principal option is only available if --list is set"),
    (["--add", "--producer", "--allow-principal", "User:a", "--group", "g"],
     "With --producer you must specify a --topic"),
    (["--add", "--producer", "--operation", "Read", "--allow-principal", "User:a", "--topic",
      "t"], 'Option "[producer]" can\'t be used with option "[operation]"'),
    (["--add", "--idempotent", "--allow-principal", "User:a", "--topic", "t"],
     "The --idempotent option is only available if --producer is set"),
    (["--add", "--consumer", "--allow-principal", "User:a", "--topic", "t"],
     "With --consumer you must specify a --topic and a --group and no --cluster or "
     "--transactional-id option should be specified."),
    (["--add", "--allow-principal", "User:a"],
     "You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
     "or --transactional-id <transactionalId>"),
]  # fmt: skip


@pytest.mark.parametrize("args,message", BAD, ids=[m[:40] for _, m in BAD])
def test_bad_options_are_kafkas_sentence_and_exit_1(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run(capsys, "acls", *BOOT, *args)
    assert (code, out, err.strip()) == (1, "", message)


def plan(*args: str) -> dict[Pattern, list[Entry]]:
    parsed = build_parser().parse_args(["acls", *BOOT, *args])
    assert acl_command.usage_problem(parsed) is None
    return pattern_entries(parsed)


def entry(principal: str, op: AclOperation, host: str = "*", allow: bool = True) -> Entry:
    permission = AclPermissionType.ALLOW if allow else AclPermissionType.DENY
    return Entry(principal, host, op, permission)


def topic(name: str, pattern: PatternType = PatternType.LITERAL) -> Pattern:
    return Pattern(ResourceType.TOPIC, name, pattern)


CLUSTER = Pattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)


def test_operations_by_kafkas_names_in_any_case_default_all() -> None:
    assert plan("--add", "--allow-principal", "User:a", "--topic", "t") == {
        topic("t"): [entry("User:a", AclOperation.ALL)]
    }
    ops = ["IdempotentWrite", "idempotentwrite", "IDEMPOTENT_WRITE", "ClusterAction", "alter"]
    got = plan("--add", "--allow-principal", "User:a", "--cluster",
               *[a for op in ops for a in ("--operation", op)])  # fmt: skip
    assert got == {
        CLUSTER: [
            entry("User:a", AclOperation.IDEMPOTENT_WRITE),
            entry("User:a", AclOperation.CLUSTER_ACTION),
            entry("User:a", AclOperation.ALTER),
        ]
    }


def test_hosts_default_to_every_host_per_principal() -> None:
    got = plan("--add", "--allow-principal", "User:a", "--deny-principal", "User:b",
               "--deny-host", "10.0.0.1", "--deny-host", "10.0.0.2", "--operation", "Read",
               "--topic", "t", "--resource-pattern-type", "PREFIXED")  # fmt: skip
    assert got == {
        topic("t", PatternType.PREFIXED): [
            entry("User:a", AclOperation.READ),
            entry("User:b", AclOperation.READ, "10.0.0.1", allow=False),
            entry("User:b", AclOperation.READ, "10.0.0.2", allow=False),
        ]
    }


def test_producer_with_idempotent_and_transactional_ids() -> None:
    got = plan("--add", "--producer", "--idempotent", "--allow-principal", "User:p",
               "--topic", "t", "--transactional-id", "tx")  # fmt: skip
    assert got == {
        topic("t"): [entry("User:p", op) for op in
                     (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)],
        CLUSTER: [entry("User:p", AclOperation.IDEMPOTENT_WRITE)],
        Pattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL): [
            entry("User:p", AclOperation.WRITE), entry("User:p", AclOperation.DESCRIBE)
        ],
    }  # fmt: skip


def test_consumer_reads_topics_and_groups() -> None:
    got = plan("--add", "--consumer", "--allow-principal", "User:c", "--topic", "t",
               "--group", "g")  # fmt: skip
    assert got == {
        topic("t"): [entry("User:c", AclOperation.READ), entry("User:c", AclOperation.DESCRIBE)],
        Pattern(ResourceType.GROUP, "g", PatternType.LITERAL): [entry("User:c", AclOperation.READ)],
    }


def test_remove_without_principals_means_every_acl_of_the_resource() -> None:
    assert plan("--remove", "--topic", "t", "--resource-pattern-type", "any") == {
        topic("t", PatternType.ANY): []
    }


def test_kafkas_text_of_patterns_and_entries() -> None:
    assert topic("t").text() == "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    assert Pattern(ResourceType.ANY, None, PatternType.ANY).text(as_filter=True) == (
        "ResourcePatternFilter(resourceType=ANY, name=null, patternType=ANY)"
    )
    assert str(entry("User:a", AclOperation.IDEMPOTENT_WRITE, allow=False)) == (
        "(principal=User:a, host=*, operation=IDEMPOTENT_WRITE, permissionType=DENY)"
    )
