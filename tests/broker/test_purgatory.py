"""The purgatory's follower-fetch rules (broker/purgatory.py), event by event; its produce
rules run under tests/data_plane and the replication simulator, on real partitions."""

from __future__ import annotations

from broker.purgatory import MAX_FETCH_WAIT_MS, DelayedFetch, FollowerRead, Purgatory

TP = ("t", 0)


def test_a_fetch_is_answered_at_once_when_min_bytes_are_there_or_a_partition_stopped():
    purgatory = Purgatory()
    fetch = purgatory.follower_fetch(500, 10, now_ms=0)
    assert purgatory.fetch_read(fetch, FollowerRead(10, False, (TP,)), 0)
    assert purgatory.fetch_read(fetch, FollowerRead(0, True, (TP,)), 0)
    assert purgatory.fetch_read(fetch, FollowerRead(0, False, ()), 0)  # nothing to wait on
    assert purgatory.next_wake_ms() is None


def test_a_parked_fetch_reads_again_when_its_partition_changes_and_is_answered_at_its_deadline():
    purgatory = Purgatory()
    fetch = purgatory.follower_fetch(500, 0, now_ms=1_000)  # min_bytes at least 1
    assert not purgatory.fetch_read(fetch, FollowerRead(0, False, (TP,)), 1_000)
    assert purgatory.watched(TP) and purgatory.next_wake_ms() == 1_500
    assert purgatory.changed(("t", 1), 1_100) == []
    assert purgatory.changed(TP, 1_100) == [fetch]
    assert not purgatory.watched(TP)
    assert not purgatory.fetch_read(fetch, FollowerRead(0, False, (TP,)), 1_100)
    assert purgatory.expire(1_499) == []
    assert purgatory.expire(1_500) == [fetch]
    assert purgatory.fetch_read(fetch, FollowerRead(0, False, (TP,)), 1_500)
    assert purgatory.parked() == []


def test_a_throttled_fetch_looks_again_when_the_quota_may_let_records_go():
    purgatory = Purgatory()
    fetch = purgatory.follower_fetch(500, 1, now_ms=0)
    assert not purgatory.fetch_read(fetch, FollowerRead(0, False, (TP,), throttled_for_ms=0), 0)
    assert purgatory.next_wake_ms() == 1  # never a spin: at least 1 ms
    assert not purgatory.fetch_read(
        purgatory.expire(1)[0], FollowerRead(0, False, (TP,), throttled_for_ms=9_000), 1
    )
    assert purgatory.next_wake_ms() == 500  # never past the deadline


def test_the_wait_is_bounded_and_a_cancelled_fetch_is_forgotten():
    purgatory = Purgatory()
    fetch = purgatory.follower_fetch(10**9, 1, now_ms=0)
    assert isinstance(fetch, DelayedFetch) and fetch.deadline_ms == MAX_FETCH_WAIT_MS
    assert purgatory.follower_fetch(-5, 1, now_ms=7).deadline_ms == 7
    assert not purgatory.fetch_read(fetch, FollowerRead(0, False, (TP,)), 0)
    purgatory.cancel(fetch)
    assert not purgatory.watched(TP) and purgatory.next_wake_ms() is None
