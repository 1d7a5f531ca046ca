"""The producer's partitioning matches Kafka's Java client: murmur2 against the reference
values of Kafka's UtilsTest and against kafka-python's independent implementation, and
keyless records follow KIP-794's uniform sticky partitioner (switching after batch.size
bytes, weighted by queue sizes, leaving out brokers that stopped taking batches)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from strom.accumulator import RecordAccumulator
from strom.partitioner import LeaderWaits, UniformStickyPartitioner, murmur2, partition_for_key

# org.apache.kafka.common.utils.UtilsTest.testMurmur2
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
}


def test_murmur2_gives_kafkas_reference_values():
    for data, expected in KAFKA_VECTORS.items():
        assert murmur2(data) == expected, data


@given(st.binary(max_size=64))
def test_murmur2_agrees_with_kafka_python(data):
    # kafka-python returns the unsigned form of the same 32 bits.
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data) & 0xFFFFFFFF


@given(st.binary(max_size=32), st.integers(1, 1000))
def test_keyed_partition_is_the_positive_hash_mod_the_count(key, partitions):
    partition = partition_for_key(key, partitions)
    assert 0 <= partition < partitions
    assert partition == (murmur2(key) & 0x7FFFFFFF) % partitions


def test_keyless_records_switch_after_batch_size_bytes_once_the_batch_is_full():
    sticky = UniformStickyPartitioner(batch_size=1000, rng=random.Random(3))
    first = sticky.partition("t", 6)
    for _ in range(9):  # 900 bytes: not yet batch.size
        sticky.appended("t", first, 100, batch_full=True)
        assert sticky.partition("t", 6) == first
    sticky.appended("t", (first + 1) % 6, 500, batch_full=True)  # another partition's
    assert sticky.partition("t", 6) == first
    sticky.appended("t", first, 100, batch_full=True)  # 1,000 bytes and a full batch
    second = sticky.partition("t", 6)
    # A half-filled batch holds the switch back, up to twice batch.size.
    for _ in range(19):
        sticky.appended("t", second, 100, batch_full=False)
    assert sticky.partition("t", 6) == second
    sticky.appended("t", second, 100, batch_full=False)
    seen = {sticky.partition("t", 6)}
    for _ in range(300):
        p = sticky.partition("t", 6)
        seen.add(p)
        sticky.appended("t", p, 2000, batch_full=False)
    assert seen == set(range(6))


def test_keyless_records_spread_evenly_over_partitions():
    """5,000 keyless 1 KiB records through the accumulator at Kafka's defaults: before
    KIP-794 one partition could take 4,712 of them (sticky until its batch was sent)."""
    sticky = UniformStickyPartitioner(batch_size=16384, rng=random.Random(7))
    accumulator = RecordAccumulator(batch_size=16384, linger_ms=5)
    counts = [0, 0, 0]
    for _ in range(5000):
        p = sticky.partition("t", 3, available=[0, 1, 2])
        _, _, size, full = accumulator.append("t", p, 0, None, b"x" * 1024, ())
        sticky.appended("t", p, size, full)
        counts[p] += 1
    assert all(1100 < c < 2300 for c in counts), counts


def test_adaptive_partitioning_favours_partitions_with_short_queues():
    draws = 6000

    def chosen(adaptive: bool) -> list[int]:
        sticky = UniformStickyPartitioner(batch_size=1, adaptive=adaptive, rng=random.Random(5))
        # Partition 1's broker lags: 9 batches queued, the others none (weights 10, 1, 10).
        sticky.update_load("t", [(0, 0), (1, 9), (2, 0)], 3)
        counts = [0, 0, 0]
        for _ in range(draws):
            p = sticky.partition("t", 3, available=[0, 1, 2])
            counts[p] += 1
            sticky.appended("t", p, 2, batch_full=True)
        return counts

    weighted = chosen(adaptive=True)
    assert weighted[1] < draws * 0.08 and min(weighted[0], weighted[2]) > draws * 0.4
    uniform = chosen(adaptive=False)  # partitioner.adaptive.partitioning.enable=false
    assert all(draws * 0.28 < c < draws * 0.38 for c in uniform), uniform


def test_equal_queues_or_one_partition_give_no_weights():
    sticky = UniformStickyPartitioner(batch_size=1, rng=random.Random(2))
    sticky.update_load("t", [(0, 3), (1, 3)], 2)
    sticky.update_load("u", [(0, 4)], 1)
    assert sticky.loaded_topics() == []
    sticky.update_load("t", [(0, 3)], 2)  # partition 1 left out: only 0 may take records
    picked = set()
    for _ in range(20):
        p = sticky.partition("t", 2)
        picked.add(p)
        sticky.appended("t", p, 5, batch_full=True)
    assert picked == {0}


def test_a_broker_that_took_nothing_for_the_timeout_is_left_out():
    waits = LeaderWaits(timeout_s=0.5)
    waits.observed(1, drained=False, now=10.0)  # first seen: counts from here
    waits.observed(2, drained=True, now=10.0)
    waits.observed(1, drained=False, now=10.4)
    assert not waits.stalled(1)
    waits.observed(1, drained=False, now=10.6)
    waits.observed(2, drained=True, now=10.6)
    assert waits.stalled(1) and not waits.stalled(2)
    waits.observed(1, drained=True, now=10.7)
    assert not waits.stalled(1)
    assert not LeaderWaits(timeout_s=0).stalled(1)  # 0: the check is off (Kafka's default)


def test_a_pause_of_the_producer_itself_stalls_no_broker():
    """A drain after a long gap (a full GC of a big process) must not find every leader
    stalled: broker 2 took batches until the pause; broker 1 had taken none for 0.6 s."""
    waits = LeaderWaits(timeout_s=0.2)
    for at in (10.0, 10.1, 10.2, 10.3, 10.4, 10.5, 10.6):
        waits.looked(at)
        waits.observed(1, drained=at == 10.0, now=at)
        waits.observed(2, drained=True, now=at)
    assert waits.stalled(1) and not waits.stalled(2)
    waits.looked(11.0)  # 0.4 s nobody looked
    waits.observed(1, drained=False, now=11.0)
    waits.observed(2, drained=False, now=11.0)  # its answers were waiting meanwhile
    assert waits.stalled(1) and not waits.stalled(2)
    waits.looked(11.1)
    waits.observed(2, drained=False, now=11.1)
    assert not waits.stalled(2)  # 0.1 s without taking, as looked at
    waits.looked(11.25)
    waits.observed(2, drained=False, now=11.25)
    assert waits.stalled(2)  # 0.25 s: stalled for real now


def test_keyless_records_prefer_partitions_with_a_leader():
    sticky = UniformStickyPartitioner(batch_size=10, rng=random.Random(1))
    for _ in range(50):
        p = sticky.partition("t", 6, available=[2, 4])
        assert p in (2, 4)
        sticky.appended("t", p, 10, batch_full=True)
