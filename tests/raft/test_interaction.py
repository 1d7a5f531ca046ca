"""Runs every interaction script in testdata/ (see interaction.py for the commands)."""

from __future__ import annotations

from pathlib import Path

import pytest
from datadriven import run_script
from interaction import Cluster

SCRIPTS = sorted((Path(__file__).parent / "testdata").glob("*.txt"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_script(script: Path, rewrite: bool) -> None:
    __tracebackhide__ = True
    run_script(script, Cluster().run, rewrite)
