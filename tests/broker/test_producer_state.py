"""Idempotent producers per partition: retries of any of the last 25 batches are answered
with their original offsets, gaps and stale epochs get Kafka's errors, sequences wrap, and
the state survives a snapshot and a follower's truncation."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.producer_state import INT_MAX, ProducerStateError, ProducerStateManager
from strom_api.record_batch import BatchHeader


def batch(pid: int, epoch: int, seq: int, count: int = 1, offset: int = 0) -> BatchHeader:
    return BatchHeader(offset, 0, 0, 2, 0, 0, count - 1, 0, 1000 + offset, pid, epoch, seq, count)


def append(state: ProducerStateManager, header: BatchHeader, end: list[int]):
    """As a leader does: check, and if new, assign offsets at the log end and replay."""
    original = state.check(header)
    if original is not None:
        return original.first_offset, True
    placed = header._replace(base_offset=end[0])
    state.replay(placed)
    end[0] += header.record_count
    return placed.base_offset, False


def test_sequences_continue_and_retries_get_the_original_offsets():
    """A producer's last 25 batches are remembered (Kafka's leader: 5), as many as Strom's
    producer may have unanswered in a partition (strom_api/idempotence.py)."""
    state, end = ProducerStateManager(), [0]
    offsets = [append(state, batch(7, 0, seq * 3, 3), end)[0] for seq in range(26)]
    assert offsets == [seq * 3 for seq in range(26)]
    # Any of the last 25 batches retried: its original offset, nothing written.
    assert append(state, batch(7, 0, 75, 3), end) == (75, True)
    assert append(state, batch(7, 0, 3, 3), end) == (3, True)
    assert end == [78]
    # The 26th-last batch is forgotten: its retry is out of order.
    with pytest.raises(ProducerStateError) as caught:
        state.check(batch(7, 0, 0, 3))
    assert caught.value.error_name == "OUT_OF_ORDER_SEQUENCE_NUMBER"


@pytest.mark.parametrize(
    ("header", "error"),
    [
        (batch(7, 0, 5), "OUT_OF_ORDER_SEQUENCE_NUMBER"),  # a gap: 3 and 4 never came
        (batch(7, 1, 1), "OUT_OF_ORDER_SEQUENCE_NUMBER"),  # a new epoch starts at 0
        (batch(8, 0, 4), "UNKNOWN_PRODUCER_ID"),
    ],
)
def test_gaps_new_epochs_and_strangers(header, error):
    state, end = ProducerStateManager(), [0]
    for seq in range(3):
        append(state, batch(7, 0, seq), end)
    with pytest.raises(ProducerStateError) as caught:
        state.check(header)
    assert caught.value.error_name == error and str(caught.value)


def test_a_newer_epoch_fences_the_older_one():
    state, end = ProducerStateManager(), [0]
    append(state, batch(7, 0, 0), end)
    append(state, batch(7, 1, 0), end)
    with pytest.raises(ProducerStateError) as caught:
        state.check(batch(7, 0, 1))
    assert caught.value.error_name == "INVALID_PRODUCER_EPOCH"


def test_sequences_wrap_after_int_max():
    state = ProducerStateManager()
    state.replay(batch(7, 0, INT_MAX - 1, 2, offset=0))  # ends at INT_MAX
    assert state.check(batch(7, 0, 0, 1)) is None
    with pytest.raises(ProducerStateError):
        state.check(batch(7, 0, 1, 1))


def test_truncation_forgets_what_the_log_lost():
    state, end = ProducerStateManager(), [0]
    for seq in range(4):
        append(state, batch(7, 0, seq), end)
    append(state, batch(9, 0, 0), end)  # offset 4
    state.truncate_to(3)
    assert 9 not in state.producers
    assert [b.last_offset for b in state.producers[7].batches] == [0, 1, 2]
    assert state.check(batch(7, 0, 3)) is None  # the lost batch may come again


def test_snapshots_round_trip_and_refuse_damage():
    state, end = ProducerStateManager(), [0]
    for seq in range(7):
        append(state, batch(7, 2, seq * 2, 2), end)
    data = state.snapshot()
    again = ProducerStateManager.from_snapshot(data)
    assert again.producers == state.producers
    with pytest.raises(ValueError, match="damaged"):
        ProducerStateManager.from_snapshot(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ValueError):
        ProducerStateManager.from_snapshot(b"\x00")


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_retries_never_write_twice_and_acknowledged_batches_keep_their_offsets(seed):
    """Producers send batches in order, retrying any of their last few (lost responses):
    every batch is written exactly once, and a retry is answered with its first offsets."""
    rng = random.Random(seed)
    state, end = ProducerStateManager(), [0]
    next_seq = {1: 0, 2: 0}
    written: dict[tuple[int, int], int] = {}
    sent: dict[int, list[tuple[int, int]]] = {1: [], 2: []}
    for _ in range(300):
        pid = rng.choice((1, 2))
        if sent[pid] and rng.random() < 0.3:
            seq, count = rng.choice(sent[pid][-5:])  # a retry of a recent batch
        else:
            count = rng.randrange(1, 4)
            seq, next_seq[pid] = next_seq[pid], next_seq[pid] + count
            sent[pid].append((seq, count))
        offset, duplicate = append(state, batch(pid, 0, seq, count), end)
        key = (pid, seq)
        if duplicate:
            assert written[key] == offset
        else:
            assert key not in written
            written[key] = offset
    assert end[0] == sum(c for pid in sent for _, c in sent[pid])
