"""The replication simulation (many partitions per broker) in CI: CI_SEEDS seeds in chunks
(a failure names its seeds and prints the first failure in full, with the command that
replays it), the seeds of every known bug (known_bugs.py) as strict xfails (skipped, empty,
when no seed shows one), the seeds of bugs since fixed, which must pass, and the scripted
stories of scenarios.py.

More seeds:
    REPLICATION_SIM_SEEDS=500 .venv/bin/pytest -q tests/replication_sim
    .venv/bin/python -m tests.replication_sim --seeds 2000 [--start S]
"""

from __future__ import annotations

import os

import pytest

from tests.replication_sim import scenarios
from tests.replication_sim.known_bugs import KNOWN_BUGS, KnownBug
from tests.replication_sim.simulation import RunResult, replay_command, run_seed, summarize

CI_SEEDS = range(0, int(os.environ.get("REPLICATION_SIM_SEEDS", "100")))
CHUNK = 10
CHUNKS = [
    range(s, min(s + CHUNK, CI_SEEDS.stop)) for s in range(CI_SEEDS.start, CI_SEEDS.stop, CHUNK)
]
RESULTS: list[RunResult] = []


@pytest.mark.parametrize("seeds", CHUNKS, ids=[f"seeds-{r.start}-{r.stop - 1}" for r in CHUNKS])
def test_seeds(seeds: range) -> None:
    results = [run_seed(seed) for seed in seeds]
    RESULTS.extend(results)
    failures = [r.failure for r in results if r.failure is not None and r.known_bug is None]
    if failures:
        heads = "\n".join(f.split("\n", 2)[0] + "\n" + f.split("\n", 2)[1] for f in failures)
        pytest.fail(
            f"{len(failures)} of {len(seeds)} seeds failed:\n{heads}\n\nthe first in full:\n"
            + failures[0],
            pytrace=False,
        )
    known = [(r.seed, r.known_bug) for r in results if r.known_bug is not None]
    if known:
        pytest.xfail("; ".join(f"seed {seed}: known bug '{name}'" for seed, name in known))


def test_the_ci_seeds_exercise_the_replication_paths() -> None:
    """Runs after the chunks (pytest keeps the file's order): the runs must do what they claim
    to, so that a change to the plan or the model that stops exercising a path fails here."""
    if len(RESULTS) != len(CI_SEEDS):
        pytest.skip("needs every chunk of test_seeds to have run in this process first")
    summary = summarize(RESULTS)

    def total(attr: str) -> int:
        return sum(getattr(r, attr) for r in RESULTS)

    # Well under what the CI seeds average with many partitions per broker (per seed, over
    # all its partitions: 196 records acknowledged, 9.1 leader changes, 0.9 truncations, 5.2
    # stops, 2.6 fences, 9.7 ISR changes, 0.05 restarts at the leader's log start; with one
    # partition seeds 0-11999 averaged 155, 3.0, 0.5, 4.2, 3.9, 3.7 and 0.04).
    n = len(RESULTS)
    assert total("acked_records") > 50 * n, summary
    assert total("read_records") > 50 * n, summary
    assert total("leader_changes") > n, summary
    assert total("truncations") > n // 5, summary
    assert total("crashes") > n, summary
    assert total("fences") > n, summary
    assert total("isr_changes") > 2 * n, summary
    # Many partitions per broker: streams carry several (in fetch sessions, most fetches
    # incremental), AlterPartition requests too.
    assert total("multi_partition_fetches") > 30 * n, summary
    assert total("incremental_fetches") > 30 * n, summary
    # Partitions followed while their stream's fetch is out (seeds 0-39: 5.8 hurries a seed).
    assert total("hurries") > n, summary
    assert total("batched_alter_requests") > n // 2, summary
    # The controller quorum (seeds 0-149: 1.9 controller crashes, 1.3 failovers and 0.17
    # writes abandoned by a leadership change per seed).
    assert total("controller_crashes") > n, summary
    assert total("failovers") > n // 2, summary
    if n >= 100:
        assert total("restarts_at") > 0, summary
        assert total("abandoned_writes") > 0, summary


def _known_bug_params() -> list[object]:
    return [
        pytest.param(
            bug,
            seed,
            id=f"{bug.name}-seed-{seed}",
            marks=pytest.mark.xfail(strict=True, reason=bug.reason),
        )
        for bug in KNOWN_BUGS
        for seed in bug.seeds
    ]


@pytest.mark.parametrize(("bug", "seed"), _known_bug_params())
def test_known_bug_still_reproduces(bug: KnownBug, seed: int) -> None:
    """Fails (as expected) while the bug is there. Once it is fixed this passes, and the
    strict xfail reports that: delete the bug's entry in known_bugs.py."""
    result = run_seed(seed)
    assert result.failure is None, f"{replay_command(seed)}\n{result.failure}"


# Seeds that showed bugs since fixed (their known_bugs.py entries are gone): they must pass.
FIXED_BUG_SEEDS = {
    "isr-refused-after-lost-answer": (225, 44),
    "isr-refused-by-an-older-answer": (800, 467),
    "restart-acts-on-stale-metadata": (3215,),
    "follower-stuck-at-mid-batch-log-start": (612,),
    "stale-isr-change-sent": (4388,),
    "reregistration-livelock": (1513,),
    "deleted-records-resurrected-after-the-answer": (4341, 9803),
    "follower-stuck-below-a-mid-batch-log-start": (11305,),
    # strom/producer_sequencing.py renumbered it after a deposed leader's refusal (seed 100
    # showed it while the simulated producers sent one batch at a time).
    "unknown-fate-batch-written-twice": (236,),
}


@pytest.mark.parametrize(
    "seed",
    [
        pytest.param(seed, id=f"{name}-seed-{seed}")
        for name, seeds in FIXED_BUG_SEEDS.items()
        for seed in seeds
    ],
)
def test_a_fixed_bug_stays_fixed(seed: int) -> None:
    result = run_seed(seed)
    assert result.failure is None, f"{replay_command(seed)}\n{result.failure}"


# --- scripted stories (scenarios.py) ---------------------------------------------------------


def test_an_expansion_whose_answer_is_lost_loses_no_acknowledged_record() -> None:
    """isr-refused-after-lost-answer, fixed: the expansion stays pending."""
    scenarios.lost_expansion_answer()


def test_a_follower_restarted_inside_a_batch_catches_up() -> None:
    """follower-stuck-at-mid-batch-log-start, fixed."""
    scenarios.restart_inside_a_batch()


def test_records_deleted_before_a_leader_crash_stay_deleted() -> None:
    """deleted-records-resurrected, fixed for a crash after DeleteRecords answered."""
    scenarios.deleted_records_stay_deleted()


def test_a_leader_crash_inside_delete_records_keeps_the_replicas_consistent() -> None:
    """deleted-records-resurrected, fixed for a crash before DeleteRecords answered: Log.open
    takes the log start from the persisted epoch cache when the checkpoint lags it."""
    scenarios.crash_before_delete_records_is_durable()


def test_a_stale_follower_ending_inside_the_leaders_first_batch_catches_up() -> None:
    """follower-stuck-below-a-mid-batch-log-start, fixed: the follower truncates to the
    batch's base (Partition._restart_inside_batch)."""
    scenarios.stale_follower_inside_a_batch()
