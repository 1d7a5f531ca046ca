"""The import-direction contract of docs/architecture.md §2, checked by import-linter
(pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PACKAGES = [
    "strom_api",
    "storage",
    "raft",
    "metadata",
    "coordinator",
    "broker",
    "server",
    "strom",
    "pyspark_strom",
    "strom_tools",
]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    # --no-cache: the check must see the tree as it is, and leave no cache behind.
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_contracts_are_kept() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_contracts_can_break(tmp_path: Path) -> None:
    # A copy of the tree with three violations: storage importing a higher layer, the
    # storage core importing asyncio (a standard-library module, so an "external" one), and
    # health reaching into the node again (as it did, for typing only, before
    # server/node_status.py).
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (tmp_path / "storage" / "_bad.py").write_text("import broker\n")
    (tmp_path / "storage" / "_bad_async.py").write_text("import asyncio\n")
    health = tmp_path / "server" / "health.py"
    health.write_text(
        health.read_text() + "\nif TYPE_CHECKING:\n    from server.node import Node\n"
    )

    result = lint_imports(tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    # The copy, not the installed tree, was analysed, and each contract caught its module.
    assert "storage._bad -> broker" in output, output
    assert "storage._bad_async -> asyncio" in output, output
    assert "server.health -> server.node" in output, output
    assert "3 broken" in output, output
