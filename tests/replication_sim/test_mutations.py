"""The simulator checks the product's rules, not a copy of them (issue 19): breaking a rule
of broker/isr_proposals.py, which the simulated brokers run as the real ones do, makes seeds
of the CI range fail.

The mutation: a proposal the controller never answered is taken as committed. The leader
then counts its high watermark over an ISR the controller may not have, the rule Kafka's
Partition.handleAlterPartitionError exists for (no answer: the change stays pending and is
sent again)."""

from __future__ import annotations

import pytest

from broker import isr_proposals
from broker.isr_proposals import IsrProposals, Outcome
from tests.replication_sim.simulation import run_seed

SEEDS = range(0, 10)  # of the CI seeds; 4, 6 and 8 fail under the mutation


def test_an_unanswered_isr_change_taken_as_committed_is_caught(monkeypatch):
    rule = IsrProposals.answered

    def unanswered_commits(self, partition, change, error, isr=(), partition_epoch=-1):
        if error == "NO_ANSWER" and isr_proposals._pending(partition, change):
            partition.isr_committed(list(change.isr), partition.partition_epoch + 1)
            return Outcome.COMMITTED
        return rule(self, partition, change, error, isr, partition_epoch)

    monkeypatch.setattr(IsrProposals, "answered", unanswered_commits)
    failed = [seed for seed in SEEDS if run_seed(seed).failure is not None]
    assert failed, "the simulator did not notice a broken ISR answer rule"


@pytest.mark.parametrize("seed", SEEDS)
def test_the_same_seeds_pass_with_the_rule_intact(seed):
    assert run_seed(seed).failure is None
