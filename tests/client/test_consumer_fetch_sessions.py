"""Incremental fetch sessions (KIP-227) on ClientService's Fetch and FetchStream, and the
consumer that follows them (strom/fetch_session.py), on a real 3-node cluster whose nodes
hold one session slot each for consumers and call a session stale after EVICTION_MS
(max.incremental.fetch.session.cache.slots, min.incremental.fetch.session.eviction.ms).

On the wire: a full fetch opens a session, an incremental one is answered only the
partitions with news, a wrong epoch or an unknown id is the whole answer's error, and a
fetch without session fields stays sessionless. The consumer reads every record once, in
order, through sessions across a leader killed with SIGKILL, its session evicted by a
second consumer, and a broker restarted (its session gone when leadership comes back)."""

from __future__ import annotations

import signal
import time

import pytest

from strom.consumer import Consumer, TopicPartition
from strom_api.records import decode_batches
from strom_api.v1 import client_pb2, common_pb2, controller_pb2
from tests.client.cluster_helpers import GROUP_SETTINGS, bootstrap, create_topic, reader
from tests.data_plane.data_client import batch
from tests.node_integration.node_cluster import NodeCluster

EVICTION_MS = 1000
# Each node leads partitions of the topics here, so the replica fetch streams of the other
# two keep a session each in its cache (as Kafka's followers do), and in use a follower's
# session is never evicted for a consumer's: two slots for them, one for the consumers.
FOLLOWER_SESSIONS = 2
SESSION_SETTINGS = {
    **GROUP_SETTINGS,
    "max.incremental.fetch.session.cache.slots": str(FOLLOWER_SESSIONS + 1),
    "min.incremental.fetch.session.eviction.ms": str(EVICTION_MS),
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = NodeCluster(str(tmp_path_factory.mktemp("fetch_sessions")), 3, extra=SESSION_SETTINGS)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        yield cluster
    finally:
        cluster.stop_all()


def produce(cluster, topic: str, partition: int, count: int, start: int = 0) -> None:
    client = reader(cluster)
    values = [b"%s-%d-%d" % (topic.encode(), partition, start + i) for i in range(count)]
    for chunk in range(0, count, 50):
        deadline = time.monotonic() + 30
        while True:
            leader = client.leader(topic, partition)
            try:
                answer = client.produce_raw(
                    leader, topic, partition, batch(values[chunk : chunk + 50])
                )
            except Exception:  # the leader is changing: ask again
                answer = None
            if answer is not None and answer.error.code == 0:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)


def led_by(cluster, topic: str, partitions: int) -> dict[int, list[int]]:
    client = reader(cluster)
    out: dict[int, list[int]] = {}
    for p in range(partitions):
        out.setdefault(client.leader(topic, p), []).append(p)
    return out


def fetch_request(topic: str, offsets: dict[int, int], **session) -> client_pb2.FetchRequest:
    return client_pb2.FetchRequest(
        max_wait_ms=0,
        topics=[
            client_pb2.FetchRequest.Topic(
                name=topic,
                partitions=[
                    client_pb2.FetchRequest.Partition(
                        partition=p, fetch_offset=o, partition_max_bytes=1 << 20
                    )
                    for p, o in offsets.items()
                ],
            )
        ]
        if offsets
        else [],
        **session,
    )


def answered(response) -> dict[int, list[int]]:
    """{partition: offsets of the records answered}."""
    return {
        p.partition: [r.offset for _, rs in decode_batches(p.records) for r in rs]
        for t in response.topics
        for p in t.partitions
    }


def error_of(response) -> str:
    return str(common_pb2.ErrorCode.Name(response.error.code))


def read(consumer: Consumer, seen: dict[TopicPartition, list[int]], want: int, timeout_s=60):
    """Polls until every partition of `seen` holds `want` records (or the time is up)."""
    deadline = time.monotonic() + timeout_s
    while any(len(v) < want for v in seen.values()) and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=500).items():
            seen[tp] += [r.offset for r in records]


def assert_each_once(seen: dict[TopicPartition, list[int]], want: int) -> None:
    for tp, offsets in seen.items():
        assert offsets == list(range(want)), f"{tp}: {offsets[:5]}... ({len(offsets)} read)"


def handler(consumer: Consumer, broker: int):
    return consumer._fetcher.sessions[broker]


# --- the wire ---------------------------------------------------------------------------


