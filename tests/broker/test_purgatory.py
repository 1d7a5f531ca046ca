"""The purgatory's rules (broker/purgatory.py), event by event: follower fetches with reads
described, consumer fetches and acks=all produces on real partitions over real logs
(tests/broker/test_partition.py's helpers)."""

from __future__ import annotations

import os

from broker.partition import Partition
from broker.purgatory import (
    MAX_FETCH_WAIT_MS,
    MAX_PRODUCE_WAIT_MS,
    ConsumerPartitionRead,
    ConsumerReadSummary,
    DelayedFetch,
    FetchReadSummary,
    Purgatory,
)
from metadata.errors import ApiError
from storage.log_dir_failures import LogDirFailureChannel
from tests.broker.test_partition import (
    BIG,
    NOW,
    batch,
    catch_up,
    elect,
    fetch_once,
    refused,
    replicas,
    topic_settings,
)
from tests.broker.test_partition_disk_errors import partition_in
from tests.storage.test_log_dir_failures import swap_fd

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


# --- consumer fetches ------------------------------------------------------------------------


def consumer_read(
    purgatory: Purgatory,
    fetch: DelayedFetch,
    partition: Partition,
    offset: int,
    now: int,
    limit: int = BIG,
    debugging: bool = False,
) -> bool:
    """One read of a consumer fetch of TP, as broker/consumer_reads.read_for_consumers does
    it, handed to the purgatory; an error of the read stops the fetch. `debugging`: Kafka's
    debugging consumer, which reads any replica."""
    try:
        if debugging:
            records = partition.read_local_replica(offset, limit)
        else:
            records = partition.read_for_consumer(offset, limit)
    except ApiError:
        return purgatory.consumer_read(fetch, ConsumerReadSummary(0, True, ()), now)
    seen = ConsumerPartitionRead(
        TP,
        partition,
        offset,
        partition.leader_epoch,
        partition.is_leader,
        partition.high_watermark,
        filled=len(records) >= limit,
    )
    return purgatory.consumer_read(fetch, ConsumerReadSummary(len(records), False, (seen,)), now)


def test_a_consumer_fetch_is_answered_at_once_with_min_bytes_an_error_or_nothing_to_wait_on(
    tmp_path,
):
    rs = three_replicas(tmp_path)
    leader = rs[1]
    purgatory = Purgatory()
    assert consumer_read(purgatory, purgatory.consumer_fetch(500, 1, 0), leader, 0, 0) is False
    purgatory.drop_all()
    # min_bytes 0 (or less) answers the first read, empty or not, as Kafka does.
    assert consumer_read(purgatory, purgatory.consumer_fetch(500, 0, 0), leader, 0, 0)
    fetch = purgatory.consumer_fetch(500, 1, 0)
    assert purgatory.consumer_read(fetch, ConsumerReadSummary(0, True, ()), 0)  # an error
    assert purgatory.consumer_read(fetch, ConsumerReadSummary(0, False, ()), 0)  # no partition
    leader.append_as_leader(batch(2), 1, NOW)
    catch_up(rs[2], leader)
    catch_up(rs[3], leader)
    assert leader.high_watermark == 2
    assert consumer_read(purgatory, purgatory.consumer_fetch(500, 1, 0), leader, 0, 0)
    assert purgatory.parked() == [] and purgatory.next_wake_ms() is None


def test_a_parked_consumer_fetch_reads_again_only_when_its_high_watermark_moves(tmp_path):
    rs = three_replicas(tmp_path)
    leader = rs[1]
    purgatory = Purgatory()
    fetch = purgatory.consumer_fetch(500, 1, now_ms=1_000)
    assert not consumer_read(purgatory, fetch, leader, 0, 1_000)
    assert purgatory.watched(TP) and purgatory.next_wake_ms() == 1_500
    # Appended, but no follower has it: nothing a consumer may read yet. A follower's fetch
    # on the same partition would read again here; a consumer's stays parked.
    leader.append_as_leader(batch(3), -1, NOW)
    assert purgatory.changed(TP, 1_010) == []
    catch_up(rs[2], leader)
    assert leader.high_watermark == 0 and purgatory.changed(TP, 1_020) == []
    catch_up(rs[3], leader)
    fetch_once(rs[2], leader)
    assert leader.high_watermark == 3
    assert purgatory.changed(TP, 1_030) == [fetch] and not purgatory.watched(TP)
    assert consumer_read(purgatory, fetch, leader, 0, 1_030)


def test_a_parked_consumer_fetch_is_answered_at_its_deadline(tmp_path):
    leader = three_replicas(tmp_path)[1]
    purgatory = Purgatory()
    fetch = purgatory.consumer_fetch(10**9, 1, now_ms=0)
    assert fetch.deadline_ms == MAX_FETCH_WAIT_MS
    assert not consumer_read(purgatory, fetch, leader, 0, 0)
    assert purgatory.expire(MAX_FETCH_WAIT_MS - 1) == []
    assert purgatory.expire(MAX_FETCH_WAIT_MS) == [fetch]
    assert consumer_read(purgatory, fetch, leader, 0, MAX_FETCH_WAIT_MS)
    assert purgatory.parked() == []


