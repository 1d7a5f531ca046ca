"""`strom storage info -c server.properties`, as kafka-storage.sh info: the node's
directories listed, the meta.properties they share, and each problem (not formatted, does
not exist, another cluster's), exit 1 with problems."""

from __future__ import annotations

from storage import meta_properties
from tests.tools.tool_runs import run

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _config(tmp_path, log_dirs):
    config = tmp_path / "server.properties"
    config.write_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:1\n"
        f"controller.listener.names=CONTROLLER\nlog.dirs={','.join(map(str, log_dirs))}\n"
    )
    return str(config)


def test_formatted_directories_show_their_metadata(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    config = _config(tmp_path, [a, b])
    code, _, err = run(capsys, "storage", "format", "-c", config, "-t", CLUSTER)
    assert code == 0, err
    code, out, err = run(capsys, "storage", "info", "-c", config)
    meta = meta_properties.read(str(a))
    assert meta is not None
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "Found log directories:",
        f"  {a}",
        f"  {b}",
        "",
        f"Found metadata: {{cluster.id={CLUSTER}, directory.id={meta.directory_id}, "
        "node.id=1, version=1}",
        "",
    ]


def test_problems_are_listed_and_the_exit_is_1(tmp_path, capsys):
    formatted, other, missing = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for directory, cluster in ((formatted, CLUSTER), (other, "AAAAAAAAAAAAAAAAAAAAAA")):
        meta_properties.write(str(directory), meta_properties.MetaProperties(cluster, 1, "d" * 22))
    empty = tmp_path / "d"
    empty.mkdir()
    code, out, _ = run(
        capsys, "storage", "info", "-c", _config(tmp_path, [formatted, other, missing, empty])
    )
    assert code == 1
    lines = out.splitlines()
    assert lines[:4] == ["Found log directories:", f"  {formatted}", f"  {other}", f"  {empty}"]
    assert lines[-4:] == [
        "  Mismatched cluster IDs between storage directories.",
        f"  {missing} does not exist",
        f"  {empty} is not formatted.",
        "",
    ]
    assert "Found problems:" in lines


def test_override_names_the_directories_looked_at(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    config = _config(tmp_path, [tmp_path / "a"])
    code, out, _ = run(
        capsys, "storage", "info", "-c", config, "--override", f"log.dirs={elsewhere}"
    )
    assert code == 1
    assert f"  {elsewhere} does not exist" in out.splitlines()
    assert str(tmp_path / "a") not in out
