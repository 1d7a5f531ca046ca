"""ACLs through the metadata log on three real nodes: `strom acls --add/--list/--remove` as a
user runs it (subprocesses, Kafka's output) and AdminClient's create/describe/delete_acls
round-trip through the active controller, every node's image then holds them (each
controller answers DescribeAcls from its own image), the controller refuses bad ACLs with
INVALID_REQUEST, and ACLs survive a metadata snapshot and a node's restart.

Snapshots are made small (metadata.log.max.record.bytes.between.snapshots) so that the
restarted node loads the ACLs from a snapshot file, not only from the log.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import grpc
import pytest

from metadata.records import decode
from raft.snapshot_files import decode_snapshot
from strom.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    AdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from strom_api.v1 import controller_pb2
from strom_api.v1 import metadata_pb2 as mpb
from tests.node_integration.node_cluster import ROOT, NodeCluster, running_cluster
from tests.raft_integration.process_cluster import wait_until
from tests.tools.tool_runs import ok

NODES = [1, 2, 3]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    with running_cluster(
        str(tmp_path_factory.mktemp("acls")),
        3,
        extra={"metadata.log.max.record.bytes.between.snapshots": "300"},
    ) as nodes:
        yield nodes


def boot(cluster: NodeCluster) -> list[str]:
    """The brokers' addresses: they forward the ACL RPCs to the active controller."""
    return ["--bootstrap-server", ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in NODES)]


def node_acls(cluster: NodeCluster, node: int, **filter_fields: object) -> set[tuple]:
    """The ACLs in `node`'s own image, as (type, name, pattern, principal, host, op,
    permission) codes."""
    fields = {"resource_type": 1, "pattern_type": 1, "operation": 1, "permission_type": 1}
    fields.update(filter_fields)
    response = cluster.stub(node).DescribeAcls(
        controller_pb2.DescribeAclsRequest(filter=controller_pb2.AclBindingFilter(**fields)),
        timeout=5,
    )
    assert not response.HasField("error"), response.error
    return {
        (
            b.resource_type,
            b.resource_name,
            b.pattern_type,
            b.principal,
            b.host,
            b.operation,
            b.permission_type,
        )
        for b in response.acls
    }


def answers(ask: Callable[[], set[tuple]]) -> set[tuple] | None:
    """`ask()`, or None while the node does not answer (restarting)."""
    try:
        return ask()
    except grpc.RpcError:
        return None


def on_every_node(cluster: NodeCluster, expected: set[tuple], **filter_fields: object) -> None:
    for node in NODES:
        wait_until(
            lambda node=node: (
                answers(lambda: node_acls(cluster, node, **filter_fields)) == expected
            ),
            15,
            f"node {node}'s image to hold {expected}",
        )


TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
READ, WRITE, CREATE, DESCRIBE, IDEMPOTENT_WRITE = 3, 4, 5, 8, 12
DENY, ALLOW = 2, 3


def test_add_list_and_remove_with_the_tool(cluster: NodeCluster) -> None:
    out = ok(
        "acls",
        *boot(cluster),
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "read",
        "--operation",
        "Write",
        "--topic",
        "orders",
    )
    pattern = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    read = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    write = "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)"
    assert out == [
        f"Adding ACLs for resource `{pattern}`: ",
        f" \t{read}",
        f"\t{write} ",
        "",
        f"Current ACLs for resource `{pattern}`: ",
        f" \t{read}",
        f"\t{write} ",
        "",
    ]
    expected = {
        (TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
        (TOPIC, "orders", LITERAL, "User:alice", "*", WRITE, ALLOW),
    }
    on_every_node(cluster, expected, resource_type=TOPIC, resource_name="orders")

    listed = ok("acls", *boot(cluster), "--list", "--topic", "orders")
    assert listed == out[4:]
    by_principal = ok("acls", *boot(cluster), "--list", "--principal", "User:alice")
    assert by_principal[0] == "ACLs for principal `User:alice`"
    assert f"Current ACLs for resource `{pattern}`: " in by_principal

    # --remove asks first: "n" keeps them, "y" removes the one entry named.
    def remove(answer: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "strom_tools", "acls", *boot(cluster), "--remove",
             "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders"],
            input=answer, capture_output=True, text=True, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=ROOT), timeout=60,
        )  # fmt: skip

    kept = remove("n\n")
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.startswith(
        f"Are you sure you want to remove ACLs: \n \t{write} \n from resource filter "
        "`ResourcePatternFilter(resourceType=TOPIC, name=orders, patternType=LITERAL)`? (y/n)"
    )
    on_every_node(cluster, expected, resource_type=TOPIC, resource_name="orders")
    assert remove("y\n").returncode == 0
    on_every_node(
        cluster,
        {(TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW)},
        resource_type=TOPIC,
        resource_name="orders",
    )

    # Without a principal, --remove --force deletes every ACL of the resource.
    gone = ok("acls", *boot(cluster), "--remove", "--force", "--topic", "orders")
    assert gone == []
    on_every_node(cluster, set(), resource_type=TOPIC, resource_name="orders")


