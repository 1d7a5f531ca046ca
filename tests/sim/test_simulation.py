"""The seeded Raft simulation in CI: CI_SEEDS seeds, in chunks so that a failure names its
seeds, plus the representative seeds of every known core bug (known_bugs.py) as strict xfails.

A failing chunk prints, for each failing seed, the broken invariant and the command that
replays it (`python -m tests.sim --seed N --trace`). More seeds: `make sim SEEDS=100000`.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.sim.known_bugs import KNOWN_BUGS, KnownBug
from tests.sim.simulation import KnownBugFailure, check_seed, replay_command, run_seed

CI_SEEDS = range(0, 1000)
CHUNK = 20
CHUNKS = [
    range(s, min(s + CHUNK, CI_SEEDS.stop)) for s in range(CI_SEEDS.start, CI_SEEDS.stop, CHUNK)
]
# What the chunks run so far took of each snapshot path (Cluster.coverage), and how many ran.
COVERAGE: Counter[str] = Counter()
CHUNKS_RUN: list[range] = []
# Each snapshot path, and how often the CI seeds take it at least (about a third of what
# 1,000 seeds took when this was written, shown after each):
# a change to the plan or the faults that stops exercising one fails here instead of
# silently testing less.
SNAPSHOT_PATHS = {
    "snapshots taken": 1000,  # 5333
    "compactions": 500,  # 3498
    "downloads started": 500,  # 1869
    "snapshots installed": 500,  # 1261
    "snapshots loaded": 500,  # 2120, at a restart or after an install
    "snapshot gone mid-download": 50,  # 316: the leader took a newer one and compacted
    "crash mid-download": 30,  # 125
    "crash right after install": 30,  # 92
}


@pytest.mark.parametrize("seeds", CHUNKS, ids=[f"seeds-{r.start}-{r.stop - 1}" for r in CHUNKS])
def test_seeds(seeds: range) -> None:
    failures: list[str] = []
    known: dict[str, list[int]] = {}
    CHUNKS_RUN.append(seeds)
    for seed in seeds:
        result = run_seed(seed)
        COVERAGE.update(result.coverage)
        if result.known_bug is not None:
            known.setdefault(result.known_bug, []).append(seed)
        elif result.failure is not None:
            failures.append(result.failure)
    if failures:
        heads = [f.split("\n", 1)[0] for f in failures]
        pytest.fail(
            f"{len(failures)} of {len(seeds)} seeds failed:\n"
            + "\n".join(heads)
            + "\n\nthe first in full:\n"
            + failures[0],
            pytrace=False,
        )
    if known:
        pytest.xfail(
            "; ".join(
                f"known core bug '{name}' on seeds {seeds_}" for name, seeds_ in known.items()
            )
        )


def test_the_ci_seeds_take_every_snapshot_path() -> None:
    """Runs after the chunks (pytest keeps the file's order) and sums what they took."""
    if len(CHUNKS_RUN) != len(CHUNKS):
        pytest.skip("needs every chunk of test_seeds to have run in this process first")
    short = {
        path: COVERAGE[path] for path, least in SNAPSHOT_PATHS.items() if COVERAGE[path] < least
    }
    assert not short, f"snapshot paths taken less than expected: {short}; all: {dict(COVERAGE)}"


def _known_bug_params() -> list[object]:
    return [
        pytest.param(
            bug,
            seed,
            id=f"{bug.name}-seed-{seed}",
            marks=pytest.mark.xfail(strict=True, raises=KnownBugFailure, reason=bug.reason),
        )
        for bug in KNOWN_BUGS
        for seed in bug.seeds
    ]


@pytest.mark.parametrize(("bug", "seed"), _known_bug_params())
def test_known_core_bug_still_reproduces(bug: KnownBug, seed: int) -> None:
    """Fails (as expected) while the bug is there. Once it is fixed this passes, and the
    strict xfail reports that: delete the bug's entry in known_bugs.py."""
    result = check_seed(seed)  # raises KnownBugFailure while the bug is there
    assert result.ok, replay_command(seed)
