"""Disk errors on the broker's data path, over real logs whose files are made unusable (a
segment's descriptor swapped for one opened the wrong way: the kernel answers EBADF).

- A produce whose append fails is answered KAFKA_STORAGE_ERROR, never acknowledged, and the
  idempotent producers' state is left as it was, so no later batch is taken past the gap and
  no retry is answered with another batch's offsets (found by hand: before, the OSError
  escaped as gRPC UNKNOWN with the failed batch still recorded).
- Every request for a partition whose directory failed is answered KAFKA_STORAGE_ERROR.
- A follower's fetcher applying a fetch where one partition's append fails marks that
  partition failed and applies the others (before, the OSError stopped the whole stream,
  for every partition of that leader, again at every retry).
"""

from __future__ import annotations

import os

import pytest

from broker.follower_fetch import Applied, FetchStream
from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from broker.replica_wire import response_of
from broker.replication_settings import ReplicationSettings
from storage.clock import ManualClock
from storage.log import Log
from storage.log_dir_failures import LogDirFailureChannel
from strom_api.record_batch import parse_header
from strom_api.v1 import replica_pb2
from tests.broker.test_partition import (
    NOW,
    TOPIC_ID,
    batch,
    elect,
    refused,
    topic_settings,
)
from tests.storage.test_log_dir_failures import swap_fd


def partition_in(
    log_dir: str, broker_id: int, index: int, failures: LogDirFailureChannel
) -> Partition:
    settings = topic_settings()
    log = Log.open(
        os.path.join(log_dir, f"orders-{index}"),
        settings.log,
        clock=ManualClock(NOW),
        failures=failures,
    )
    return Partition("orders", index, TOPIC_ID, log, broker_id, settings)


def test_a_failed_append_is_never_acknowledged_and_leaves_the_producers_as_they_were(
    tmp_path: os.PathLike[str],
) -> None:
    failures = LogDirFailureChannel()
    leader = partition_in(str(tmp_path), 1, 0, failures)
    elect([leader], leader=1, epoch=1, isr=[1], replicas=[1])
    first = leader.append_as_leader(batch(2, pid=7, pepoch=0, seq=0), acks=1, now_ms=NOW)
    assert (first.base_offset, first.next_offset) == (0, 2)
    entry_before = leader.producers.producers[7]
    batches_before = list(entry_before.batches)

    swap_fd(leader.log, os.O_RDONLY)
    error = refused(
        "KAFKA_STORAGE_ERROR",
        leader.append_as_leader,
        batch(3, pid=7, pepoch=0, seq=2),
        1,
        NOW,
    )
    assert "Bad file descriptor" in error.message
    assert leader.log.log_end_offset == 2
    # The failed batch (sequences 2..4) is not remembered: neither the next one (5) nor a
    # retry of it could be answered from a record that is not in the log.
    assert list(leader.producers.producers[7].batches) == batches_before
    assert failures.offline_dirs.keys() == {leader.log.log_dir}

    # The directory is offline: the next sequence, and the retry, are refused too.
    refused(
        "KAFKA_STORAGE_ERROR", leader.append_as_leader, batch(1, pid=7, pepoch=0, seq=5), 1, NOW
    )
    refused(
        "KAFKA_STORAGE_ERROR", leader.append_as_leader, batch(3, pid=7, pepoch=0, seq=2), 1, NOW
    )
    refused("KAFKA_STORAGE_ERROR", leader.read_for_consumer, 0, 1 << 20)
    refused("KAFKA_STORAGE_ERROR", leader.read_for_follower, 2, 0, 1, 1, 1 << 20, NOW)
    refused("KAFKA_STORAGE_ERROR", leader.delete_records_before, 1)
    assert leader.offline


def test_a_failed_read_answers_kafka_storage_error(tmp_path: os.PathLike[str]) -> None:
    leader = partition_in(str(tmp_path), 1, 0, LogDirFailureChannel())
    elect([leader], leader=1, epoch=1, isr=[1], replicas=[1])
    leader.append_as_leader(batch(2), acks=1, now_ms=NOW)
    swap_fd(leader.log, os.O_WRONLY)
    refused("KAFKA_STORAGE_ERROR", leader.read_for_consumer, 0, 1 << 20)
    refused("KAFKA_STORAGE_ERROR", leader.check_leader)


def fetch_answer(leader: Partition, follower: Partition) -> object:
    """The leader's answer to the follower, as the replication stream carries it."""
    read = leader.read_for_follower(follower.broker_id, 0, -1, leader.leader_epoch, 1 << 20, NOW)
    return replica_pb2.ReplicaFetchResponse.Partition(
        topic_id=TOPIC_ID,
        partition=leader.index,
        high_watermark=read.high_watermark,
        log_start_offset=read.log_start_offset,
        log_end_offset=read.log_end_offset,
        records=read.records,
    )


def test_one_partition_failing_on_a_follower_does_not_stall_the_others(
    tmp_path: os.PathLike[str],
) -> None:
    leader_dir, follower_dirs = str(tmp_path / "leader"), [str(tmp_path / d) for d in "ab"]
    leaders = [partition_in(leader_dir, 1, i, LogDirFailureChannel()) for i in (0, 1)]
    failures = LogDirFailureChannel()
    followers = [partition_in(follower_dirs[i], 2, i, failures) for i in (0, 1)]
    for i in (0, 1):
        elect([leaders[i], followers[i]], leader=1, epoch=1)
        leaders[i].append_as_leader(batch(3), acks=1, now_ms=NOW)
    config = ReplicaConfig()
    stream = FetchStream((1, 0), "127.0.0.1:1", 2, config, ReplicationSettings(2, config))
    for p in followers:
        stream.add(p)
    request = stream.next_fetch(0, broker_epoch=1)
    assert request is not None
    response = replica_pb2.ReplicaFetchResponse(
        partitions=[fetch_answer(leaders[i], followers[i]) for i in (0, 1)]
    )

    swap_fd(followers[0].log, os.O_RDONLY)  # the first partition in the answer fails
    answered = stream.answered(request.correlation_id, response_of(response), 0)

    assert [o.applied for o in answered.outcomes] == [Applied.FAILED, Applied.APPENDED]
    assert followers[1].log.log_end_offset == 3, "the healthy partition was not applied"
    assert parse_header(followers[1].log.read(0, 1 << 20)).record_count == 3
    assert (followers[0].topic_id, 0) not in stream.partitions, "the bad one is still fetched"
    assert (followers[1].topic_id, 1) in stream.partitions
    assert stream.failed == 1
    assert followers[0].offline and followers[0].log.log_end_offset == 0
    with pytest.raises(Exception, match="offline"):
        followers[0].log.read(0, 100)
