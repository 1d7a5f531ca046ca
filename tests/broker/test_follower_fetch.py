"""The follower's fetch rules (broker/follower_fetch.py) over real partitions, without
streams: each fetch the core asks for is answered by the leader Partition itself, as the
leader's servicer fills the answer; time is passed in by hand."""

from __future__ import annotations

import os
import zlib

import pytest

from broker.follower_fetch import (
    Applied,
    FetchRequest,
    FetchResponse,
    FetchStream,
    FollowerFetch,
    PartitionAnswer,
)
from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from broker.replication_settings import ReplicationSettings
from storage.clock import ManualClock
from storage.log import Log
from tests.broker.test_partition import NOW, TOPIC_ID, batch, elect, open_partition, topic_settings

BACKOFF_MS = 1000
CONFIG = ReplicaConfig(fetch_backoff_ms=BACKOFF_MS, fetch_wait_max_ms=500)


def new_stream(leader: int = 1) -> FetchStream:
    return FetchStream((leader, 0), f"b{leader}:9093", 2, CONFIG, ReplicationSettings(2, CONFIG))


def pair(tmp_path: os.PathLike[str]) -> tuple[Partition, Partition]:
    """Broker 1 leads epoch 1 with records 0-1 and 2 (two batches); broker 2 follows it,
    empty."""
    leader = open_partition(os.path.join(tmp_path, "b1"), 1)
    follower = open_partition(os.path.join(tmp_path, "b2"), 2)
    elect([leader, follower], leader=1, epoch=1)
    leader.append_as_leader(batch(2), acks=1, now_ms=NOW)
    leader.append_as_leader(batch(1), acks=1, now_ms=NOW)
    return leader, follower


def served(leader: Partition, request: FetchRequest) -> FetchResponse:
    """The leader's answer to `request`, as ReplicaServicer.fetch_once fills it."""
    answers = []
    for p in request.partitions:
        read = leader.read_for_follower(
            request.replica_id,
            p.fetch_offset,
            p.last_fetched_epoch,
            p.current_leader_epoch,
            p.partition_max_bytes,
            NOW,
        )
        answers.append(
            PartitionAnswer(
                p.topic_id,
                p.partition,
                records=read.records,
                high_watermark=read.high_watermark,
                log_start_offset=read.log_start_offset,
                log_end_offset=read.log_end_offset,
                diverging=read.diverging,
            )
        )
    return FetchResponse(tuple(answers))


def next_fetch(stream: FetchStream, now_ms: int = 0) -> FetchRequest:
    request = stream.next_fetch(now_ms, broker_epoch=7)
    assert request is not None
    return request


def error_answer(error: str, log_start: int = 0, log_end: int = 0) -> FetchResponse:
    return FetchResponse(
        (
            PartitionAnswer(
                TOPIC_ID, 0, error=error, log_start_offset=log_start, log_end_offset=log_end
            ),
        )
    )


def test_a_fetch_asks_from_the_log_end_and_one_is_in_flight(tmp_path: os.PathLike[str]) -> None:
    leader, follower = pair(tmp_path)
    stream = new_stream()
    stream.add(follower)
    request = next_fetch(stream)
    (asked,) = request.partitions
    assert (request.replica_id, request.broker_epoch) == (2, 7)
    assert (asked.fetch_offset, asked.last_fetched_epoch, asked.current_leader_epoch) == (0, -1, 1)
    assert stream.next_fetch(0, 7) is None, "a second fetch went out while one is in flight"
    assert stream.wake_at(0) is None

    answered = stream.answered(request.correlation_id, served(leader, request), 0)
    assert [o.applied for o in answered.outcomes] == [Applied.APPENDED]
    assert follower.log.log_end_offset == 3
    (asked,) = next_fetch(stream).partitions
    assert (asked.fetch_offset, asked.last_fetched_epoch) == (3, 1)


def test_an_answer_that_crossed_a_leader_change_is_dropped(tmp_path: os.PathLike[str]) -> None:
    leader, follower = pair(tmp_path)
    stream = new_stream()
    stream.add(follower)
    request = next_fetch(stream)
    response = served(leader, request)
    elect([follower], leader=1, epoch=2, replicas=[1, 2])  # the metadata moved meanwhile

    answered = stream.answered(request.correlation_id, response, 0)
    assert [o.applied for o in answered.outcomes] == [Applied.STALE]
    assert follower.log.log_end_offset == 0, "an answer for the old epoch was written"
    assert stream.answered(request.correlation_id, response, 0).stale, "applied twice"


