"""Fetch sessions on the replica fetch streams (KIP-227, issue 21): the follower's core
(broker/follower_fetch.py's FetchStream) against the leader's session rules
(broker/replica_sessions.py over the broker's FetchSessionCache), over real partitions and
the product's read of a follower fetch (broker/follower_reads.py), without streams or
waits; time is passed in by hand. The long poll on a session's key is tested through
ReplicaManager at the end."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
from typing import Any

from broker.fetch_sessions import FetchSessionCache
from broker.follower_fetch import Applied, FetchRequest, FetchResponse, FetchStream
from broker.follower_reads import read_follower_fetch
from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from broker.replica_sessions import FollowerSessions
from broker.replication_quota import ReplicationQuota
from broker.replication_settings import ReplicationSettings
from storage.clock import ManualClock
from storage.log import Log
from tests.broker.test_partition import NOW, TOPIC_ID, batch, elect, topic_settings

CONFIG = ReplicaConfig(fetch_backoff_ms=1000, fetch_wait_max_ms=500, replica_lag_time_max_ms=30_000)
PARTITIONS = 3


def partition(directory: str, broker_id: int, index: int, topic_id: bytes = TOPIC_ID) -> Partition:
    settings = topic_settings()
    log = Log.open(
        os.path.join(directory, f"b{broker_id}-{index}"), settings.log, clock=ManualClock(NOW)
    )
    return Partition("orders", index, topic_id, log, broker_id, settings, 30_000)


class Pair:
    """Broker 1 leads partitions 0-2 of one topic (with a record each), broker 2 follows
    them on one stream; the leader answers through its session cache."""

    def __init__(self, tmp_path: os.PathLike[str], slots: int = 1000) -> None:
        directory = str(tmp_path)
        self.leaders = [partition(directory, 1, i) for i in range(PARTITIONS)]
        self.followers = [partition(directory, 2, i) for i in range(PARTITIONS)]
        for lead, follow in zip(self.leaders, self.followers, strict=True):
            elect([lead, follow], leader=1, epoch=1)
            lead.append_as_leader(batch(1), acks=1, now_ms=NOW)
        self.cache = FetchSessionCache(slots, 120_000, random.Random(7))
        self.sessions = FollowerSessions(self.cache)
        for lead in self.leaders:
            lead.on_change = lambda lead=lead: self.sessions.changed(lead)
        self.stream = FetchStream((1, 0), "b1", 2, CONFIG, ReplicationSettings(2, CONFIG))
        for follow in self.followers:
            self.stream.add(follow)
        self.reads: list[int] = []  # the partitions the leader read, in order
        self.now = NOW

    def serve(self, request: FetchRequest) -> FetchResponse:
        """ReplicaManager.replica_fetch without its long poll."""
        fetch = self.sessions.begin(request, self.now, self.now)
        if fetch.error is not None:
            return self.sessions.finish(fetch, [], self.now)
        by_key = {(p.topic_id, p.index): p for p in self.leaders}
        read = self.sessions.to_read(fetch)
        self.reads += [p.partition for p in read.partitions]
        answers, _ = read_follower_fetch(
            read,
            lambda topic_id, index: by_key.get((topic_id, index)),
            read.max_bytes,
            ReplicationQuota(),
            self.now,
            1,
            lambda p: None,
        )
        return self.sessions.finish(fetch, answers, self.now)

    def round(self) -> tuple[FetchRequest, FetchResponse, Any]:
        """One fetch of the stream, served and answered."""
        request = self.stream.next_fetch(self.now, broker_epoch=7)
        assert request is not None
        response = self.serve(request)
        return request, response, self.stream.answered(request.correlation_id, response, self.now)


def named(request: FetchRequest) -> list[int]:
    return [p.partition for p in request.partitions]


def carried(response: FetchResponse) -> list[int]:
    return [p.partition for p in response.partitions]


def test_a_full_fetch_opens_the_session_then_fetches_name_and_carry_only_what_changed(
    tmp_path: os.PathLike[str],
) -> None:
    pair = Pair(tmp_path)
    request, response, _ = pair.round()
    assert (request.session_id, request.session_epoch) == (0, 0)
    assert named(request) == [0, 1, 2] and carried(response) == [0, 1, 2]
    assert response.session_id != 0 and pair.stream.session_id == response.session_id
    assert [f.log.log_end_offset for f in pair.followers] == [1, 1, 1]

    # Each log end moved: named again at the new end; the leader's high watermarks move.
    request, response, _ = pair.round()
    assert request.session_epoch == 1 and named(request) == [0, 1, 2]
    assert [p.fetch_offset for p in request.partitions] == [1, 1, 1]
    assert carried(response) == [0, 1, 2]  # the high watermark moved for each
    assert [f.log.high_watermark for f in pair.followers] == [1, 1, 1]

    # The high watermarks moved during that read: the next fetch reads them once more
    # (the change arrived after they were taken), and carries nothing new.
    pair.reads.clear()
    request, response, _ = pair.round()
    assert named(request) == [] and pair.reads == [0, 1, 2] and carried(response) == []
    # Nothing changed: the fetch names nothing, the leader reads nothing, carries nothing.
    pair.reads.clear()
    request, response, _ = pair.round()
    assert request.session_epoch == 3 and named(request) == [] and request.forgotten == ()
    assert pair.reads == [] and carried(response) == []

    # Records arrive on partition 1 only: the leader reads it alone and carries it.
    pair.leaders[1].append_as_leader(batch(2), acks=1, now_ms=NOW)
    request, response, answered = pair.round()
    assert named(request) == [] and pair.reads == [1] and carried(response) == [1]
    assert [o.applied for o in answered.outcomes] == [Applied.APPENDED]
    assert [f.log.log_end_offset for f in pair.followers] == [1, 3, 1]
    request, _, _ = pair.round()
    assert named(request) == [1] and request.partitions[0].fetch_offset == 3


def test_a_partition_no_longer_followed_is_forgotten_and_one_followed_again_named(
    tmp_path: os.PathLike[str],
) -> None:
    pair = Pair(tmp_path)
    pair.round()
    pair.round()
    pair.stream.remove(pair.followers[2])
    request, _, _ = pair.round()
    assert named(request) == [] and request.forgotten == ((TOPIC_ID, 2),)
    session = pair.cache.get(pair.stream.session_id)
    assert session is not None and sorted(k[1] for k in session.partitions) == [0, 1]
    pair.leaders[2].append_as_leader(batch(1), acks=1, now_ms=NOW)  # not its session's now
    pair.reads.clear()
    pair.round()
    assert pair.reads == []
    pair.stream.add(pair.followers[2])
    request, response, _ = pair.round()
    assert named(request) == [2] and carried(response) == [2]
    assert pair.followers[2].log.log_end_offset == 2


def test_a_session_the_leader_lost_is_started_over_with_a_full_fetch(
    tmp_path: os.PathLike[str],
) -> None:
    pair = Pair(tmp_path)
    pair.round()
    lost = pair.stream.session_id
    pair.cache = FetchSessionCache(1000, 120_000, random.Random(8))  # the leader restarted
    pair.sessions = FollowerSessions(pair.cache)
    request, response, answered = pair.round()
    assert request.session_id == lost and request.session_epoch == 1
    assert response.error == "FETCH_SESSION_ID_NOT_FOUND" and not answered.broken
    assert answered.outcomes == ()
    request, response, _ = pair.round()
    assert (request.session_id, request.session_epoch) == (0, 0)
    assert named(request) == [0, 1, 2] and response.session_id not in (0, lost)


def test_a_broken_stream_starts_over_closing_its_session(tmp_path: os.PathLike[str]) -> None:
    pair = Pair(tmp_path)
    pair.round()
    old = pair.stream.session_id
    request = pair.stream.next_fetch(pair.now, broker_epoch=7)
    assert request is not None and request.session_epoch == 1
    pair.serve(request)  # answered by the leader, lost on the way back
    pair.stream.broken(pair.now, "reset")
    pair.now += CONFIG.fetch_backoff_ms
    request, response, _ = pair.round()
    assert (request.session_id, request.session_epoch) == (old, 0)  # closes it
    assert named(request) == [0, 1, 2] and pair.cache.get(old) is None
    assert response.session_id not in (0, old)


def test_without_a_free_slot_every_fetch_is_a_full_one(tmp_path: os.PathLike[str]) -> None:
    pair = Pair(tmp_path, slots=0)
    for _ in range(3):
        request, response, _ = pair.round()
        assert (request.session_epoch, response.session_id) == (0, 0)
        assert named(request) == [0, 1, 2]
    assert [f.log.log_end_offset for f in pair.followers] == [1, 1, 1]


def test_an_answer_dropped_as_stale_has_its_partition_named_again(
    tmp_path: os.PathLike[str],
) -> None:
    pair = Pair(tmp_path)
    pair.round()
    pair.round()
    pair.leaders[0].append_as_leader(batch(1), acks=1, now_ms=NOW)
    request = pair.stream.next_fetch(pair.now, broker_epoch=7)
    assert request is not None and named(request) == []
    response = pair.serve(request)
    assert carried(response) == [0]
    # The follower's log moved while the fetch was out (as a truncation would): dropped.
    pair.followers[0].truncate_to(0)
    answered = pair.stream.answered(request.correlation_id, response, pair.now)
    assert [o.applied for o in answered.outcomes] == [Applied.STALE]
    request, response, _ = pair.round()
    assert named(request) == [0] and request.partitions[0].fetch_offset == 0
    assert carried(response) == [0] and pair.followers[0].log.log_end_offset == 2


def test_records_left_out_by_the_fetch_max_bytes_are_read_next_time(
    tmp_path: os.PathLike[str],
) -> None:
    pair = Pair(tmp_path)
    pair.round()
    pair.round()
    for lead in pair.leaders:
        lead.append_as_leader(batch(1, size=400), acks=1, now_ms=NOW)
    request = pair.stream.next_fetch(pair.now, broker_epoch=7)
    assert request is not None
    small = dataclasses.replace(request, max_bytes=1)
    response = pair.serve(small)  # the first partition's batch spends the budget
    pair.stream.answered(request.correlation_id, response, pair.now)
    pair.reads.clear()
    pair.round()
    assert 1 in pair.reads and 2 in pair.reads  # pending: read again though unchanged
    pair.round()
    assert [f.log.log_end_offset for f in pair.followers] == [2, 2, 2]


def test_a_follower_of_an_idle_partition_stays_in_the_isr(tmp_path: os.PathLike[str]) -> None:
    """The session does not read an idle partition, so the leader does not see the
    follower fetch it; records that arrive after replica.lag.time.max.ms must not find the
    follower lagging (Kafka reads every partition of a session at each fetch)."""
    pair = Pair(tmp_path)
    for _ in range(3):  # copied, high watermark moved, read once more
        pair.round()
    lead = pair.leaders[0]
    assert lead.isr == (1, 2)
    for _ in range(5):  # a minute of fetches with nothing new
        pair.now += 12_000
        pair.reads.clear()
        pair.round()
        assert pair.reads == []
    assert lead.isr_change_needed(pair.now, lambda broker: True) is None  # log ends equal
    lead.append_as_leader(batch(1), acks=1, now_ms=pair.now)
    assert lead.isr_change_needed(pair.now + 1, lambda broker: True) is None, (
        "the follower was taken for one that stopped fetching"
    )


def test_a_follower_that_stopped_fetching_leaves_the_isr_once_records_arrive(
    tmp_path: os.PathLike[str],
) -> None:
    pair = Pair(tmp_path)
    pair.round()
    pair.round()
    lead = pair.leaders[0]
    pair.now += 60_000  # no fetch for a minute
    lead.append_as_leader(batch(1), acks=1, now_ms=pair.now)
    change = lead.isr_change_needed(pair.now + 1, lambda broker: True)
    assert change is not None and change.removed == (2,)


# --- the long poll, through ReplicaManager ------------------------------------------------------


def test_an_incremental_fetch_waits_on_its_session_and_wakes_on_a_change(
    tmp_path: os.PathLike[str],
) -> None:
    from tests.broker.test_replica_manager_waits import KEY, leading

    manager, lead = leading(tmp_path, [1, 2])
    reads: list[int] = []
    read = lead.read_for_follower

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(args[1])
        return read(*args, **kwargs)

    lead.read_for_follower = counted  # type: ignore[method-assign]
    config = ReplicaConfig(fetch_wait_max_ms=5_000)
    follower = partition(str(tmp_path), 2, 0, lead.topic_id)
    elect([follower], leader=1, epoch=1, replicas=[1, 2])
    stream = FetchStream((1, 0), "b1", 2, config, ReplicationSettings(2, config))
    stream.add(follower)

    async def fetch() -> Any:
        request = stream.next_fetch(NOW, 1)
        assert request is not None
        response = await manager.replica_fetch(request)
        return request, stream.answered(request.correlation_id, response, NOW)

    async def scenario() -> None:
        lead.append_as_leader(batch(2), 1, NOW)
        await fetch()  # full: copies the batch, opens the session
        await fetch()  # at the log end: the high watermark moves
        reads.clear()
        poll = asyncio.create_task(fetch())
        await asyncio.sleep(0.05)
        assert not poll.done() and reads == [], "an idle partition was read"
        assert not manager.purgatory.watched(KEY), "parked on the partition, not the session"
        lead.append_as_leader(batch(1), 1, NOW)
        request, answered = await asyncio.wait_for(poll, 1)
        assert request.partitions == () and reads == [2]
        assert [o.applied for o in answered.outcomes] == [Applied.APPENDED]
        assert follower.log.log_end_offset == 3
        assert manager.purgatory.parked() == []
        await manager.stop()

    asyncio.run(scenario())
