"""Users' SCRAM credentials on three real nodes (`strom server` processes, Raft and the
controller API over gRPC on loopback): `strom storage format --add-scram` bootstraps the
admin user, `strom configs --entity-type users` and AdminClient alter, describe and delete
credentials through a broker (forwarded to the active controller), and every node's own
image holds the result (DescribeUserScramCredentials, which a controller answers from its
own image, asked of each node). No password reaches a log file or the metadata log."""

from __future__ import annotations

import os
from collections.abc import Iterator

import grpc
import pytest

from metadata.records import decode
from raft.snapshot_files import decode_snapshot
from strom.admin import (
    AdminClient,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from strom.errors import StromError
from strom_api.v1 import controller_pb2
from strom_api.v1 import metadata_pb2 as mpb
from tests.node_integration.node_cluster import NodeCluster, running_cluster
from tests.raft_integration.process_cluster import wait_until
from tests.tools.tool_runs import run

ADMIN = [
    "--add-scram",
    "SCRAM-SHA-512=[name=admin,password=admin-secret]",
    "--add-scram",
    "SCRAM-SHA-256=[name=admin,iterations=8192,password=admin-secret]",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    # Every controller formatted with the same --add-scram, as an operator would; every
    # node snapshots its image as soon as anything was written.
    with running_cluster(
        str(tmp_path_factory.mktemp("scram")),
        3,
        format_args=ADMIN,
        extra={"metadata.log.max.record.bytes.between.snapshots": "1"},
    ) as c:
        yield c


def _bootstrap(cluster: NodeCluster) -> str:
    return f"127.0.0.1:{cluster.broker_port[2]}"  # a broker: forwarded to the controller


def _on_node(cluster: NodeCluster, node: int) -> dict[str, list[tuple[int, int]]]:
    """The users and (mechanism code, iterations) in that node's own image."""
    response = cluster.stub(node).DescribeUserScramCredentials(
        controller_pb2.DescribeUserScramCredentialsRequest(), timeout=5
    )
    return {
        r.user: [(i.mechanism, i.iterations) for i in r.credential_infos] for r in response.results
    }


def _everywhere(cluster: NodeCluster, expected: dict[str, list[tuple[int, int]]]) -> None:
    wait_until(
        lambda: all(_on_node(cluster, n) == expected for n in cluster.ids),
        15,
        f"every node's image to hold {expected}",
    )


def test_format_add_scram_bootstraps_the_admin_on_every_node(cluster):
    _everywhere(cluster, {"admin": [(1, 8192), (2, 4096)]})


def test_strom_configs_alters_describes_and_deletes(cluster, capsys):
    server = ["--bootstrap-server", _bootstrap(cluster)]
    user = ["--entity-type", "users", "--entity-name", "alice"]
    code, out, err = run(
        capsys,
        "configs",
        *server,
        *user,
        "--alter",
        "--add-config",
        "SCRAM-SHA-512=[iterations=8192,password=alice-secret],SCRAM-SHA-256=[password=a2]",
    )
    assert (code, out, err) == (0, "Completed updating config for user alice.\n", "")
    code, out, _ = run(capsys, "configs", *server, *user, "--describe")
    assert code == 0
    assert out == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192\n"
    )
    _everywhere(cluster, {"admin": [(1, 8192), (2, 4096)], "alice": [(1, 4096), (2, 8192)]})

    code, out, _ = run(capsys, "configs", *server, "--entity-type", "users", "--describe")
    assert out.splitlines() == [
        "SCRAM credential configs for user-principal 'admin' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192",
    ]

    code, out, _ = run(
        capsys, "configs", *server, *user, "--alter", "--delete-config", "SCRAM-SHA-512"
    )
    assert (code, out) == (0, "Completed updating config for user alice.\n")
    _everywhere(cluster, {"admin": [(1, 8192), (2, 4096)], "alice": [(1, 4096)]})

    # Each mistake: Kafka's error name and a sentence, exit 1, nothing changed.
    for args, expected in [
        (
            ["--alter", "--delete-config", "SCRAM-SHA-512"],
            "RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist",
        ),
        (
            ["--alter", "--add-config", "SCRAM-SHA-512=[iterations=100,password=x]"],
            "UNACCEPTABLE_CREDENTIAL: User 'alice': Iterations 100 is out of range",
        ),
        (
            ["--alter", "--add-config", "SCRAM-SHA-1=[password=x]"],
            "Unexpected config names: SCRAM-SHA-1",
        ),
        (
            ["--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192]"],
            "INVALID_CONFIG: Invalid credential property SCRAM-SHA-512",
        ),
        (["--alter", "--delete-config", "retention.ms"], "Unexpected config names: retention.ms"),
    ]:
        code, out, err = run(capsys, "configs", *server, *user, *args)
        assert (code, out) == (1, ""), args
        assert expected in err, err
    code, out, err = run(
        capsys, "configs", *server, "--entity-type", "users", "--entity-name", "bob", "--describe"
    )
    assert code == 1
    assert (
        "RESOURCE_NOT_FOUND: Attempt to describe a user credential that does not exist: bob" in err
    )
    code, _, err = run(capsys, "configs", *server, "--entity-type", "users", "--alter")
    assert code == 2 and "An entity name must be specified with --alter of users" in err
    _everywhere(cluster, {"admin": [(1, 8192), (2, 4096)], "alice": [(1, 4096)]})


def test_admin_client_alters_describes_and_deletes(cluster):
    with AdminClient(bootstrap_servers=_bootstrap(cluster)) as admin:
        admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "carol", ScramCredentialInfo("SCRAM-SHA-512", 10000), "carol-secret"
                ),
                UserScramCredentialUpsertion("dave", ScramCredentialInfo("SCRAM-SHA-256"), "d"),
            ]
        )
        described = admin.describe_user_scram_credentials(["carol", "dave"])
        assert described["carol"].credential_infos == (ScramCredentialInfo("SCRAM-SHA-512", 10000),)
        assert described["dave"].credential_infos == (ScramCredentialInfo("SCRAM-SHA-256", 4096),)
        assert {"admin", "carol", "dave"} <= set(admin.describe_user_scram_credentials())
        for n in cluster.ids:
            wait_until(lambda n=n: _on_node(cluster, n).get("carol") == [(2, 10000)], 15, "carol")

        # One request, a good alteration and a bad one: the good one goes ahead, the bad
        # one's error is raised.
        with pytest.raises(StromError) as refused:
            admin.alter_user_scram_credentials(
                [
                    UserScramCredentialDeletion("dave", "SCRAM-SHA-256"),
                    UserScramCredentialDeletion("nobody", "SCRAM-SHA-512"),
                ]
            )
        assert refused.value.name == "RESOURCE_NOT_FOUND"
        with pytest.raises(StromError) as refused:
            admin.alter_user_scram_credentials(
                [
                    UserScramCredentialDeletion("carol", "SCRAM-SHA-512"),
                    UserScramCredentialUpsertion(
                        "carol", ScramCredentialInfo("SCRAM-SHA-512"), "again"
                    ),
                ]
            )
        assert refused.value.name == "DUPLICATE_RESOURCE"
        with pytest.raises(StromError) as refused:
            admin.alter_user_scram_credentials([UserScramCredentialDeletion("x", "MD5")])
        assert refused.value.name == "UNSUPPORTED_SASL_MECHANISM"
        with pytest.raises(StromError) as refused:
            admin.describe_user_scram_credentials(["dave"])
        assert refused.value.name == "RESOURCE_NOT_FOUND"
    for n in cluster.ids:
        wait_until(lambda n=n: "dave" not in _on_node(cluster, n), 15, "dave gone everywhere")


