"""IsrProposals, the rules of ISR changes and their answers (broker/isr_proposals.py), as a
table: what each kind of answer does to a pending change, and to one no longer pending."""

from __future__ import annotations

import pytest

from broker.isr_proposals import IsrProposals, Outcome
from broker.partition_leader import IsrChange
from tests.broker.test_alter_partition_sender import led_partitions

SHRINK = IsrChange((1,), (), (2,))


@pytest.mark.parametrize(
    ("error", "outcome", "isr_after", "still_pending"),
    [
        (None, Outcome.COMMITTED, [1], False),
        ("NO_ANSWER", Outcome.RETRY, [1, 2], True),
        ("INELIGIBLE_REPLICA", Outcome.DROPPED, [1, 2], False),
        ("OPERATION_NOT_ATTEMPTED", Outcome.DROPPED, [1, 2], False),
        ("INVALID_REQUEST", Outcome.DROPPED, [1, 2], False),
        ("FENCED_LEADER_EPOCH", Outcome.AWAITS_METADATA, [1, 2], True),
        ("INVALID_UPDATE_VERSION", Outcome.AWAITS_METADATA, [1, 2], True),
    ],
)
def test_an_answer_to_the_pending_change(tmp_path, error, outcome, isr_after, still_pending):
    [partition] = led_partitions(tmp_path, 1)
    proposals = IsrProposals()
    partition.leader.pending = SHRINK
    result = proposals.answered(partition, SHRINK, error, [1], partition.partition_epoch + 1)
    assert result is outcome
    assert sorted(partition.leader.isr) == isr_after
    assert (partition.leader.pending is SHRINK) == still_pending
    assert proposals.stats.failed == (error is not None)
    assert proposals.stats.shrinks == (error is None)


@pytest.mark.parametrize("error", [None, "NO_ANSWER", "INELIGIBLE_REPLICA"])
def test_an_answer_to_a_change_no_longer_pending_is_ignored(tmp_path, error):
    [partition] = led_partitions(tmp_path, 1)
    proposals = IsrProposals()
    partition.leader.pending = None  # a metadata delta settled it first
    assert proposals.answered(partition, SHRINK, error, [1], 9) is Outcome.IGNORED
    assert sorted(partition.leader.isr) == [1, 2]


def test_take_sends_pending_changes_and_keeps_settled_ones_home(tmp_path):
    first, second = led_partitions(tmp_path, 2)
    proposals = IsrProposals()
    first.leader.pending = SHRINK
    proposals.submit(first, IsrChange((1, 2), (), ()))  # replaced by the next one
    proposals.submit(first, SHRINK)
    proposals.submit(second, SHRINK)  # not second's pending change: settled
    live, settled = proposals.take()
    assert [(p.partition, p.change) for p in live] == [(first, SHRINK)]
    assert [p.partition for p in settled] == [second]
    assert live[0].leader_epoch == first.leader_epoch
    assert not proposals.has_queued
    assert proposals.resend(first, SHRINK, still_served=True) and proposals.has_queued
    assert not proposals.resend(second, SHRINK, still_served=True)
    assert not proposals.resend(first, SHRINK, still_served=False)