def test_a_diverging_epoch_truncates_the_follower(tmp_path: os.PathLike[str]) -> None:
    b1 = open_partition(os.path.join(tmp_path, "b1"), 1)
    b2 = open_partition(os.path.join(tmp_path, "b2"), 2)
    elect([b1, b2], leader=2, epoch=1)
    b2.append_as_leader(batch(3), acks=1, now_ms=NOW)  # never reached b1
    elect([b1, b2], leader=1, epoch=2)
    b1.append_as_leader(batch(1), acks=1, now_ms=NOW)
    stream = new_stream()
    stream.add(b2)
    request = next_fetch(stream)
    assert request.partitions[0].fetch_offset == 3

    (outcome,) = stream.answered(request.correlation_id, served(b1, request), 0).outcomes
    assert outcome.applied is Applied.DIVERGED
    assert (outcome.fetch_offset, outcome.log_end_offset) == (3, 0)
    assert b2.log.log_end_offset == 0


@pytest.mark.parametrize(
    ("log_start", "log_end", "applied", "end_after"),
    [
        (10, 20, Applied.RESTARTED, 10),  # behind the leader's log start: start there
        (0, 2, Applied.TRUNCATED, 2),  # past the leader's end, no epochs to compare
        (0, 5, Applied.RESTING, 3),  # inside the leader's log: try again later
    ],
)
def test_offset_out_of_range(
    tmp_path: os.PathLike[str], log_start: int, log_end: int, applied: Applied, end_after: int
) -> None:
    leader, follower = pair(tmp_path)
    stream = new_stream()
    stream.add(follower)
    request = next_fetch(stream)
    stream.answered(request.correlation_id, served(leader, request), 0)
    request = next_fetch(stream)
    answer = error_answer("OFFSET_OUT_OF_RANGE", log_start, log_end)
    (outcome,) = stream.answered(request.correlation_id, answer, 0).outcomes
    assert outcome.applied is applied
    assert follower.log.log_end_offset == end_after


def test_a_refused_partition_rests_for_the_backoff_or_until_followed_again(
    tmp_path: os.PathLike[str],
) -> None:
    _, follower = pair(tmp_path)
    stream = new_stream()
    stream.add(follower)
    request = next_fetch(stream, now_ms=100)
    refusal = error_answer("NOT_LEADER_OR_FOLLOWER")
    answered = stream.answered(request.correlation_id, refusal, 100)
    assert [o.applied for o in answered.outcomes] == [Applied.RESTING]
    assert stream.next_fetch(100 + BACKOFF_MS - 1, 7) is None
    assert stream.wake_at(100) == 100 + BACKOFF_MS
    request = next_fetch(stream, 100 + BACKOFF_MS)

    stream.answered(request.correlation_id, error_answer("UNKNOWN_LEADER_EPOCH"), 2000)
    assert stream.next_fetch(2001, 7) is None
    stream.remove(follower)
    stream.add(follower)  # the metadata moved it: a follow clears the rest
    assert stream.next_fetch(2001, 7) is not None


def test_a_broken_stream_loses_its_fetch_and_reconnects_after_the_backoff(
    tmp_path: os.PathLike[str],
) -> None:
    leader, follower = pair(tmp_path)
    stream = new_stream()
    stream.add(follower)
    request = next_fetch(stream, now_ms=50)
    assert stream.read_timeout_ms == 500 + 30_000
    assert stream.broken(50, "read timed out") == 50 + BACKOFF_MS
    assert stream.next_fetch(60, 7) is None
    assert stream.wake_at(60) == 50 + BACKOFF_MS
    late = stream.answered(request.correlation_id, served(leader, request), 70)
    assert late.stale and follower.log.log_end_offset == 0
    again = next_fetch(stream, 50 + BACKOFF_MS)
    assert again.correlation_id != request.correlation_id

    given_up = stream.answered(
        again.correlation_id, FetchResponse(error="STALE_BROKER_EPOCH", message="old"), 2000
    )
    assert given_up.broken == "STALE_BROKER_EPOCH: old" and not given_up.outcomes


