"""The `strom` console script, run as a user would run it."""

from __future__ import annotations

import argparse
import base64
import subprocess
import sys
import uuid
from importlib.metadata import version
from pathlib import Path

import pytest

from strom_tools.cli import build_parser

STROM = Path(sys.executable).parent / "strom"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(STROM), *args], capture_output=True, text=True, timeout=60)


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == version("strom")


def test_storage_random_uuid_is_a_kafka_uuid() -> None:
    ids = {run("storage", "random-uuid").stdout.strip() for _ in range(3)}
    assert len(ids) == 3
    for cluster_id in ids:
        # Kafka's Uuid.toString(): base64url of 16 bytes without padding.
        assert len(cluster_id) == 22
        assert not cluster_id.startswith("-")
        raw = base64.urlsafe_b64decode(cluster_id + "==")
        assert len(raw) == 16
        assert raw[6] >> 4 == 4  # version 4
        assert raw[8] >> 6 == 0b10  # variant 2 (Leach-Salz)
        assert int.from_bytes(raw, "big") not in (0, 1)  # Kafka's reserved ids


def test_random_uuid_skips_ids_kafka_rejects(monkeypatch: pytest.MonkeyPatch) -> None:
    from strom_tools import cli

    dash = uuid.UUID(bytes=base64.urlsafe_b64decode("-" + "A" * 21 + "=="))
    good = uuid.UUID("6f1c2a9e-0b7d-4c4e-9a51-3f0d8e2b7c11")
    candidates = iter([uuid.UUID(int=0), uuid.UUID(int=1), dash, good])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(candidates))
    assert cli.random_uuid() == cli.kafka_uuid_string(good)


def test_no_arguments_prints_help_and_fails() -> None:
    result = run()
    assert result.returncode == 2
    assert "usage: strom" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("delegation-tokens",),
    ],
)
def test_commands_not_built_yet_do_not_exist(args: tuple[str, ...]) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("server",),
        ("storage", "format"),
        ("consumer-groups",),
        ("console-producer",),
        ("replica-verification",),
        ("log-dirs", "--bootstrap-server", "127.0.0.1:1"),  # --describe
        ("delete-records", "--bootstrap-server", "127.0.0.1:1"),  # --offset-json-file
    ],
)
def test_commands_without_their_required_arguments_say_which(args: tuple[str, ...]) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert "the following arguments are required" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("topics", "--list"),
        ("metadata-quorum", "describe", "--status"),
        ("cluster", "cluster-id"),
        ("configs", "--describe", "--entity-type", "topics"),
        ("leader-election", "--election-type", "preferred", "--all-topic-partitions"),
        ("reassign-partitions", "--list"),
    ],
)
def test_admin_commands_exist_and_need_a_controller_to_talk_to(args: tuple[str, ...]) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert "one of the arguments --bootstrap-controller --bootstrap-server is required" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_module_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "strom_tools", "storage", "random-uuid"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip()) == 22


def _commands(parser, path):
    """Every (command path, parser) under `parser`, nested subcommands included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            described = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                assert described.get(name), f"'{' '.join([*path, name])}' has no help line"
                yield from _commands(sub, [*path, name])


def test_every_option_of_every_command_has_a_help_text():
    undescribed = [
        f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
        for path, parser in _commands(build_parser(), ["strom"])
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction)
        and not (action.help and action.help.strip() and action.help != argparse.SUPPRESS)
    ]
    assert undescribed == []