def test_a_parked_consumer_fetch_is_answered_when_leadership_moves(tmp_path):
    rs = three_replicas(tmp_path)
    purgatory = Purgatory()
    fetch = purgatory.consumer_fetch(500, 1, now_ms=0)
    assert not consumer_read(purgatory, fetch, rs[1], 0, 0)
    elect(rs.values(), 1, 1, isr=(1, 2), partition_epoch=2)  # the ISR shrinks: no matter
    assert purgatory.changed(TP, 5) == []
    elect(rs.values(), 1, 2)  # the same leader in a new epoch
    assert purgatory.changed(TP, 10) == [fetch]
    assert not consumer_read(purgatory, fetch, rs[1], 0, 10)
    elect(rs.values(), 2, 3)  # another broker leads: the read answers NOT_LEADER_OR_FOLLOWER
    assert purgatory.changed(TP, 20) == [fetch]
    refused("NOT_LEADER_OR_FOLLOWER", rs[1].read_for_consumer, 0, BIG)
    assert consumer_read(purgatory, fetch, rs[1], 0, 20)


def test_a_parked_consumer_fetch_is_answered_when_its_offset_leaves_the_log(tmp_path):
    rs = three_replicas(tmp_path)
    leader = rs[1]
    leader.append_as_leader(batch(4), -1, NOW)
    catch_up(rs[2], leader)
    catch_up(rs[3], leader)
    fetch_once(rs[2], leader)
    purgatory = Purgatory()
    fetch = purgatory.consumer_fetch(500, 10**6, now_ms=0)  # more than there is
    assert not consumer_read(purgatory, fetch, leader, 1, 0)
    leader.delete_records_before(2)  # the records it reads from are deleted
    assert purgatory.changed(TP, 5) == [fetch]
    refused("OFFSET_OUT_OF_RANGE", leader.read_for_consumer, 1, BIG)


def test_a_consumer_fetch_whose_partition_is_full_is_not_read_again_for_more_there(tmp_path):
    rs = three_replicas(tmp_path)
    leader = rs[1]
    leader.append_as_leader(batch(2), -1, NOW)
    catch_up(rs[2], leader)
    catch_up(rs[3], leader)
    fetch_once(rs[2], leader)
    purgatory = Purgatory()
    fetch = purgatory.consumer_fetch(500, 10**6, now_ms=0)
    assert not consumer_read(purgatory, fetch, leader, 0, 0, limit=1)  # KIP-74: one batch
    leader.append_as_leader(batch(2), -1, NOW)
    catch_up(rs[2], leader)
    catch_up(rs[3], leader)
    fetch_once(rs[2], leader)
    assert leader.high_watermark == 4
    assert purgatory.changed(TP, 5) == []  # its partition_max_bytes is spent already
    assert purgatory.expire(500) == [fetch]


def test_a_debugging_consumers_fetch_is_answered_when_its_replica_goes(tmp_path):
    rs = three_replicas(tmp_path)
    follower = rs[2]
    purgatory = Purgatory()
    fetch = purgatory.consumer_fetch(500, 1, now_ms=0)
    assert not consumer_read(purgatory, fetch, follower, 0, 0, debugging=True)
    assert purgatory.changed(TP, 5) == []  # nothing moved
    assert purgatory.changed(TP, 10, gone=True) == [fetch]  # deleted, or moved away


def test_a_parked_consumer_fetch_is_answered_when_its_leader_stops_serving_it(tmp_path):
    leader = three_replicas(tmp_path)[1]
    purgatory = Purgatory()
    fetch = purgatory.consumer_fetch(500, 1, now_ms=0)
    assert not consumer_read(purgatory, fetch, leader, 0, 0)
    leader.leader = None  # as ReplicaManager.detach and stop_serving_dir do, epoch unchanged
    assert purgatory.changed(TP, 5) == [fetch]


def test_a_parked_consumer_fetch_is_answered_when_its_log_directory_fails(tmp_path):
    leader = partition_in(str(tmp_path), 1, 0, LogDirFailureChannel())
    elect([leader], leader=1, epoch=1, isr=[1, 2], replicas=[1, 2])
    purgatory = Purgatory()
    fetch = purgatory.consumer_fetch(500, 1, now_ms=0)
    assert not consumer_read(purgatory, fetch, leader, 0, 0)
    swap_fd(leader.log, os.O_RDONLY)
    refused("KAFKA_STORAGE_ERROR", leader.append_as_leader, batch(), 1, NOW)
    assert leader.offline
    assert purgatory.changed(TP, 5) == [fetch]
