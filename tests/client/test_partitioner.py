"""The producer's partitioning matches Kafka's Java client: murmur2 against the reference
values of Kafka's UtilsTest and against kafka-python's independent implementation, and
keyless records stick to one partition per batch."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from strom.partitioner import StickyPartitioner, murmur2, partition_for_key

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


def test_keyless_records_stick_until_their_batch_is_sent():
    sticky = StickyPartitioner(random.Random(3))
    first = sticky.partition("t", 6)
    assert all(sticky.partition("t", 6) == first for _ in range(50))
    sticky.batch_sent("t", (first + 1) % 6, 6)  # another partition's batch: no change
    assert sticky.partition("t", 6) == first
    sticky.batch_sent("t", first, 6)
    second = sticky.partition("t", 6)
    assert second != first
    seen = set()
    for _ in range(200):
        p = sticky.partition("t", 6)
        seen.add(p)
        sticky.batch_sent("t", p, 6)
    assert seen == set(range(6))


def test_keyless_records_prefer_partitions_with_a_leader():
    sticky = StickyPartitioner(random.Random(1))
    for _ in range(50):
        p = sticky.partition("t", 6, available=[2, 4])
        assert p in (2, 4)
        sticky.batch_sent("t", p, 6, available=[2, 4])
