"""broker.refused_sequences: which gaps a leader's own NOT_ENOUGH_REPLICAS refusals made.
The partition-level behaviour is in test_partition.py."""

from __future__ import annotations

from broker.producer_state import ProducerStateManager
from broker.refused_sequences import MAX_REFUSALS, RefusedSequences
from strom_api.record_batch import BatchHeader


def batch(pid: int, epoch: int, seq: int, count: int = 1, offset: int = 0) -> BatchHeader:
    return BatchHeader(offset, 0, 0, 2, 0, 0, count - 1, 0, 1000, pid, epoch, seq, count)


def test_only_a_producers_next_batch_is_remembered_and_only_until_its_state_moves_on():
    producers = ProducerStateManager()
    producers.replay(batch(7, 0, 0, count=2))
    refusals = RefusedSequences()
    refusals.record([batch(7, 0, 5), batch(-1, -1, -1)], producers, 0)  # not 7's next
    assert len(refusals) == 0
    refusals.record([batch(7, 0, 2, count=2)], producers, 0)
    assert refusals.explains_gap(batch(7, 0, 4), producers, 1) is not None
    # The refused batch reached the log some other way (no `appended` call): no gap left.
    producers.replay(batch(7, 0, 2, count=2, offset=2))
    assert refusals.explains_gap(batch(7, 0, 6), producers, 1) is None


def test_appended_batches_close_their_producers_gaps():
    producers = ProducerStateManager()
    refusals = RefusedSequences()
    refusals.record([batch(7, 0, 0), batch(8, 0, 0)], producers, 0)
    refusals.appended([batch(7, 0, 0)])
    assert len(refusals) == 1
    assert refusals.explains_gap(batch(8, 0, 3), producers, 1) is not None


def test_the_oldest_refusal_is_forgotten_past_the_bound():
    producers = ProducerStateManager()
    refusals = RefusedSequences()
    for pid in range(MAX_REFUSALS):
        refusals.record([batch(pid, 0, 0)], producers, pid)
    # Producer 0 is refused again: now the newest, so producer 1 is the one forgotten.
    refusals.record([batch(0, 0, 0)], producers, MAX_REFUSALS)
    refusals.record([batch(MAX_REFUSALS, 0, 0)], producers, MAX_REFUSALS + 1)
    assert len(refusals) == MAX_REFUSALS
    now = MAX_REFUSALS + 2
    assert refusals.explains_gap(batch(0, 0, 1), producers, now) is not None
    assert refusals.explains_gap(batch(1, 0, 1), producers, now) is None
    assert refusals.explains_gap(batch(2, 0, 1), producers, now) is not None
