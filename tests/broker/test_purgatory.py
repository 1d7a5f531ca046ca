"""The purgatory's rules (broker/purgatory.py), event by event: follower fetches with reads
described, acks=all produces on real partitions over real logs (tests/broker/test_partition.py's
helpers)."""

from __future__ import annotations

from broker.purgatory import (
    MAX_FETCH_WAIT_MS,
    MAX_PRODUCE_WAIT_MS,
    DelayedFetch,
    FetchReadSummary,
    Purgatory,
)
from tests.broker.test_partition import (
    NOW,
    batch,
    catch_up,
    elect,
    fetch_once,
    replicas,
    topic_settings,
)

TP = ("t", 0)


def test_a_fetch_is_answered_at_once_when_min_bytes_are_there_or_a_partition_stopped():
    purgatory = Purgatory()
    fetch = purgatory.follower_fetch(500, 10, now_ms=0)
    assert purgatory.fetch_read(fetch, FetchReadSummary(10, False, (TP,)), 0)
    assert purgatory.fetch_read(fetch, FetchReadSummary(0, True, (TP,)), 0)
    assert purgatory.fetch_read(fetch, FetchReadSummary(0, False, ()), 0)  # nothing to wait on
    assert purgatory.next_wake_ms() is None


def test_a_parked_fetch_reads_again_when_its_partition_changes_and_is_answered_at_its_deadline():
    purgatory = Purgatory()
    fetch = purgatory.follower_fetch(500, 0, now_ms=1_000)  # min_bytes at least 1
    assert not purgatory.fetch_read(fetch, FetchReadSummary(0, False, (TP,)), 1_000)
    assert purgatory.watched(TP) and purgatory.next_wake_ms() == 1_500
    assert purgatory.changed(("t", 1), 1_100) == []
    assert purgatory.changed(TP, 1_100) == [fetch]
    assert not purgatory.watched(TP)
    assert not purgatory.fetch_read(fetch, FetchReadSummary(0, False, (TP,)), 1_100)
    assert purgatory.expire(1_499) == []
    assert purgatory.expire(1_500) == [fetch]
    assert purgatory.fetch_read(fetch, FetchReadSummary(0, False, (TP,)), 1_500)
    assert purgatory.parked() == []


def test_a_throttled_fetch_looks_again_when_the_quota_may_let_records_go():
    purgatory = Purgatory()
    fetch = purgatory.follower_fetch(500, 1, now_ms=0)
    assert not purgatory.fetch_read(fetch, FetchReadSummary(0, False, (TP,), throttled_for_ms=0), 0)
    assert purgatory.next_wake_ms() == 1  # never a spin: at least 1 ms
    assert not purgatory.fetch_read(
        purgatory.expire(1)[0], FetchReadSummary(0, False, (TP,), throttled_for_ms=9_000), 1
    )
    assert purgatory.next_wake_ms() == 500  # never past the deadline


def test_the_wait_is_bounded_and_a_cancelled_fetch_is_forgotten():
    purgatory = Purgatory()
    fetch = purgatory.follower_fetch(10**9, 1, now_ms=0)
    assert isinstance(fetch, DelayedFetch) and fetch.deadline_ms == MAX_FETCH_WAIT_MS
    assert purgatory.follower_fetch(-5, 1, now_ms=7).deadline_ms == 7
    assert not purgatory.fetch_read(fetch, FetchReadSummary(0, False, (TP,)), 0)
    purgatory.cancel(fetch)
    assert not purgatory.watched(TP) and purgatory.next_wake_ms() is None


def three_replicas(tmp_path):
    rs = replicas(tmp_path)
    elect(rs.values(), 1, 1)
    return rs


def test_an_acks_all_produce_completes_once_the_high_watermark_passes_it(tmp_path):
    rs = three_replicas(tmp_path)
    leader = rs[1]
    append = leader.append_as_leader(batch(3), -1, NOW)
    purgatory = Purgatory()
    op = purgatory.produce([(TP, leader, append)], 30_000, now_ms=0)
    assert not op.done and purgatory.watched(TP) and purgatory.next_wake_ms() == 30_000
    catch_up(rs[2], leader)
    assert purgatory.changed(TP, 10) == []  # broker 3 has not fetched: the hw stands
    catch_up(rs[3], leader)
    fetch_once(rs[2], leader)  # the fetch after both caught up moves the hw
    assert leader.high_watermark >= append.next_offset
    assert purgatory.changed(TP, 20) == [op]
    assert op.done and op.results == {TP: None}
    assert not purgatory.watched(TP) and purgatory.next_wake_ms() is None


def test_an_acks_all_produce_fails_when_leadership_moves_while_it_waits(tmp_path):
    rs = three_replicas(tmp_path)
    append = rs[1].append_as_leader(batch(), -1, NOW)
    purgatory = Purgatory()
    op = purgatory.produce([(TP, rs[1], append)], 30_000, now_ms=0)
    elect(rs.values(), 2, 2)
    assert purgatory.changed(TP, 5) == [op]
    assert op.results[TP].error_name == "NOT_LEADER_OR_FOLLOWER"
    # Back on broker 1 in a later epoch: a batch appended in the old one is not vouched for.
    elect(rs.values(), 1, 3)
    append = rs[1].append_as_leader(batch(), -1, NOW)
    op = purgatory.produce([(TP, rs[1], append)], 30_000, now_ms=10)
    elect(rs.values(), 1, 4)
    assert purgatory.changed(TP, 15) == [op]
    assert op.results[TP].error_name == "NOT_LEADER_OR_FOLLOWER"


def test_an_acks_all_produce_fails_when_the_isr_shrinks_below_min_insync_replicas(tmp_path):
    rs = replicas(tmp_path, settings=topic_settings(min_isr=2))
    elect(rs.values(), 1, 1)
    append = rs[1].append_as_leader(batch(), -1, NOW)
    purgatory = Purgatory()
    op = purgatory.produce([(TP, rs[1], append)], 30_000, now_ms=0)
    elect(rs.values(), 1, 1, isr=(1,), partition_epoch=2)
    assert purgatory.changed(TP, 5) == [op]
    assert op.results[TP].error_name == "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


def test_an_acks_all_produce_times_out_at_its_bounded_deadline(tmp_path):
    rs = three_replicas(tmp_path)
    append = rs[1].append_as_leader(batch(), -1, NOW)
    purgatory = Purgatory()
    op = purgatory.produce([(TP, rs[1], append)], 10**9, now_ms=0)
    assert op.deadline_ms == MAX_PRODUCE_WAIT_MS
    assert purgatory.expire(MAX_PRODUCE_WAIT_MS - 1) == []
    assert purgatory.expire(MAX_PRODUCE_WAIT_MS) == [op]
    assert op.results[TP].error_name == "REQUEST_TIMED_OUT"
    assert purgatory.parked() == []


def test_operations_done_before_their_deadline_are_not_held_until_it(tmp_path):
    rs = three_replicas(tmp_path)
    purgatory = Purgatory()
    for i in range(1_000):  # each completes at once when leadership moves, long before 30 s
        append = rs[1].append_as_leader(batch(), -1, NOW)
        op = purgatory.produce([(TP, rs[1], append)], 30_000, now_ms=i)
        assert not op.done
        if i % 4:  # three in four callers go away
            purgatory.cancel(op)
    assert len(purgatory._wakes) <= 2 * len(purgatory.parked()) + 65
    elect(rs.values(), 2, 2)
    assert len(purgatory.changed(TP, 1_000)) == 250
    assert purgatory.next_wake_ms() is None and purgatory.parked() == []