def test_producer_and_consumer_conveniences(cluster: NodeCluster) -> None:
    ok(
        "acls", *boot(cluster), "--add", "--producer", "--idempotent",
        "--allow-principal", "User:prod", "--topic", "pay", "--resource-pattern-type",
        "literal",
    )  # fmt: skip
    ok(
        "acls", *boot(cluster), "--add", "--consumer", "--allow-principal", "User:cons",
        "--topic", "pay", "--group", "billing",
    )  # fmt: skip
    expected = {
        (TOPIC, "pay", LITERAL, "User:prod", "*", WRITE, ALLOW),
        (TOPIC, "pay", LITERAL, "User:prod", "*", DESCRIBE, ALLOW),
        (TOPIC, "pay", LITERAL, "User:prod", "*", CREATE, ALLOW),
        (CLUSTER, "kafka-cluster", LITERAL, "User:prod", "*", IDEMPOTENT_WRITE, ALLOW),
        (TOPIC, "pay", LITERAL, "User:cons", "*", READ, ALLOW),
        (TOPIC, "pay", LITERAL, "User:cons", "*", DESCRIBE, ALLOW),
        (GROUP, "billing", LITERAL, "User:cons", "*", READ, ALLOW),
    }
    on_every_node(cluster, expected)

    # A MATCH filter removes what applies to the topic pay, and only that.
    ok("acls", *boot(cluster), "--remove", "--force", "--topic", "pay",
       "--resource-pattern-type", "match")  # fmt: skip
    on_every_node(
        cluster,
        {
            (CLUSTER, "kafka-cluster", LITERAL, "User:prod", "*", IDEMPOTENT_WRITE, ALLOW),
            (GROUP, "billing", LITERAL, "User:cons", "*", READ, ALLOW),
        },
    )
    ok("acls", *boot(cluster), "--remove", "--force", "--cluster", "--group", "billing")
    on_every_node(cluster, set())


def test_the_controller_refuses_bad_acls_with_invalid_request(cluster: NodeCluster) -> None:
    good = dict(
        resource_type=TOPIC, resource_name="t", pattern_type=LITERAL, principal="User:a",
        host="*", operation=READ, permission_type=ALLOW,
    )  # fmt: skip
    bad = [
        ({"principal": "alice"}, "Invalid principal: expected a string in format"),
        ({"resource_type": CLUSTER, "resource_name": "c"}, "The only valid name for the "
         "CLUSTER resource is kafka-cluster"),
        ({"resource_name": ""}, "Resource name should not be empty"),
        ({"pattern_type": 2}, "Invalid patternType MATCH"),
        ({"operation": 1}, "Invalid operation ANY"),
        ({"operation": 99}, "Invalid operation UNKNOWN"),
    ]  # fmt: skip
    creations = [controller_pb2.AclBinding(**{**good, **change}) for change, _ in bad]
    response = cluster.call("CreateAcls", controller_pb2.CreateAclsRequest(creations=creations))
    for result, (_, message) in zip(response.results, bad, strict=True):
        assert result.error.code == 42, result  # INVALID_REQUEST
        assert message in result.error.message
    too_many = [controller_pb2.AclBinding(**good)] * 1001
    response = cluster.call("CreateAcls", controller_pb2.CreateAclsRequest(creations=too_many))
    assert response.error.error.code == 42 and "at most 1000" in response.error.error.message
    on_every_node(cluster, set())


