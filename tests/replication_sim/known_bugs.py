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
# commit f9e46a3 writes the offset checkpoints before answering), and then its window before
# the answer (Log.open raises the log start to the persisted epoch cache's first entry), and
# follower-stuck-below-a-mid-batch-log-start (11305; Partition._restart_inside_batch).
#
# Seen once, and no seed of 0-799 shows it since the controller quorum's Raft links got a
# random stream of their own: appended-batch-renumbered-after-leader-moved. An idempotent
# producer's batch waits for acks=all on a leader that appended it (its records reached a
# follower); a later batch's UNKNOWN_PRODUCER_ID makes an epoch bump due; the deposed leader's
# purgatory answers the first batch NOT_LEADER_OR_FOLLOWER (leadership moved while it
# waited), which strom/producer_sequencing.py takes as refused before writing: the batch is
# renumbered under the new epoch and the new leader, which holds the first write, writes it
# again (a DUPLICATE in the final log).
KNOWN_BUGS: tuple[KnownBug, ...] = ()


def known_bug(name: str) -> KnownBug:
    return next(bug for bug in KNOWN_BUGS if bug.name == name)


def classify(result: Any, failure: str) -> KnownBug | None:
    head = failure.split("\n", 1)[0]
    for bug in KNOWN_BUGS:
        if re.search(bug.matches, head) and (bug.when is None or bug.when(result)):
            return bug
    return None
