"""The StandardAuthorizer's rules as a table, ported from Kafka's StandardAuthorizerTest and
StandardAuthorizerData's comments, plus the settings parser and the index."""

from __future__ import annotations

import pytest

from metadata.authorizer import (
    AclIndex,
    AuthorizerSettings,
    StandardAcl,
    StandardAuthorizer,
)
from storage.errors import InvalidConfigError
from strom_api.acls import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(
    rtype: ResourceType,
    name: str,
    pattern: PatternType,
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType,
    host: str = "*",
) -> StandardAcl:
    return StandardAcl(rtype, name, pattern, principal, host, operation, permission)


def foo_acl(operation: AclOperation, permission: AclPermissionType) -> StandardAcl:
    """Kafka's newFooAcl: TOPIC foo_ PREFIXED for User:bob from any host."""
    return acl(TOPIC, "foo_", PREFIXED, "User:bob", operation, permission)


def bar_acl(operation: AclOperation, permission: AclPermissionType) -> StandardAcl:
    """Kafka's newBarAcl: GROUP bar LITERAL for everyone."""
    return acl(GROUP, "bar", LITERAL, "User:*", operation, permission)


MANY_ACLS = [  # Kafka's createAuthorizerWithManyAcls
    acl(TOPIC, "green2", LITERAL, "User:*", Op.READ, ALLOW),
    acl(TOPIC, "green", PREFIXED, "User:bob", Op.READ, ALLOW),
    acl(TOPIC, "betamax4", LITERAL, "User:bob", Op.READ, ALLOW),
    acl(TOPIC, "betamax", LITERAL, "User:bob", Op.READ, ALLOW),
    acl(TOPIC, "beta", PREFIXED, "User:*", Op.READ, ALLOW),
    acl(TOPIC, "alpha", PREFIXED, "User:*", Op.READ, ALLOW),
    acl(TOPIC, "alp", PREFIXED, "User:bob", Op.READ, DENY),
    acl(GROUP, "*", LITERAL, "User:bob", Op.WRITE, ALLOW),
    acl(GROUP, "wheel", LITERAL, "User:*", Op.WRITE, DENY),
]

OPERATION_ALL_ACLS = [  # Kafka's testTopicAclWithOperationAll
    acl(TOPIC, "foo", LITERAL, "User:*", Op.ALL, ALLOW),
    acl(TOPIC, "bar", PREFIXED, "User:alice", Op.ALL, ALLOW),
    acl(TOPIC, "baz", LITERAL, "User:bob", Op.ALL, ALLOW),
]

