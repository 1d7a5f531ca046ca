"""deploy/docker/Dockerfile without a Docker engine: hadolint checks it, and its install
steps run here: the build stage's COPY lines assemble a build context, the wheel is built
from it as the Dockerfile builds it, and installed into a fresh venv (as the runtime stage
does), whose `strom` and strom-entrypoint then work with nothing of the repository on the
path. A package missing from the COPY lines fails here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv

import pytest

from tests.deploy.deploy_files import DEPLOY, ROOT, tool

DOCKERFILE = DEPLOY / "docker" / "Dockerfile"


def test_hadolint_finds_nothing():
    result = subprocess.run(
        [tool("hadolint"), str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def build_stage_copies() -> list[tuple[str, str]]:
    """(sources, destination) of each COPY in the first (build) stage."""
    copies = []
    stage = 0
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("FROM "):
            stage += 1
        elif line.startswith("COPY ") and stage == 1:
            *sources, destination = line.split()[1:]
            copies += [(s, destination) for s in sources]
    return copies


def clean_env() -> dict[str, str]:
    # Nothing of the repository or the dev venv: only what the wheel brought.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.pop("PYTHONHOME", None)
    return env


@pytest.mark.image
def test_the_wheel_installs_into_a_clean_venv_and_runs(tmp_path):
    context = tmp_path / "src"
    context.mkdir()
    copies = build_stage_copies()
    assert ("broker/", "broker/") in copies
    for source, destination in copies:
        target = context / destination
        if source.endswith("/"):
            shutil.copytree(
                ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / source, target / source)
    run_line = next(line for line in DOCKERFILE.read_text().splitlines() if "pip wheel" in line)
    assert re.search(r"pip wheel --no-cache-dir --no-deps --wheel-dir /wheels \.$", run_line)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(wheels), "."],
        cwd=context,
        check=True,
        timeout=300,
    )
    [wheel] = list(wheels.glob("strom-*.whl"))
    prefix = tmp_path / "opt-strom"
    # The runtime stage's install, by this pip into the new venv (`--python`: no ensurepip,
    # and the pip cache, unlike the image, to stay fast).
    venv.create(prefix, with_pip=False)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(prefix / "bin" / "python"),
            "install",
            "-q",
            str(wheel),
        ],
        check=True,
        timeout=300,
        env=clean_env(),
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    result = subprocess.run(
        [str(prefix / "bin" / "strom"), "--help"],
        capture_output=True,
        text=True,
        cwd=outside,
        env=clean_env(),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "server" in result.stdout
    # The entrypoint with only the wheel installed: it imports broker and storage from it
    # and formats a data directory with `strom storage format` from the venv.
    config = outside / "server.properties"
    config.write_text(f"log.dirs={outside / 'data'}\ncontroller.listener.names=CONTROLLER\n")
    env = clean_env() | {
        "POD_NAME": "strom-broker-1",
        "POD_NAMESPACE": "kafka",
        "NODE_SERVICE": "strom-broker",
        "NODE_ID_OFFSET": "100",
        "STROM_PROCESS_ROLES": "broker",
        "BROKER_PORT": "9092",
        "CONTROLLER_STATEFULSET": "strom-controller",
        "CONTROLLER_SERVICE": "strom-controller",
        "CONTROLLER_REPLICAS": "3",
        "CONTROLLER_PORT": "9093",
        "CONTROLLER_NODE_ID_OFFSET": "0",
        "CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qg",
    }
    result = subprocess.run(
        [
            str(prefix / "bin" / "python"),
            str(DEPLOY / "docker" / "entrypoint.py"),
            "--config",
            str(config),
            "--print-env",
        ],
        capture_output=True,
        text=True,
        cwd=outside,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "STROM_NODE_ID=101" in result.stdout.splitlines()
    assert (outside / "data" / "meta.properties").exists()
    # strom-probe (the secured overlay's exec probe) with only the wheel: it runs, and
    # says in one line that nothing answers on a port where no node listens.
    result = subprocess.run(
        [str(prefix / "bin" / "python"), str(DEPLOY / "docker" / "probe.py"), "--port", "9"],
        capture_output=True,
        text=True,
        cwd=outside,
        env=clean_env(),
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("strom-probe: 127.0.0.1:9 health '': UNAVAILABLE")