def test_an_incremental_answer_leaves_out_quiet_partitions(cluster):
    create_topic(cluster, "sw", partitions=6)
    node, parts = max(led_by(cluster, "sw", 6).items(), key=lambda kv: len(kv[1]))
    assert len(parts) >= 2
    busy, quiet = parts[0], parts[1]
    for p in (busy, quiet):
        produce(cluster, "sw", p, 3)
    stub = reader(cluster).stub(node)
    time.sleep(EVICTION_MS / 1000 + 0.2)  # any earlier session of this node is stale
    full = stub.Fetch(fetch_request("sw", {busy: 0, quiet: 0}, session_epoch=0), timeout=10)
    assert error_of(full) == "NONE" and full.session_id != 0
    assert answered(full) == {busy: [0, 1, 2], quiet: [0, 1, 2]}
    session = full.session_id
    # both at their end: nothing new, nothing answered
    caught_up = {"session_id": session}
    nothing = stub.Fetch(
        fetch_request("sw", {busy: 3, quiet: 3}, session_epoch=1, **caught_up), timeout=10
    )
    assert (error_of(nothing), nothing.session_id, answered(nothing)) == ("NONE", session, {})
    produce(cluster, "sw", busy, 2, start=3)
    # no partition named: the session's cached offsets read; the quiet one left out
    news = stub.Fetch(fetch_request("sw", {}, session_epoch=2, **caught_up), timeout=10)
    assert answered(news) == {busy: [3, 4]}
    assert [p.high_watermark for t in news.topics for p in t.partitions] == [5]
    # the FetchStream follows the same session
    [streamed] = list(
        stub.FetchStream(iter([fetch_request("sw", {busy: 5}, session_epoch=3, **caught_up)]))
    )
    assert (error_of(streamed), streamed.session_id, answered(streamed)) == ("NONE", session, {})


def test_session_errors_and_sessionless_fetches(cluster):
    create_topic(cluster, "se", partitions=1)
    produce(cluster, "se", 0, 2)
    stub = reader(cluster).stub(reader(cluster).leader("se", 0))
    time.sleep(EVICTION_MS / 1000 + 0.2)
    session = stub.Fetch(fetch_request("se", {0: 0}, session_epoch=0), timeout=10).session_id
    assert session != 0
    wrong = stub.Fetch(fetch_request("se", {0: 0}, session_id=session, session_epoch=5), timeout=10)
    assert (error_of(wrong), wrong.session_id, list(wrong.topics)) == (
        "INVALID_FETCH_SESSION_EPOCH",
        0,
        [],
    )
    assert wrong.error.retriable and str(session) in wrong.error.message
    unknown = stub.Fetch(
        fetch_request("se", {0: 0}, session_id=session + 1, session_epoch=1), timeout=10
    )
    assert error_of(unknown) == "FETCH_SESSION_ID_NOT_FOUND"
    # no session fields (an older client): sessionless, in full, every time
    for _ in range(2):
        plain = stub.Fetch(fetch_request("se", {0: 0}), timeout=10)
        assert (error_of(plain), plain.session_id, answered(plain)) == ("NONE", 0, {0: [0, 1]})
    # epoch -1 closes the session named
    closed = stub.Fetch(
        fetch_request("se", {0: 0}, session_id=session, session_epoch=-1), timeout=10
    )
    assert (error_of(closed), closed.session_id) == ("NONE", 0)
    gone = stub.Fetch(fetch_request("se", {0: 2}, session_id=session, session_epoch=1), timeout=10)
    assert error_of(gone) == "FETCH_SESSION_ID_NOT_FOUND"


# --- the consumer -----------------------------------------------------------------------


def consumer(cluster, **settings) -> Consumer:
    return Consumer(
        bootstrap_servers=bootstrap(cluster),
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=2048,  # many fetches: each one a session step
        fetch_max_wait_ms=100,
        **settings,
    )


def test_the_consumer_reads_through_sessions_across_a_killed_leader(cluster):
    create_topic(cluster, "sk", partitions=3)
    for p in range(3):
        produce(cluster, "sk", p, 300)
    tps = [TopicPartition("sk", p) for p in range(3)]
    seen: dict[TopicPartition, list[int]] = {tp: [] for tp in tps}
    with consumer(cluster) as c:
        c.assign(tps)
        read(c, seen, 300)
        victim = reader(cluster).leader("sk", 0)
        assert handler(c, victim).stats.incremental_fetches > 0
        cluster.stop(victim, signal.SIGKILL)
        for p in range(3):
            produce(cluster, "sk", p, 300, start=300)
        read(c, seen, 600)
        new_leader = reader(cluster).leader("sk", 0, not_=victim)
        assert handler(c, new_leader).stats.incremental_fetches > 0
    cluster.start(victim)
    cluster.wait_for_brokers()
    assert_each_once(seen, 600)


