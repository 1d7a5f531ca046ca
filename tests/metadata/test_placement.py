"""Replica placement: leaders spread evenly, replicas on distinct brokers and racks, and the
errors Kafka gives when it cannot be done."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata.errors import ApiError
from metadata.placement import place, rack_alternated


def test_without_racks_replica_j_of_partition_i_is_broker_start_plus_i_plus_j():
    racks = {1: None, 2: None, 3: None, 4: None}
    assert place(racks, 4, 3, start=1) == [[2, 3, 4], [3, 4, 1], [4, 1, 2], [1, 2, 3]]


def test_racks_alternate_and_each_partition_spans_the_racks():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assert rack_alternated(racks) == [1, 3, 5, 2, 4, 6]
    for replicas in place(racks, 12, 3, start=2):
        assert {racks[b] for b in replicas} == {"a", "b", "c"}


def test_an_uneven_rack_still_gets_distinct_racks_while_it_can():
    racks = {1: "a", 2: "a", 3: "a", 4: "b"}
    for replicas in place(racks, 8, 2):
        assert {racks[b] for b in replicas} == {"a", "b"}
    for replicas in place(racks, 8, 3):
        assert "b" in {racks[b] for b in replicas} and len(set(replicas)) == 3


@given(
    brokers=st.integers(1, 9),
    rack_count=st.integers(0, 4),
    partitions=st.integers(1, 60),
    data=st.data(),
)
def test_placement_properties(brokers, rack_count, partitions, data):
    racks = {b: (f"r{b % rack_count}" if rack_count else None) for b in range(1, brokers + 1)}
    rf = data.draw(st.integers(1, brokers))
    start = data.draw(st.integers(0, 100))
    assignment = place(racks, partitions, rf, start=start)
    assert len(assignment) == partitions
    for replicas in assignment:
        assert len(replicas) == rf == len(set(replicas))
        assert len({racks[b] for b in replicas}) == min(rf, len(set(racks.values())))
    leaders = Counter(r[0] for r in assignment)
    # Leaders spread evenly: counts differ by at most one.
    counts = [leaders.get(b, 0) for b in racks]
    assert max(counts) - min(counts) <= 1


@pytest.mark.parametrize(
    ("partitions", "rf", "error", "text"),
    [
        (0, 1, "INVALID_PARTITIONS", "larger than 0"),
        (1, 0, "INVALID_REPLICATION_FACTOR", "larger than 0"),
        (1, 4, "INVALID_REPLICATION_FACTOR", "only 3 broker(s) are registered"),
    ],
)
def test_impossible_placements_are_kafkas_errors(partitions, rf, error, text):
    with pytest.raises(ApiError) as caught:
        place({1: None, 2: None, 3: None}, partitions, rf)
    assert caught.value.error_name == error and text in caught.value.message