def test_admin_client_round_trip(cluster: NodeCluster) -> None:
    bootstrap = ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in NODES)
    acls = [
        ACL("User:bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, "logs-", ACLResourcePatternType.PREFIXED)),
        ACL("User:bob", "10.0.0.1", ACLOperation.ALL, ACLPermissionType.DENY,
            ResourcePattern(ResourceType.GROUP, "ops")),
        ACL("bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, "x")),
    ]  # fmt: skip
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        created = admin.create_acls(acls)
        assert created["succeeded"] == acls[:2]
        [(failed_acl, error)] = created["failed"]
        assert failed_acl == acls[2] and error.name == "INVALID_REQUEST"

        everything = ACLFilter(
            None, None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
        )  # fmt: skip
        found, error = admin.describe_acls(everything)
        assert error is None and set(found) == set(acls[:2])
        on_every_node(
            cluster,
            {
                (TOPIC, "logs-", PREFIXED, "User:bob", "*", READ, ALLOW),
                (GROUP, "ops", LITERAL, "User:bob", "10.0.0.1", 2, DENY),
            },
        )

        # MATCH finds the prefixed ACL for a topic it covers.
        matching = ACLFilter(
            "User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.TOPIC, "logs-app", ACLResourcePatternType.MATCH),
        )  # fmt: skip
        assert admin.describe_acls(matching)[0] == [acls[0]]

        [(acl_filter, deleted, error)] = admin.delete_acls([everything])
        assert acl_filter == everything and error is None
        assert {a for a, _ in deleted} == set(acls[:2])
        assert admin.describe_acls(everything)[0] == []
    on_every_node(cluster, set())


def test_acls_survive_a_snapshot_and_a_restart(cluster: NodeCluster) -> None:
    ok("acls", *boot(cluster), "--add", "--deny-principal", "User:mallory", "--deny-host",
       "10.9.9.9", "--operation", "All", "--topic", "secrets", "--resource-pattern-type",
       "prefixed")  # fmt: skip
    expected = {(TOPIC, "secrets", PREFIXED, "User:mallory", "10.9.9.9", 2, DENY)}
    on_every_node(cluster, expected)
    node = 3

    def snapshot_has_it() -> bool:
        # Read the newest snapshot file directly (the node may delete older ones meanwhile).
        # (Not bootstrap.checkpoint, which `storage format` writes beside the log.)
        pattern = os.path.join(cluster.data_dir(node), "__cluster_metadata-0", "*.checkpoint")
        for path in sorted(glob.glob(pattern, recursive=True), key=os.path.basename)[-1:]:
            try:
                with open(path, "rb") as f:
                    records = [decode(r) for r in decode_snapshot(f.read())]
            except FileNotFoundError:
                return False
            return any(
                isinstance(r, mpb.AccessControlEntryRecord) and r.principal == "User:mallory"
                for r in records
            )
        return False

    # More ACLs' records (about 50 bytes each) push node 3 past its snapshot threshold.
    fillers = [arg for i in range(12) for arg in ("--allow-principal", f"User:filler{i}")]
    ok("acls", *boot(cluster), "--add", *fillers, "--topic", "filler")
    wait_until(snapshot_has_it, 30, "a snapshot of node 3 holding the ACL")
    cluster.stop(node)
    cluster.start(node)
    wait_until(
        lambda: answers(lambda: node_acls(cluster, node, resource_name="secrets")) == expected,
        40,
        "the restarted node to hold the ACL",
    )
    ok("acls", *boot(cluster), "--remove", "--force", "--topic", "filler")
    ok("acls", *boot(cluster), "--remove", "--force", "--topic", "secrets",
       "--resource-pattern-type", "prefixed")  # fmt: skip
    on_every_node(cluster, set())
