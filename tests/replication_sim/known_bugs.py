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
    KnownBug(
        name="follower-stuck-below-a-mid-batch-log-start",
        reason=(
            "The non-empty sibling of the fixed follower-stuck-at-mid-batch-log-start. "
            "DeleteRecords to an offset inside a batch (storage/log.py:453-456) truncates the "
            "leader epoch cache from the start (storage/leader_epoch_cache.py:74-82): the entry "
            "of the epoch holding that batch now starts at the new log start, not where the "
            "epoch began. A follower whose log ends exactly there with never-committed records "
            "of an older epoch (an earlier leader's, which crashed) fetches at its log end with "
            "that epoch. Partition.read_for_follower (broker/partition.py:337-348) asks "
            "LeaderEpochCache.end_offset_for (leader_epoch_cache.py:53-57), which, with no "
            "entry at or below that epoch, answers that it ends at the first entry's start, the "
            "follower's log end itself: no divergence (with the entry intact it would have said "
            "the epoch ended where the leader's epoch began, below: truncate, then "
            "OFFSET_OUT_OF_RANGE, restart_at), and the offset is in range. "
            "The leader sends the batch holding the fetch offset, which starts below the "
            "follower's log end; broker/partition.py:400-407 (Partition.append_as_follower) "
            "restarts the log at the batch only when it is empty, so Log.append_as_follower "
            "refuses it (INVALID_RECORD), the fetcher rests and fetches the same again, "
            "forever: the follower never rejoins the ISR. Kafka's follower also restarts only "
            "an empty log (Partition.appendRecordsToFollowerOrFutureReplica) and marks the "
            "partition failed on the UnexpectedAppendOffsetException, so it likely gets stuck "
            "as well. scenarios.stale_follower_inside_a_batch is the story."
        ),
        seeds=(11305,),
        matches=r"liveness: ",
        when=lambda result: result.mid_batch_refusals > 0,
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
