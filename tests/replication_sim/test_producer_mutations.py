"""The simulator checks the client's sending rules, not a copy of them (issue 19): its
idempotent producers drive strom/producer_sequencing.py, the class strom/sender.py pumps, so
breaking a rule there makes seeds of the CI range fail.

The mutation: a retry takes the partition's next sequence under the same epoch instead of
keeping its numbers. A batch whose first attempt was written (its answer lost, or
REQUEST_TIMED_OUT after the append) is then written again under new numbers, a duplicate
(invariant (6)); one that was not written leaves a gap the leader refuses with
OUT_OF_ORDER_SEQUENCE_NUMBER though the producer's every earlier batch was acknowledged
(invariant (8)).

Rules the simulator cannot notice, because its producers hold one batch at a time: the
in-flight limit, numbers given back or the epoch bumped for a batch refused behind later
ones, OUT_OF_ORDER_SEQUENCE_NUMBER behind an earlier batch, a batch known written by a later
acknowledgement, and no new-epoch batch while old-epoch ones are in flight (all need two
batches of a partition in flight); tests/client/test_producer_sequencing.py covers them."""

from __future__ import annotations

import pytest

from strom.producer_sequencing import ProducerSequencing
from tests.replication_sim.simulation import run_seed

SEEDS = (0, 1, 13)  # of the CI seeds; each fails under the mutation (PRODUCER STATE)


def test_a_retry_renumbered_under_the_same_epoch_is_caught(monkeypatch):
    rule = ProducerSequencing.sending

    def renumbered_retries(self, batch):
        if self.config.idempotent and 0 <= batch.epoch == self.producer_epoch:
            batch.epoch = -1  # forget its numbers: it takes the partition's next sequence
        return rule(self, batch)

    monkeypatch.setattr(ProducerSequencing, "sending", renumbered_retries)
    failures = {seed: run_seed(seed).failure for seed in SEEDS}
    missed = [seed for seed, failure in failures.items() if failure is None]
    assert not missed, f"seeds {missed} did not notice a retry renumbered under the same epoch"
    for failure in failures.values():
        assert failure is not None and ("PRODUCER STATE" in failure or "DUPLICATE" in failure)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_same_seeds_pass_with_the_rule_intact(seed):
    assert run_seed(seed).failure is None
