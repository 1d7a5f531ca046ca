"""The simulator checks the product's rules, not a copy of them (issue 19): breaking a rule
of broker/isr_proposals.py or broker/follower_fetch.py, which the simulated brokers run as the
real ones do, makes seeds of the CI range fail.

The mutations:
- a proposal the controller never answered is taken as committed. The leader then counts
  its high watermark over an ISR the controller may not have, the rule Kafka's
  Partition.handleAlterPartitionError exists for (no answer: the change stays pending and is
  sent again);
- a follower ignores the diverging epoch in a fetch answer (KIP-320) and takes the answer as
  one without records. It keeps the records the leader does not have, so it never catches
  up (the leader answers the same divergence whenever it reads the partition again) and
  may learn a high watermark over records that differ from the leader's;
- the purgatory (broker/purgatory.py) answers a waiting acks=all produce success though
  leadership moved while it waited (replication_error's NOT_LEADER_OR_FOLLOWER rule dropped),
  or before the high watermark passes it: acknowledged records are then missing from the
  log the new leader keeps.

And rules only many partitions per broker show (with one partition each mutation changes
nothing):
- IsrProposals.take hands the sender only the first pending change, the others leaving the
  queue unsent: their partitions keep an ISR change pending for ever, and the ISR never
  takes the replica back (liveness);
- a follower applies only the first partition of a fetch answer (FetchStream.answered): the
  other partitions of the stream never catch up (liveness).

A rule the simulator cannot notice, with why (tests/broker/test_follower_fetch.py's
test_an_answer_that_crossed_a_leader_change_is_dropped drives it by hand):
- the follower's leader-epoch check on answers (FetchStream._apply: an answer planned in an
  older leader epoch of the partition is dropped as STALE). It only matters when the
  partition is back on the same stream (the same leader broker, in a newer epoch) with its
  log end unchanged: a leader change to another broker moves the partition to another
  stream, and a truncation changes its log end, both STALE without the epoch. The answer
  then carries records above the old high watermark (the follower was in the ISR, so its
  log end bounds that high watermark) and the follower's high watermark stays at most its
  log end: the stale records stay uncommitted, and its next fetch (asking with their epoch)
  is answered with the divergence that truncates them. Many partitions per stream change
  none of this: no seed of 0-599 fails without the check.
"""

from __future__ import annotations

import dataclasses

import pytest

from broker import isr_proposals, purgatory
from broker.follower_fetch import FetchResponse, FetchStream
from broker.isr_proposals import IsrProposals, Outcome
from tests.replication_sim.simulation import run_seed

SEEDS = range(0, 10)  # of the CI seeds


def test_an_unanswered_isr_change_taken_as_committed_is_caught(monkeypatch):
    rule = IsrProposals.answered

    def unanswered_commits(self, partition, change, error, isr=(), partition_epoch=-1):
        if error == "NO_ANSWER" and isr_proposals._pending(partition, change):
            partition.isr_committed(list(change.isr), partition.partition_epoch + 1)
            return Outcome.COMMITTED
        return rule(self, partition, change, error, isr, partition_epoch)

    monkeypatch.setattr(IsrProposals, "answered", unanswered_commits)
    failed = [seed for seed in SEEDS if run_seed(seed).failure is not None]  # 1, 2, 6, 8
    assert failed, "the simulator did not notice a broken ISR answer rule"


def test_a_diverging_epoch_ignored_by_the_follower_is_caught(monkeypatch):
    rule = FetchStream._apply_one

    def diverging_ignored(self, key, partition, answer, end, now_ms):
        return rule(self, key, partition, dataclasses.replace(answer, diverging=None), end, now_ms)

    monkeypatch.setattr(FetchStream, "_apply_one", diverging_ignored)
    # Seed 4 stalls the partition (liveness): the follower keeps its diverged records and
    # never catches up, and its fetch session does not read the partition again until the
    # leader's changes (before fetch sessions, every fetch re-read it and the follower took
    # the high watermark over its diverged records: an invariant). The first one is enough.
    result = next((r for r in map(run_seed, SEEDS) if r.failure is not None), None)
    assert result is not None, "the simulator did not notice a follower ignoring divergence"
    assert result.kind in ("invariant", "liveness"), result.failure


def test_an_acks_all_produce_answered_after_leadership_moved_is_caught(monkeypatch):
    rule = purgatory.replication_error

    def leadership_ignored(partition, append):
        error = rule(partition, append)
        return None if error is not None and error.error_name == "NOT_LEADER_OR_FOLLOWER" else error

    monkeypatch.setattr(purgatory, "replication_error", leadership_ignored)
    # Seeds 60 and 83 of the CI seeds (which pass intact) acknowledge records that the new
    # leader's log does not hold at their offsets.
    failures = [run_seed(seed).failure for seed in (60, 83)]
    assert all(f is not None and "acked by" in f.split("\n", 1)[0] for f in failures), failures


def test_an_acks_all_produce_answered_before_the_high_watermark_passes_it_is_caught(monkeypatch):
    monkeypatch.setattr(purgatory, "replicated", lambda partition, append: True)
    failure = run_seed(0).failure  # as every seed of SEEDS
    assert failure is not None, "the simulator did not notice acks=all answered early"


def test_isr_changes_left_out_of_the_alter_partition_request_are_caught(monkeypatch):
    rule = IsrProposals.take

    def first_only(self):
        live, settled = rule(self)
        return live[:1], settled

    monkeypatch.setattr(IsrProposals, "take", first_only)
    result = run_seed(8)  # of SEEDS; 5 and 9 too
    assert result.kind == "liveness" and "ISR change pending" in (result.failure or ""), (
        result.failure
    )


def test_a_fetch_answer_applied_to_its_first_partition_only_is_caught(monkeypatch):
    rule = FetchStream.answered

    def first_only(self, correlation_id, response, now_ms):
        first = FetchResponse(response.partitions[:1], response.error, response.message)
        return rule(self, correlation_id, first, now_ms)

    monkeypatch.setattr(FetchStream, "answered", first_only)
    result = run_seed(2)  # of SEEDS; 4, 5 and 8 too
    assert result.kind == "liveness", result.failure


@pytest.mark.parametrize("seed", SEEDS)
def test_the_same_seeds_pass_with_the_rule_intact(seed):
    assert run_seed(seed).failure is None
