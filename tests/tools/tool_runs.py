"""Running `strom` as a user does, `python -m strom_tools ...` in a subprocess, for the tools'
cluster tests: the result, its output lines on success, its one error line on failure; and
in-process (`run`) for the tests against a fake controller."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from strom_tools import cli
from tests.node_integration.node_cluster import ROOT


def strom(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "strom_tools", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=60,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def ok(*args: str) -> list[str]:
    result = strom(*args)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout.splitlines()


def fails(*args: str) -> str:
    """The one error line of a tool that failed with exit code 1."""
    result = strom(*args)
    assert result.returncode == 1, result
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    return result.stderr.strip()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err