def test_no_password_is_written_anywhere(cluster):
    """Credentials were set with passwords in every test above; no file of any node (the
    metadata log and its snapshots, the bootstrap checkpoint, the server logs) holds one."""
    for path, content in _every_file(cluster.base):
        for password in (b"admin-secret", b"alice-secret", b"carol-secret"):
            assert password not in content, path


def _every_file(base: str) -> list[tuple[str, bytes]]:
    """Every file under `base` with its bytes, read while the nodes run: a snapshot's `.part`
    file can be renamed between the walk listing it and the read, so a walk that lost a file
    is made again (the renamed file may lie in a folder the walk had passed)."""
    for _ in range(20):
        read, vanished = [], False
        for root, _, files in os.walk(base):
            for name in files:
                path = os.path.join(root, name)
                try:
                    with open(path, "rb") as f:
                        read.append((path, f.read()))
                except FileNotFoundError:
                    vanished = True
        if not vanished:
            return read
    raise AssertionError(f"files under {base} kept vanishing during 20 walks")


def test_credentials_survive_a_restart_from_a_snapshot(cluster):
    """Node 3 writes its image, credentials included, into a snapshot; restarted, it reads
    its snapshot (and the log's tail) and holds every credential as before."""
    with AdminClient(bootstrap_servers=_bootstrap(cluster)) as admin:
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("erin", ScramCredentialInfo("SCRAM-SHA-512"), "e")]
        )
    wait_until(lambda: "erin" in _snapshot_users(cluster, 3), 15, "erin in node 3's snapshot")
    expected = _on_node(cluster, 3)
    assert {"admin", "erin"} <= set(expected)
    assert cluster.stop(3) == 0
    cluster.start(3)
    wait_until(lambda: _describes(cluster, 3) == expected, 30, "node 3 back with every user")


def _snapshot_users(cluster: NodeCluster, node: int) -> set[str]:
    """The users of the node's latest metadata snapshot file."""
    metadata = os.path.join(cluster.data_dir(node), "__cluster_metadata-0")
    names = [n for n in os.listdir(metadata) if n.endswith(".checkpoint")]
    if not names:
        return set()
    with open(os.path.join(metadata, max(names)), "rb") as f:
        records = [decode(r) for r in decode_snapshot(f.read())]
    return {r.name for r in records if isinstance(r, mpb.UserScramCredentialRecord)}


def _describes(cluster: NodeCluster, node: int) -> dict[str, list[tuple[int, int]]] | None:
    try:
        return _on_node(cluster, node)
    except grpc.RpcError:  # not listening yet
        return None


def test_bad_add_scram_fails_the_format_with_kafkas_sentence(tmp_path, capsys):
    config = tmp_path / "server.properties"
    config.write_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:1\n"
        f"controller.listener.names=CONTROLLER\nlog.dirs={tmp_path / 'data'}\n"
    )
    cluster_id = "MkU3OEVBNTcwNTJENDM2Qg"
    format_ = ["storage", "format", "--config", str(config), "--cluster-id", cluster_id]
    code, out, err = run(capsys, *format_, "--add-scram", "SCRAM-SHA-512=[password=x]")
    assert (code, out) == (1, "")
    assert err == "ERROR INVALID_CONFIG: You must supply 'name' to add-scram\n"
    assert not (tmp_path / "data").exists()  # nothing formatted
    code, out, err = run(capsys, *format_, "-S", "SCRAM-SHA-512=[name=a,password=x]")
    assert code == 0, err
    assert (tmp_path / "data" / "bootstrap.checkpoint").exists()
