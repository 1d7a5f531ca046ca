"""Bugs the replication simulator has found in the code under test and that are not fixed yet.

Each entry says how to recognise a run that failed because of it (`matches`, a pattern the
failure's first line matches) and names seeds that show it. test_replication_sim.py runs those
seeds as xfail(strict=True): once the bug is fixed they pass and the strict mark says "remove
the entry"; a seed of the CI range that fails with a known bug's signature is reported as an
xfail, any other failure fails the test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class KnownBug:
    name: str
    reason: str
    seeds: tuple[int, ...]
    matches: str  # a regular expression searched in the failure's first line
    # and, when given, what must hold of the run (simulation.RunResult)
    when: Callable[[Any], bool] | None = None


# Fixed, their seeds now pass (kept as regression seeds in test_replication_sim.py):
# isr-refused-after-lost-answer (225, 44), isr-refused-by-an-older-answer (800, 467),
# restart-acts-on-stale-metadata (3215), follower-stuck-at-mid-batch-log-start (612),
# stale-isr-change-sent (4388), reregistration-livelock (1513), and
# deleted-records-resurrected for a leader crash after DeleteRecords answered (4341, 9803;
# commit f9e46a3 writes the offset checkpoints before answering).
KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug(
        name="deleted-records-resurrected",
        reason=(
            "What commit f9e46a3 leaves: broker/client_service.py:334 "
            "(ClientServicer.DeleteRecords) calls Partition.delete_records_before -> "
            "storage/log.py:453-456 Log.delete_records_before, which persists the leader epoch "
            "cache truncated to the new log start at once (storage/leader_epoch_cache.py:74-82, "
            "_persist), and only then, on a later turn of the event loop, awaits "
            "persist_offsets (client_service.py:345 -> broker/node.py:247 _checkpoint_now: "
            "the disk lock, then LogManager.checkpoint in a thread, log_manager.py:137) for the "
            "log start. A leader that crashes in between (DeleteRecords not answered yet; the "
            "window is as long as the disk lock is held) reopens (storage/log.py:130-134) with "
            "the old log start: the deleted offsets are back and no epoch entry covers them "
            "(the recovery scan's epoch starts, log.py:128-129, cannot lower an existing "
            "epoch's start). A follower that still holds never-committed records of an older "
            "epoch there fetches at its log end with that epoch; Partition.read_for_follower "
            "(broker/partition.py:338) asks LeaderEpochCache.end_offset_for "
            "(leader_epoch_cache.py:53-57), which, with no entry at or below that epoch, "
            "answers that it ends where the first entry starts: no divergence, and the "
            "follower keeps its records under the leader's high watermark: two replicas "
            "differ below it (invariant (3); or, when only the batches' leader epochs differ, "
            "the final comparison). Seeds no longer hit the window (it is one turn of the "
            "loop in the simulation); scenarios.crash_before_delete_records_is_durable does. "
            "Closing it: the log start durable before the epoch cache is truncated, or Log.open "
            "raising a checkpointed log start that lies below the epoch cache's first entry "
            "to that entry's start offset. Kafka persists the log start the same periodic way "
            "(log-start-offset-checkpoint) and answers endOffsetFor the same, so it likely has "
            "the wider window Strom had before f9e46a3."
        ),
        seeds=(),
        matches=r"(DIVERGED below the high watermark|after convergence .*) "
        r"\[deleted-records-resurrected",
    ),
)


def known_bug(name: str) -> KnownBug:
    return next(bug for bug in KNOWN_BUGS if bug.name == name)


def classify(result: Any, failure: str) -> KnownBug | None:
    head = failure.split("\n", 1)[0]
    for bug in KNOWN_BUGS:
        if re.search(bug.matches, head) and (bug.when is None or bug.when(result)):
            return bug
    return None
