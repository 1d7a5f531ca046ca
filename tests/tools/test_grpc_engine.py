"""Strom's processes (nodes, `strom` tools) run gRPC on its posix endpoints
(strom_tools/grpc_engine.py): set before grpc is loaded, and never over an operator's own
GRPC_EXPERIMENTS."""

from __future__ import annotations

import os
import subprocess
import sys

from strom_tools.grpc_engine import POSIX_ENDPOINTS, VARIABLE, prefer_posix_endpoints

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What GRPC_EXPERIMENTS holds at the moment `grpc` is first imported, which is when gRPC
# reads it, in a fresh interpreter that loads the `strom` command's module (the nodes' too:
# `python -m strom_tools server`).
PROBE = """
import os, sys
seen = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "grpc" and not seen:
            seen.append(str(os.environ.get("GRPC_EXPERIMENTS")))
sys.meta_path.insert(0, Watch())
import strom_tools.cli
print(seen[0] if seen else "grpc not loaded")
"""


def test_it_sets_the_posix_endpoints_when_nothing_is_set() -> None:
    environ: dict[str, str] = {}
    assert prefer_posix_endpoints(environ)
    assert environ == {VARIABLE: "-event_engine_client,-event_engine_listener"}


def test_an_operators_setting_stands() -> None:
    environ = {VARIABLE: "-event_engine_dns"}
    assert not prefer_posix_endpoints(environ)
    assert environ == {VARIABLE: "-event_engine_dns"}


def _probe(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != VARIABLE}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=dict(base, PYTHONPATH=ROOT, **env),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_the_command_sets_it_before_grpc_is_loaded() -> None:
    assert _probe() == POSIX_ENDPOINTS


def test_the_command_keeps_an_operators_setting() -> None:
    assert _probe(GRPC_EXPERIMENTS="-event_engine_dns") == "-event_engine_dns"