def test_a_stream_ended_to_renew_its_session_reconnects_at_once(
    tmp_path: os.PathLike[str],
) -> None:
    _, follower = pair(tmp_path)
    stream = new_stream()
    stream.add(follower)
    next_fetch(stream, now_ms=50)
    assert stream.broken(60, "UNAUTHENTICATED: the session expired", back_off=False) == 60
    again = stream.next_fetch(60, 7)
    assert again is not None and again.session_epoch == 0  # a full fetch: a new session


def test_placement_by_leader_and_hash(tmp_path: os.PathLike[str]) -> None:
    fetch = FollowerFetch(2, CONFIG, ReplicationSettings(2, ReplicaConfig(num_fetchers=3)))
    addresses: dict[int, str | None] = {1: "b1:9093", 3: None}
    partitions = []
    for i in range(4):
        settings = topic_settings()
        log = Log.open(os.path.join(tmp_path, f"p{i}"), settings.log, clock=ManualClock(NOW))
        p = Partition("orders", i, TOPIC_ID, log, 2, settings)
        elect([p], leader=1, epoch=1, replicas=[1, 2])
        partitions.append(p)
    for p in partitions:
        placed = fetch.follow(p, addresses.get)
        index = zlib.crc32(f"orders-{p.index}".encode()) % 3
        assert placed.stream is fetch.streams[1, index]
    assert sum(len(s.partitions) for s in fetch.streams.values()) == 4

    elect([partitions[0]], leader=2, epoch=2, replicas=[1, 2])  # this broker leads it now
    assert fetch.follow(partitions[0], addresses.get).stream is None
    elect([partitions[1]], leader=3, epoch=2, replicas=[3, 2])
    assert fetch.follow(partitions[1], addresses.get).no_address

    addresses[1] = "b1:9094"  # the leader came back elsewhere: a new stream takes over
    old = fetch.streams[1, zlib.crc32(b"orders-2") % 3]
    moved = fetch.follow(partitions[2], addresses.get).stream
    assert moved is not None and moved is not old and moved.address == "b1:9094"
    assert fetch.streams[moved.key] is moved

    placed = fetch.resize(1, addresses.get)
    assert {p.index for p, _ in placed} == {2, 3}
    assert list(fetch.streams) == [(1, 0)]


def test_a_partition_followed_while_a_fetch_is_out_hurries_that_fetch_once(
    tmp_path: os.PathLike[str],
) -> None:
    leader, follower = pair(tmp_path)
    stream = new_stream()
    stream.add(follower)
    assert not stream.take_hurry(), "nothing is out: the next fetch names it"
    request = next_fetch(stream)
    stream.add(follower)  # the same replica at the same epoch: the fetch out asks for it
    assert not stream.take_hurry()
    settings = topic_settings()
    log = Log.open(os.path.join(tmp_path, "b2-1"), settings.log, clock=ManualClock(NOW))
    other = Partition("orders", 1, TOPIC_ID, log, 2, settings)
    elect([other], leader=1, epoch=1)
    stream.add(other)  # a topic just created
    assert stream.take_hurry() and not stream.take_hurry(), "one hurry per fetch"
    stream.answered(request.correlation_id, served(leader, request), 0)
    assert not stream.take_hurry()
    request = next_fetch(stream)
    assert {p.partition for p in request.partitions} == {0, 1}
    elect([follower], leader=1, epoch=2)
    stream.add(follower)  # a new leader epoch: the fetch out asks at epoch 1
    assert stream.take_hurry()
    stream.add(other)
    stream.broken(0, "reset")
    assert not stream.take_hurry(), "no fetch out after a break"


def test_a_fetch_asks_the_configured_min_and_max_bytes(tmp_path: os.PathLike[str]) -> None:
    # replica.fetch.min.bytes and replica.fetch.response.max.bytes: the leader holds the
    # fetch until that much is there and answers at most that much (broker/purgatory.py,
    # ReplicaManager._read_for_follower).
    _, follower = pair(tmp_path)
    config = ReplicaConfig(fetch_min_bytes=4096, fetch_response_max_bytes=123_456)
    stream = FetchStream((1, 0), "b1:9093", 2, config, ReplicationSettings(2, config))
    stream.add(follower)
    request = next_fetch(stream)
    assert (request.min_bytes, request.max_bytes) == (4096, 123_456)