def test_an_evicted_session_is_followed_by_full_fetches_without_a_gap(cluster):
    create_topic(cluster, "sv", partitions=6)
    node, parts = max(led_by(cluster, "sv", 6).items(), key=lambda kv: len(kv[1]))
    assert len(parts) >= 2
    first = TopicPartition("sv", parts[0])
    others = [TopicPartition("sv", p) for p in parts[:2]]
    produce(cluster, "sv", first.partition, 200)
    seen = {first: []}
    time.sleep(EVICTION_MS / 1000 + 0.2)
    with consumer(cluster) as a:
        a.assign([first])
        read(a, seen, 200)
        session = handler(a, node)
        assert session.session_id != 0 and session.stats.incremental_fetches > 0
        time.sleep(EVICTION_MS / 1000 + 0.2)  # a's session is old enough to be evicted
        with consumer(cluster) as b:
            # b's session (two partitions: worth more) takes the node's one slot
            b.assign(others)
            deadline = time.monotonic() + 20
            while session.stats.session_errors == 0 and time.monotonic() < deadline:
                b.poll(timeout_ms=100)
            assert session.stats.session_errors >= 1
            assert handler(b, node).session_id != 0
            produce(cluster, "sv", first.partition, 200, start=200)
            read(a, seen, 400)
        # b gone: its session goes stale and a's next full fetch takes the slot back
        deadline = time.monotonic() + 20
        while session.session_id == 0 and time.monotonic() < deadline:
            a.poll(timeout_ms=100)
        assert session.session_id != 0
        produce(cluster, "sv", first.partition, 200, start=400)
        read(a, seen, 600)
    assert_each_once(seen, 600)


def test_the_consumer_reads_through_sessions_across_a_broker_restart(cluster):
    create_topic(cluster, "sr", partitions=3)
    for p in range(3):
        produce(cluster, "sr", p, 200)
    tps = [TopicPartition("sr", p) for p in range(3)]
    seen: dict[TopicPartition, list[int]] = {tp: [] for tp in tps}
    time.sleep(EVICTION_MS / 1000 + 0.2)
    with consumer(cluster) as c:
        c.assign(tps)
        read(c, seen, 200)
        restarted = reader(cluster).leader("sr", 0)
        before = handler(c, restarted).session_id
        assert before != 0
        cluster.stop(restarted)  # a controlled shutdown: its leaders move away first
        for p in range(3):
            produce(cluster, "sr", p, 200, start=200)
        read(c, seen, 400)
        cluster.start(restarted)
        cluster.wait_for_brokers()
        # the preferred leader (the restarted node) takes partition 0 back
        deadline = time.monotonic() + 30
        while reader(cluster).leader("sr", 0) != restarted and time.monotonic() < deadline:
            cluster.call("ElectLeaders", controller_pb2.ElectLeadersRequest(all_partitions=True))
            time.sleep(0.5)
        for p in range(3):
            produce(cluster, "sr", p, 200, start=400)
        read(c, seen, 600)
        session = handler(c, restarted)
        # the restarted broker knew no session: the consumer opened a new one
        deadline = time.monotonic() + 20
        while session.session_id in (0, before) and time.monotonic() < deadline:
            c.poll(timeout_ms=100)
        assert session.session_id not in (0, before)
        assert session.stats.session_errors + session.stats.failed_fetches >= 1
    assert_each_once(seen, 600)


def test_closing_the_consumer_closes_its_sessions(cluster):
    create_topic(cluster, "sc", partitions=1)
    produce(cluster, "sc", 0, 10)
    tp = TopicPartition("sc", 0)
    seen: dict[TopicPartition, list[int]] = {tp: []}
    time.sleep(EVICTION_MS / 1000 + 0.2)
    with consumer(cluster) as c:
        c.assign([tp])
        read(c, seen, 10)
        node = reader(cluster).leader("sc", 0)
        session_id = handler(c, node).session_id
        assert session_id != 0
    assert_each_once(seen, 10)
    # still cached, the session would answer a wrong epoch: it is gone instead
    gone = (
        reader(cluster)
        .stub(node)
        .Fetch(fetch_request("sc", {0: 10}, session_id=session_id, session_epoch=1), timeout=10)
    )
    assert error_of(gone) == "FETCH_SESSION_ID_NOT_FOUND"
