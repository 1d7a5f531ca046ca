"""The short chaos runs of `make test`: fixed seeds and schedules against real node
processes; every run must end with nothing lost, duplicated, reordered or inconsistent, no
committed offset going backwards, never two active controllers in one epoch, and the
healed cluster serving produce and consume within the liveness bound. `make chaos` runs
longer ones (python -m tests.chaos)."""

from __future__ import annotations

import pytest

from tests.chaos.nemesis import KINDS
from tests.chaos.run import format_result, run_once

pytestmark = pytest.mark.chaos

RUNS = [
    # (seed, topology, nemeses, seconds of faults)
    (1, "combined", KINDS, 25.0),
    (2, "split", ("kill-controller", "kill-leader", "pause"), 25.0),
]


@pytest.mark.parametrize(
    ("seed", "topology", "kinds", "seconds"),
    RUNS,
    ids=[f"seed{seed}-{topology}" for seed, topology, _, _ in RUNS],
)
def test_faults_lose_nothing_acknowledged(tmp_path, seed, topology, kinds, seconds):
    result = run_once(str(tmp_path), seed, kinds, seconds, topology, echo=False)
    report = result.report
    text = format_result(result)
    assert report.violations == 0, text
    assert result.schedule, text  # faults really happened
    assert report.acknowledged > 1000, text  # and the workload really ran through them
    assert sum(len(g) for g in report.unavailable.values()) == len(result.schedule), text