# (case, acls, principal, host, operation, resource type, resource name, allowed)
CASES: list[
    tuple[str, list[StandardAcl], str, str, AclOperation, ResourceType, str, bool]
] = [
    # testFindResultImplication: an ALLOW of these implies DESCRIBE ...
    *[
        (f"allow {op.name} implies describe", [foo_acl(op, ALLOW)], "User:bob", "1.2.3.4",
         Op.DESCRIBE, TOPIC, "foo_bar", True)
        for op in (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
    ],
    ("allow CREATE does not imply describe", [foo_acl(Op.CREATE, ALLOW)], "User:bob",
     "1.2.3.4", Op.DESCRIBE, TOPIC, "foo_bar", False),
    # ... a DENY of them does not deny DESCRIBE (with allow.everyone below, so a non-match
    # shows as allowed where a match would deny)
    *[
        (f"deny {op.name} does not deny describe",
         [foo_acl(op, DENY), foo_acl(Op.DESCRIBE, ALLOW)], "User:bob", "1.2.3.4",
         Op.DESCRIBE, TOPIC, "foo_bar", True)
        for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
    ],
    ("deny DESCRIBE denies describe", [foo_acl(Op.DESCRIBE, DENY), foo_acl(Op.READ, ALLOW)],
     "User:bob", "1.2.3.4", Op.DESCRIBE, TOPIC, "foo_bar", False),
    *[
        (f"allow {op.name} implies describe_configs", [foo_acl(op, ALLOW)], "User:bob",
         "1.2.3.4", Op.DESCRIBE_CONFIGS, TOPIC, "foo_bar", True)
        for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    ],
    ("allow ALTER does not imply describe_configs", [foo_acl(Op.ALTER, ALLOW)], "User:bob",
     "1.2.3.4", Op.DESCRIBE_CONFIGS, TOPIC, "foo_bar", False),
    ("deny ALTER_CONFIGS does not deny describe_configs",
     [foo_acl(Op.ALTER_CONFIGS, DENY), foo_acl(Op.DESCRIBE_CONFIGS, ALLOW)], "User:bob",
     "1.2.3.4", Op.DESCRIBE_CONFIGS, TOPIC, "foo_bar", True),
    ("deny ALTER_CONFIGS denies alter_configs",
     [foo_acl(Op.ALTER_CONFIGS, DENY), foo_acl(Op.ALL, ALLOW)], "User:bob", "1.2.3.4",
     Op.ALTER_CONFIGS, TOPIC, "foo_bar", False),
    ("allow READ does not allow WRITE", [foo_acl(Op.READ, ALLOW)], "User:bob", "1.2.3.4",
     Op.WRITE, TOPIC, "foo_bar", False),
    # testFindResultPrincipalMatching
    ("principal matches", [foo_acl(Op.READ, ALLOW)], "User:bob", "1.2.3.4", Op.READ, TOPIC,
     "foo_bar", True),
    ("other principal", [foo_acl(Op.READ, ALLOW)], "User:alice", "1.2.3.4", Op.READ, TOPIC,
     "foo_bar", False),
    ("wildcard principal denies anyone", [bar_acl(Op.READ, DENY), bar_acl(Op.ALL, ALLOW)],
     "User:alice", "1.2.3.4", Op.READ, GROUP, "bar", False),
    ("principal type is part of the name",
     [acl(TOPIC, "t", LITERAL, "User:bob", Op.READ, ALLOW)], "Group:bob", "1.2.3.4", Op.READ,
     TOPIC, "t", False),
    # testSimpleAuthorizations
    ("prefix equal to the name", [foo_acl(Op.READ, ALLOW), foo_acl(Op.WRITE, ALLOW)],
     "User:bob", "1.2.3.4", Op.READ, TOPIC, "foo_", True),
    ("wildcard principal allows fred", [bar_acl(Op.DESCRIBE_CONFIGS, ALLOW),
                                        bar_acl(Op.ALTER_CONFIGS, ALLOW)],
     "User:fred", "1.2.3.4", Op.ALTER_CONFIGS, GROUP, "bar", True),
    ("prefix longer than the name", [foo_acl(Op.READ, ALLOW)], "User:bob", "1.2.3.4", Op.READ,
     TOPIC, "foo", False),
    # testTopicAclWithOperationAll
    ("ALL for everyone on foo: alice writes", OPERATION_ALL_ACLS, "User:alice", "h", Op.WRITE,
     TOPIC, "foo", True),
    ("ALL prefixed bar for alice", OPERATION_ALL_ACLS, "User:alice", "h",
     Op.DESCRIBE_CONFIGS, TOPIC, "bar", True),
    ("ALL on baz is bob's only", OPERATION_ALL_ACLS, "User:alice", "h", Op.DESCRIBE, TOPIC,
     "baz", False),
    ("bob writes foo", OPERATION_ALL_ACLS, "User:bob", "h", Op.WRITE, TOPIC, "foo", True),
    ("bob does not read bar", OPERATION_ALL_ACLS, "User:bob", "h", Op.READ, TOPIC, "bar",
     False),
    ("bob describes baz", OPERATION_ALL_ACLS, "User:bob", "h", Op.DESCRIBE, TOPIC, "baz", True),
    ("malory describes foo", OPERATION_ALL_ACLS, "User:malory", "h", Op.DESCRIBE, TOPIC,
     "foo", True),
    ("malory does not write bar", OPERATION_ALL_ACLS, "User:malory", "h", Op.WRITE, TOPIC,
     "bar", False),
    ("malory does not read baz", OPERATION_ALL_ACLS, "User:malory", "h", Op.READ, TOPIC, "baz",
     False),
    # testAuthorizationWithManyAcls
    ("bob reads green1 by prefix", MANY_ACLS, "User:bob", "h", Op.READ, TOPIC, "green1", True),
    ("wildcard deny on group wheel beats bob's wildcard allow", MANY_ACLS, "User:bob", "h",
     Op.WRITE, GROUP, "wheel", False),
    ("bob's DENY on prefix alp beats ALLOW on prefix alpha", MANY_ACLS, "User:bob", "h",
     Op.READ, TOPIC, "alpha", False),
    ("alice reads alpha", MANY_ACLS, "User:alice", "h", Op.READ, TOPIC, "alpha", True),
    ("bob writes any group by the literal *", MANY_ACLS, "User:bob", "h", Op.WRITE, GROUP,
     "arbitrary", True),
    ("ala: no ACL applies, denied by default", MANY_ACLS, "User:bob", "h", Op.READ, TOPIC,
     "ala", False),
    ("literal betamax does not match betamax5 but prefix beta does", MANY_ACLS, "User:carol",
     "h", Op.READ, TOPIC, "betamax5", True),
    ("literal green2 only for green2", MANY_ACLS, "User:carol", "h", Op.READ, TOPIC, "green3",
     False),
    ("bob: literal betamax4", MANY_ACLS, "User:bob", "h", Op.READ, TOPIC, "betamax4", True),
    # hosts
    ("host matches", [acl(TOPIC, "t", LITERAL, "User:bob", Op.READ, ALLOW, "10.0.0.1")],
     "User:bob", "10.0.0.1", Op.READ, TOPIC, "t", True),
    ("host differs", [acl(TOPIC, "t", LITERAL, "User:bob", Op.READ, ALLOW, "10.0.0.1")],
     "User:bob", "10.0.0.2", Op.READ, TOPIC, "t", False),
    ("deny from one host only",
     [acl(TOPIC, "t", LITERAL, "User:*", Op.READ, ALLOW),
      acl(TOPIC, "t", LITERAL, "User:bob", Op.READ, DENY, "10.0.0.9")],
     "User:bob", "10.0.0.1", Op.READ, TOPIC, "t", True),
    ("deny from that host",
     [acl(TOPIC, "t", LITERAL, "User:*", Op.READ, ALLOW),
      acl(TOPIC, "t", LITERAL, "User:bob", Op.READ, DENY, "10.0.0.9")],
     "User:bob", "10.0.0.9", Op.READ, TOPIC, "t", False),
    # deny wins whichever pattern carries it
    ("wildcard deny beats literal allow",
     [acl(TOPIC, "t", LITERAL, "User:bob", Op.READ, ALLOW),
      acl(TOPIC, "*", LITERAL, "User:bob", Op.READ, DENY)],
     "User:bob", "h", Op.READ, TOPIC, "t", False),
    ("literal deny beats wildcard allow",
     [acl(TOPIC, "*", LITERAL, "User:*", Op.ALL, ALLOW),
      acl(TOPIC, "t", LITERAL, "User:bob", Op.WRITE, DENY)],
     "User:bob", "h", Op.WRITE, TOPIC, "t", False),
    ("deny ALL denies read",
     [acl(TOPIC, "t", LITERAL, "User:*", Op.READ, ALLOW),
      acl(TOPIC, "t", PREFIXED, "User:bob", Op.ALL, DENY)],
     "User:bob", "h", Op.READ, TOPIC, "t", False),
    ("resource types are apart", [acl(GROUP, "t", LITERAL, "User:*", Op.READ, ALLOW)],
     "User:bob", "h", Op.READ, TOPIC, "t", False),
    ("a prefixed * is no wildcard", [acl(TOPIC, "*", PREFIXED, "User:*", Op.READ, ALLOW)],
     "User:bob", "h", Op.READ, TOPIC, "t", False),
    ("cluster resource", [acl(CLUSTER, "kafka-cluster", LITERAL, "User:broker",
                              Op.CLUSTER_ACTION, ALLOW)],
     "User:broker", "h", Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster", True),
]


@pytest.mark.parametrize(
    "acls,principal,host,operation,rtype,name,allowed",
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_authorize(
    acls: list[StandardAcl],
    principal: str,
    host: str,
    operation: AclOperation,
    rtype: ResourceType,
    name: str,
    allowed: bool,
) -> None:
    authorizer = StandardAuthorizer(acls, AuthorizerSettings())
    assert authorizer.authorize(principal, host, operation, rtype, name) is allowed
    # The same answer whatever the order the ACLs arrive in.
    reversed_authorizer = StandardAuthorizer(list(reversed(acls)), AuthorizerSettings())
    assert reversed_authorizer.authorize(principal, host, operation, rtype, name) is allowed


def test_super_users_may_do_everything_even_when_denied() -> None:
    acls = [acl(TOPIC, "*", LITERAL, "User:*", Op.ALL, DENY)]
    settings = AuthorizerSettings.from_properties({"super.users": "User:admin;User:broker"})
    authorizer = StandardAuthorizer(acls, settings)
    assert authorizer.authorize("User:admin", "h", Op.DELETE, TOPIC, "t")
    assert authorizer.explain("User:broker", "h", Op.READ, TOPIC, "t").rule == "SuperUser"
    assert not authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "t")


def test_allow_everyone_if_no_acl_found_decides_only_where_no_acl_applies() -> None:
    acls = [acl(TOPIC, "guarded", LITERAL, "User:alice", Op.READ, ALLOW)]
    open_ = StandardAuthorizer(
        acls, AuthorizerSettings.from_properties({"allow.everyone.if.no.acl.found": "true"})
    )
    closed = StandardAuthorizer(acls, AuthorizerSettings())
    assert open_.authorize("User:bob", "h", Op.WRITE, TOPIC, "free")
    assert open_.explain("User:bob", "h", Op.WRITE, TOPIC, "free").rule == "DefaultAllow"
    assert not closed.authorize("User:bob", "h", Op.WRITE, TOPIC, "free")
    # An ACL of another principal applies to the resource: no default allow any more.
    decision = open_.explain("User:bob", "h", Op.READ, TOPIC, "guarded")
    assert not decision.allowed and decision.rule == "DefaultDeny"


def test_explain_names_the_matching_acl() -> None:
    deny = acl(TOPIC, "pay", PREFIXED, "User:bob", Op.READ, DENY)
    authorizer = StandardAuthorizer(
        [acl(TOPIC, "payments", LITERAL, "User:bob", Op.READ, ALLOW), deny], AuthorizerSettings()
    )
    decision = authorizer.explain("User:bob", "h", Op.READ, TOPIC, "payments")
    assert not decision.allowed
    assert decision.acl == deny
    assert decision.rule == (
        "MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=pay, "
        "patternType=PREFIXED, principal=User:bob, host=*, operation=READ, "
        "permissionType=DENY))"
    )


@pytest.mark.parametrize(
    "value,expected",
    [
        ("", frozenset()),
        (" ", frozenset()),
        ("User:bob;User:alice ", frozenset({"User:bob", "User:alice"})),
        (";  User:bob  ;  User:alice ", frozenset({"User:bob", "User:alice"})),
    ],
)
def test_super_users_parsing(value: str, expected: frozenset[str]) -> None:
    assert AuthorizerSettings.from_properties({"super.users": value}).super_users == expected


def test_settings_defaults() -> None:
    settings = AuthorizerSettings.from_properties({})
    assert settings.super_users == frozenset()
    assert settings.allow_everyone_if_no_acl_found is False
    assert AuthorizerSettings.from_properties(
        {"allow.everyone.if.no.acl.found": "TRUE"}
    ).allow_everyone_if_no_acl_found


@pytest.mark.parametrize(
    "props,message",
    [
        (
            {"super.users": "bob;:alice"},
            "expected a string in format principalType:principalName but got bob",
        ),
        ({"allow.everyone.if.no.acl.found": "yes"}, "Expected value to be either true or false"),
    ],
)
def test_bad_settings_are_refused(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        AuthorizerSettings.from_properties(props)


def test_index_finds_only_the_resources_acls() -> None:
    index = AclIndex(MANY_ACLS)
    assert len(index) == len(MANY_ACLS) and set(index) == set(MANY_ACLS)
    found = set(index.matching(TOPIC, "betamax4"))
    assert found == {
        acl(TOPIC, "betamax4", LITERAL, "User:bob", Op.READ, ALLOW),
        acl(TOPIC, "beta", PREFIXED, "User:*", Op.READ, ALLOW),
    }
    assert set(index.matching(GROUP, "wheel")) == {MANY_ACLS[7], MANY_ACLS[8]}
    # The authorizer reuses an index it is given rather than building another.
    assert StandardAuthorizer(index, AuthorizerSettings()).authorize(
        "User:bob", "h", Op.READ, TOPIC, "betamax4"
    )


@pytest.mark.parametrize(
    "acls,principal,allowed",
    [
        ([], "User:bob", False),
        ([acl(TOPIC, "t", LITERAL, "User:bob", Op.WRITE, ALLOW)], "User:bob", True),
        ([acl(TOPIC, "t", LITERAL, "User:bob", Op.WRITE, ALLOW)], "User:eve", False),
        ([acl(TOPIC, "t", LITERAL, "User:bob", Op.READ, ALLOW)], "User:bob", False),
        ([acl(TOPIC, "t", LITERAL, "User:*", Op.ALL, ALLOW)], "User:bob", True),
        (
            [
                acl(TOPIC, "t", LITERAL, "User:bob", Op.WRITE, ALLOW),
                acl(TOPIC, "t", LITERAL, "User:bob", Op.WRITE, DENY),
            ],
            "User:bob",
            False,
        ),
        (
            [
                acl(TOPIC, "team-a", LITERAL, "User:bob", Op.WRITE, ALLOW),
                acl(TOPIC, "team", PREFIXED, "User:*", Op.WRITE, DENY),
            ],
            "User:bob",
            False,
        ),
        (
            [
                acl(TOPIC, "team", PREFIXED, "User:bob", Op.WRITE, ALLOW),
                acl(TOPIC, "team-a", LITERAL, "User:bob", Op.WRITE, DENY),
            ],
            "User:bob",
            True,  # a literal DENY covers one topic, not the whole prefix
        ),
        (
            [
                acl(TOPIC, "*", LITERAL, "User:bob", Op.WRITE, ALLOW),
                acl(TOPIC, "*", LITERAL, "User:bob", Op.WRITE, DENY),
            ],
            "User:bob",
            False,
        ),
    ],
)
def test_authorize_by_resource_type(
    acls: list[StandardAcl], principal: str, allowed: bool
) -> None:
    authorizer = StandardAuthorizer(acls, AuthorizerSettings())
    assert authorizer.authorize_by_resource_type(principal, "h", Op.WRITE, TOPIC) is allowed


def test_authorize_by_resource_type_for_super_users_and_open_clusters() -> None:
    deny_all = [acl(TOPIC, "*", LITERAL, "User:*", Op.ALL, DENY)]
    settings = AuthorizerSettings.from_properties({"super.users": "User:admin"})
    assert StandardAuthorizer(deny_all, settings).authorize_by_resource_type(
        "User:admin", "h", Op.WRITE, TOPIC
    )
    open_ = AuthorizerSettings.from_properties({"allow.everyone.if.no.acl.found": "true"})
    assert StandardAuthorizer([], open_).authorize_by_resource_type(
        "User:bob", "h", Op.WRITE, TOPIC
    )
