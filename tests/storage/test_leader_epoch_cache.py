"""Leader-epoch cache (storage.leader_epoch_cache) against Kafka's LeaderEpochFileCache.

Proves assign / end_offset_for / epoch_for_offset / truncate_from_end / truncate_from_start
follow Kafka (KIP-101/279): the end offset of epoch E is the start offset of the first epoch
above E, or the log end offset for the latest epoch; an epoch below every known one ends
where the first starts; one above the latest is unknown (-1, -1); stale epochs are ignored;
a new epoch drops entries at or past its start offset; every change is persisted and reloads
the same.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.leader_epoch_cache import FILE_NAME, LeaderEpochCache


def cache_with(tmp_path, *entries):
    cache = LeaderEpochCache(str(tmp_path))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_assign_keeps_rising_epochs(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (5, 30))
    assert cache.entries == [(0, 0), (2, 10), (5, 30)]
    assert cache.latest_epoch() == 5


def test_assign_ignores_stale_repeated_and_undefined_epochs(tmp_path):
    cache = cache_with(tmp_path, (2, 10), (5, 30))
    cache.assign(5, 40)  # the same epoch again: already started at 30
    cache.assign(3, 50)  # an older leader
    cache.assign(-1, 60)  # no epoch (old message format)
    assert cache.entries == [(2, 10), (5, 30)]


def test_assign_drops_entries_at_or_past_the_new_start(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 10), (3, 20))
    cache.assign(4, 10)
    assert cache.entries == [(1, 0), (4, 10)]


def test_empty_cache(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    assert cache.latest_epoch() == -1
    assert cache.end_offset_for(0, 100) == (-1, -1)
    assert cache.epoch_for_offset(5) == -1


@pytest.mark.parametrize(
    "requested, expected",
    [
        (5, (5, 100)),  # the latest epoch ends at the log end offset
        (2, (2, 30)),  # a known epoch ends where the next one starts
        (0, (0, 10)),
        (3, (2, 30)),  # an unknown epoch between two: the largest epoch below it
        (4, (2, 30)),
        (1, (0, 10)),
        (-1, (-1, -1)),  # undefined
    ],
)
def test_end_offset_for(tmp_path, requested, expected):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (5, 30))
    assert cache.end_offset_for(requested, log_end_offset=100) == expected


def test_end_offset_for_an_epoch_below_every_known_one(tmp_path):
    """KIP-279: the requested epoch itself, ending where the first known epoch starts (the
    log before it is gone; the follower truncates to the leader's start)."""
    cache = cache_with(tmp_path, (3, 50), (5, 80))
    assert cache.end_offset_for(1, log_end_offset=100) == (1, 50)


def test_end_offset_for_an_epoch_above_the_latest_is_undefined(tmp_path):
    """Kafka's LeaderEpochFileCache.endOffsetFor: "The requested epoch is larger than any
    known epoch" -> (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET); only the latest epoch itself
    ends at the log end offset."""
    cache = cache_with(tmp_path, (0, 0), (2, 10))
    assert cache.end_offset_for(7, log_end_offset=100) == (-1, -1)


def test_epoch_for_offset(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (5, 30))
    assert [cache.epoch_for_offset(o) for o in (0, 9, 10, 29, 30, 1000)] == [0, 0, 2, 2, 5, 5]


def test_truncate_from_end(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (5, 30))
    cache.truncate_from_end(30)  # entries starting at or after 30 go
    assert cache.entries == [(0, 0), (2, 10)]
    cache.truncate_from_end(11)
    assert cache.entries == [(0, 0), (2, 10)]
    cache.truncate_from_end(0)
    assert cache.entries == []


@pytest.mark.parametrize(
    "start, expected",
    [
        (0, [(0, 0), (2, 10), (5, 30)]),
        (5, [(0, 5), (2, 10), (5, 30)]),  # the epoch covering 5 now starts there
        (10, [(2, 10), (5, 30)]),
        (31, [(5, 31)]),
        (1000, [(5, 1000)]),
    ],
)
def test_truncate_from_start(tmp_path, start, expected):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (5, 30))
    cache.truncate_from_start(start)
    assert cache.entries == expected


def test_changes_are_persisted_in_kafka_format(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (5, 30))
    cache.truncate_from_start(5)
    with open(os.path.join(tmp_path, FILE_NAME), "rb") as f:
        assert f.read() == b"0\n3\n0 5\n2 10\n5 30\n"
    assert LeaderEpochCache(str(tmp_path)).entries == [(0, 5), (2, 10), (5, 30)]
    cache.clear()
    assert LeaderEpochCache(str(tmp_path)).entries == []


ops = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(-1, 12), st.integers(0, 200)),
        st.tuples(st.just("end"), st.integers(0, 200), st.just(0)),
        st.tuples(st.just("start"), st.integers(0, 200), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=100, deadline=None)
@given(ops=ops)
def test_entries_always_rise_and_reload_identically(tmp_path_factory, ops):
    directory = str(tmp_path_factory.mktemp("epochs"))
    cache = LeaderEpochCache(directory)
    for op, a, b in ops:
        if op == "assign":
            cache.assign(a, b)
        elif op == "end":
            cache.truncate_from_end(a)
        else:
            cache.truncate_from_start(a)
        epochs = [e for e, _ in cache.entries]
        starts = [o for _, o in cache.entries]
        assert epochs == sorted(set(epochs)) and starts == sorted(set(starts))
        assert LeaderEpochCache(directory).entries == cache.entries
