"""Incremental fetch sessions (KIP-227) on the Kafka listener (issue 20), through the
broker's session cache (broker/fetch_sessions.py): raw Fetch frames open a session, follow
it incrementally (only partitions with news answered), forget partitions, close it, and
are refused a wrong epoch (also a long poll overtaken by the next epoch), an unknown id or
a topic-id mismatch; node 3 runs with one session slot for consumers and a 2 s eviction
time (max.incremental.fetch.session.cache.slots, min.incremental.fetch.session.eviction.ms).
kafka-python's consumer, whose FetchSessionHandler sends incremental fetches, reads a
multi-partition topic through sessions across a partition leader's death without skipping
or repeating a record."""

from __future__ import annotations

import dataclasses
import signal
import time

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from strom_api.records import decode_batches
from tests.kafka_listener.data_helpers import (
    FETCH,
    batch,
    fetch_request,
    kafka_address,
    kafka_topic,
    leaders,
    produce_request,
    send,
    topic_id,
)
from tests.kafka_listener.kafka_cluster import (
    KafkaCluster,
    connect,
    decode_response,
    read_frame,
    request_frame,
)
from tests.node_integration.node_cluster import wait_until

LIMITED_NODE = 3  # one session slot for consumers, sessions stale after EVICTION_MS idle
EVICTION_MS = 2000
# The replica fetch streams of nodes 1 and 2 to node 3 (which leads some partitions of the
# topics here) keep a session each in the same cache, as Kafka's followers do: two slots.
FOLLOWER_SESSIONS = 2


class SessionCluster(KafkaCluster):
    def _write_config(self, node: int) -> None:
        super()._write_config(node)
        if node == LIMITED_NODE:
            with open(self.config_path(node), "a") as f:
                f.write(
                    f"max.incremental.fetch.session.cache.slots={FOLLOWER_SESSIONS + 1}\n"
                    f"min.incremental.fetch.session.eviction.ms={EVICTION_MS}\n"
                )


CLUSTER = SessionCluster  # conftest.py's cluster fixture makes this one


@pytest.fixture(scope="module")
def placed(cluster) -> tuple[int, int, int]:
    """A node other than LIMITED_NODE and two partitions it leads: one of topic "sa", one
    of "sb" (6 partitions each, so a node leads some of both), each holding 3 records."""
    kafka_topic(cluster, "sa", 6)
    kafka_topic(cluster, "sb", 6)
    a, b = leaders(cluster, "sa"), leaders(cluster, "sb")
    assert a is not None and b is not None
    for node in (n for n in cluster.ids if n != LIMITED_NODE):
        pa = [p for p, leader in a.items() if leader == node]
        pb = [p for p, leader in b.items() if leader == node]
        if pa and pb:
            produced(cluster, node, [("sa", pa[0]), ("sb", pb[0])], b"x", b"y", b"z")
            return node, pa[0], pb[0]
    pytest.fail(f"no node leads partitions of both topics: {a} {b}")


def produced(cluster, node: int, partitions, *values: bytes) -> None:
    request = produce_request(9, [(t, p, batch(*values)) for t, p in partitions])
    [frame] = send(kafka_address(cluster, node), (request, 1))
    assert frame is not None
    for topic in decode_response(frame, 0, 9)[1].responses:
        assert [p.error_code for p in topic.partition_responses] == [ErrorCode.none]


def fetched(cluster, node, version, topics, session_id, epoch, forgotten=()):
    """One Fetch of `version` to `node`: topics as [(topic, [(partition, offset)])],
    forgotten as [(topic, [partitions])]."""
    request = fetch_request(
        version, topics, session_id=session_id, session_epoch=epoch, max_wait_ms=0
    )
    if forgotten:
        module = __import__(type(request).__module__, fromlist=["ForgottenTopic"])
        key = "topic_id" if version >= 13 else "topic"
        request = dataclasses.replace(
            request,
            forgotten_topics_data=tuple(
                module.ForgottenTopic(**{key: t}, partitions=tuple(i32(p) for p in ps))
                for t, ps in forgotten
            ),
        )
    [frame] = send(kafka_address(cluster, node), (request, 5))
    assert frame is not None
    return decode_response(frame, FETCH, version)[1]


def answered(response, version: int = 12) -> dict:
    """{(topic, partition): (error, high watermark, offsets of the records)}."""
    out = {}
    for topic in response.responses:
        name = topic.topic_id if version >= 13 else topic.topic
        for p in topic.partitions:
            offsets = [r.offset for _, b in decode_batches(p.records) for r in b]
            out[(name, int(p.partition_index))] = (p.error_code, int(p.high_watermark), offsets)
    return out


def test_a_full_fetch_opens_a_session_that_incremental_fetches_follow(cluster, placed):
    node, pa, pb = placed
    full = fetched(cluster, node, 12, [("sa", [(pa, 0)]), ("sb", [(pb, 0)])], 0, 0)
    assert full.error_code == ErrorCode.none
    session = int(full.session_id)
    assert session != 0
    assert answered(full) == {
        ("sa", pa): (ErrorCode.none, 3, [0, 1, 2]),
        ("sb", pb): (ErrorCode.none, 3, [0, 1, 2]),
    }
    # sa read to its end; sb not named: the session still reads it from offset 0
    first = fetched(cluster, node, 12, [("sa", [(pa, 3)])], session, 1)
    assert (first.error_code, first.session_id) == (ErrorCode.none, session)
    assert answered(first) == {("sb", pb): (ErrorCode.none, 3, [0, 1, 2])}
    # both at their ends, nothing new: an empty answer
    second = fetched(cluster, node, 12, [("sb", [(pb, 3)])], session, 2)
    assert (second.error_code, second.session_id, second.responses) == (
        ErrorCode.none,
        session,
        (),
    )
    # a record arrives in sa: the session's cached offset reads it, unnamed
    produced(cluster, node, [("sa", pa)], b"w")
    third = fetched(cluster, node, 12, [], session, 3)
    assert answered(third) == {("sa", pa): (ErrorCode.none, 4, [3])}
    # the partition that answered records went to the end of the session's order
    fourth = fetched(cluster, node, 12, [("sa", [(pa, 0)]), ("sb", [(pb, 0)])], session, 4)
    assert [(t.topic, t.partitions[0].partition_index) for t in fourth.responses] == [
        ("sb", pb),
        ("sa", pa),
    ]


def test_forgotten_partitions_leave_the_session_and_forgetting_all_closes_it(cluster, placed):
    node, pa, pb = placed
    full = fetched(cluster, node, 12, [("sa", [(pa, 0)]), ("sb", [(pb, 0)])], 0, 0)
    session = int(full.session_id)
    ends = {k: v[1] for k, v in answered(full).items()}
    moved = fetched(cluster, node, 12, [("sa", [(pa, ends["sa", pa])])], session, 1, [("sb", [pb])])
    assert answered(moved) == {}  # sa at its end, sb gone (though it has records at 0)
    produced(cluster, node, [("sb", pb)], b"v")  # news in a forgotten partition
    assert fetched(cluster, node, 12, [], session, 2).responses == ()
    # forgetting the last partition closes the session: answered sessionless
    closed = fetched(cluster, node, 12, [], session, 3, [("sa", [pa])])
    assert (closed.error_code, closed.session_id, closed.responses) == (ErrorCode.none, 0, ())
    gone = fetched(cluster, node, 12, [], session, 4)
    assert (gone.error_code, gone.session_id) == (ErrorCode.fetch_session_id_not_found, 0)


def test_a_wrong_epoch_or_an_unknown_id_is_refused(cluster, placed):
    node, pa, _ = placed
    session = int(fetched(cluster, node, 12, [("sa", [(pa, 0)])], 0, 0).session_id)
    for epoch in (2, 7):  # the session expects 1
        wrong = fetched(cluster, node, 12, [("sa", [(pa, 0)])], session, epoch)
        assert (wrong.error_code, wrong.session_id, wrong.responses) == (
            ErrorCode.invalid_fetch_session_epoch,
            0,
            (),
        )
    # a refused epoch leaves the session as it was
    assert fetched(cluster, node, 12, [], session, 1).error_code == ErrorCode.none
    unknown = fetched(cluster, node, 12, [("sa", [(pa, 0)])], session ^ 0x5A5A, 1)
    assert (unknown.error_code, unknown.session_id, unknown.responses) == (
        ErrorCode.fetch_session_id_not_found,
        0,
        (),
    )


def test_the_final_epoch_closes_a_session_and_answers_in_full(cluster, placed):
    node, pa, _ = placed
    session = int(fetched(cluster, node, 12, [("sa", [(pa, 0)])], 0, 0).session_id)
    final = fetched(cluster, node, 12, [("sa", [(pa, 0)])], session, -1)
    assert (final.error_code, final.session_id) == (ErrorCode.none, 0)
    assert answered(final)[("sa", pa)][0] == ErrorCode.none
    after = fetched(cluster, node, 12, [], session, 1)
    assert after.error_code == ErrorCode.fetch_session_id_not_found
    # and a full fetch naming a session closes it and opens another
    one = int(fetched(cluster, node, 12, [("sa", [(pa, 0)])], 0, 0).session_id)
    other = int(fetched(cluster, node, 12, [("sa", [(pa, 0)])], one, 0).session_id)
    assert other not in (0, one)
    assert fetched(cluster, node, 12, [], one, 1).error_code == ErrorCode.fetch_session_id_not_found


def test_a_fetch_overtaken_by_the_next_epoch_is_answered_invalid_epoch(cluster, placed):
    """Kafka's IncrementalFetchContext: a long-polling fetch whose session moved on while
    it waited (the next epoch came on another connection: a duplicate or retried request)
    is answered INVALID_FETCH_SESSION_EPOCH, naming the session, with no partitions."""
    node, pa, _ = placed
    full = fetched(cluster, node, 12, [("sa", [(pa, 0)])], 0, 0)
    session, hw = int(full.session_id), answered(full)[("sa", pa)][1]
    waiting = fetch_request(
        12, [("sa", [(pa, hw)])], session_id=session, session_epoch=1, max_wait_ms=3000
    )
    with connect(kafka_address(cluster, node)) as first:
        first.sendall(request_frame(waiting, 1))  # waits up to 3 s for a byte at the end
        time.sleep(0.5)
        later = fetched(cluster, node, 12, [], session, 2)
        assert (later.error_code, later.session_id) == (ErrorCode.none, session)
        frame = read_frame(first)
    assert frame is not None
    overtaken = decode_response(frame, FETCH, 12)[1]
    assert (overtaken.error_code, overtaken.session_id, overtaken.responses) == (
        ErrorCode.invalid_fetch_session_epoch,
        session,
        (),
    )


@pytest.mark.parametrize("version", [13, 16])
def test_sessions_by_topic_id(cluster, placed, version):
    node, pa, pb = placed
    a, b = topic_id(cluster, "sa"), topic_id(cluster, "sb")
    full = fetched(cluster, node, version, [(a, [(pa, 0)]), (b, [(pb, 0)])], 0, 0)
    session = int(full.session_id)
    assert session != 0
    ends = {k: v[1] for k, v in answered(full, version).items()}
    assert set(ends) == {(a, pa), (b, pb)}
    moved = fetched(cluster, node, version, [(a, [(pa, ends[a, pa])])], session, 1, [(b, [pb])])
    assert (moved.error_code, moved.session_id, moved.responses) == (ErrorCode.none, session, ())
    produced(cluster, node, [("sa", pa)], b"u")
    news = fetched(cluster, node, version, [], session, 2)
    [(key, (error, hw, offsets))] = answered(news, version).items()
    assert (key, error, hw, offsets) == ((a, pa), ErrorCode.none, ends[a, pa] + 1, [ends[a, pa]])
    # a session made with topic ids, asked without them (v12), as Kafka refuses it
    mixed = fetched(cluster, node, 12, [], session, 3)
    assert mixed.error_code == ErrorCode.fetch_session_topic_id_error


def test_the_slots_and_eviction_time_configured_apply(cluster, placed):
    """Node 3: one slot beside the followers'; a second session finds none while the first
    is fresh (a consumer's session never evicts a follower's in use), and takes its slot
    once the first has been idle past the eviction time."""
    time.sleep(EVICTION_MS / 1000 + 0.2)  # what earlier tests left there is stale now
    first = int(fetched(cluster, LIMITED_NODE, 12, [("sa", [(0, 0)])], 0, 0).session_id)
    assert first != 0
    refused = fetched(cluster, LIMITED_NODE, 12, [("sa", [(0, 0), (1, 0)])], 0, 0)
    assert (refused.error_code, refused.session_id) == (ErrorCode.none, 0)  # no slot
    assert len(refused.responses[0].partitions) == 2  # answered in full all the same
    time.sleep(EVICTION_MS / 1000 + 0.2)
    second = int(fetched(cluster, LIMITED_NODE, 12, [("sa", [(0, 0)])], 0, 0).session_id)
    assert second not in (0, first)
    evicted = fetched(cluster, LIMITED_NODE, 12, [], first, 1)
    assert evicted.error_code == ErrorCode.fetch_session_id_not_found
    metrics = cluster.scrape(LIMITED_NODE)
    prefix = "kafka_server_fetchsessioncache_"
    assert metrics[(prefix + "numincrementalfetchsessions", ())] == 1 + FOLLOWER_SESSIONS
    assert metrics[(prefix + "incrementalfetchsessionevictions_total", ())] >= 1


CLIENT_TOPIC = "sessions-client"
CLIENT_PARTITIONS = 4
PER_ROUND = 120  # records per round of production, keys spread over the partitions


def test_kafka_python_consumes_through_sessions_across_a_leader_death(cluster):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.consumer.fetcher import FetchSessionHandler

    kafka_topic(cluster, CLIENT_TOPIC, CLIENT_PARTITIONS)
    # (full?, session id, partitions carried, partitions in the client's session, error)
    seen_responses: list[tuple[bool, int, int, int, int]] = []
    original = FetchSessionHandler.handle_response

    def recording(handler, response):  # the client's own handler, its answers noted
        full = handler.next_metadata.is_full
        carried = sum(len(t.partitions) for t in response.responses)
        size = len(handler.session_partitions)
        seen_responses.append((full, int(response.session_id), carried, size, response.error_code))
        return original(handler, response)

    producer = KafkaProducer(
        bootstrap_servers=cluster.kafka_bootstrap(),
        acks="all",
        enable_idempotence=True,
        retries=20,
        request_timeout_ms=15_000,
        max_block_ms=30_000,
    )
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.kafka_bootstrap(),
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        max_poll_records=10,
        max_partition_fetch_bytes=512,  # many small fetches: many incremental rounds
        request_timeout_ms=15_000,
    )
    killed = None
    FetchSessionHandler.handle_response = recording
    try:
        partitions = [TopicPartition(CLIENT_TOPIC, p) for p in range(CLIENT_PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        sent = _produce(producer, CLIENT_TOPIC, 0)
        got = _consume(consumer, len(sent))
        # the leader of partition 0 dies; its partitions get other leaders
        before = leaders(cluster, CLIENT_TOPIC)
        assert before is not None
        killed = before[0]
        cluster.stop(killed, signal.SIGKILL)
        alive = next(n for n in cluster.ids if n != killed)
        wait_until(
            lambda: (leaders(cluster, CLIENT_TOPIC, alive) or {}).get(0, killed) != killed,
            30,
            "a new leader of partition 0",
        )
        sent += _produce(producer, CLIENT_TOPIC, PER_ROUND)
        got += _consume(consumer, len(sent) - len(got))
    finally:
        FetchSessionHandler.handle_response = original
        consumer.close()
        producer.close(timeout=10)
        if killed is not None:
            cluster.start(killed)
            cluster.wait_for_brokers()
    by_partition: dict[int, list[tuple[int, bytes]]] = {}
    for record in got:
        by_partition.setdefault(record.partition, []).append((record.offset, record.value))
    for p, records in by_partition.items():  # no gap, no repeat
        assert [o for o, _ in records] == list(range(len(records))), p
    assert sorted(v for records in by_partition.values() for _, v in records) == sorted(sent)
    # the broker's answers carried sessions, and incremental ones left out quiet partitions
    incremental = [r for r in seen_responses if not r[0] and r[4] == ErrorCode.none]
    assert any(session != 0 for full, session, *_ in seen_responses if full)
    assert incremental and all(session != 0 for _, session, *_ in incremental)
    assert any(carried < size for _, _, carried, size, _ in incremental)


def _produce(producer, topic: str, start: int) -> list[bytes]:
    values = [f"record-{i}".encode() for i in range(start, start + PER_ROUND)]
    futures = [producer.send(topic, v, key=v) for v in values]
    for future in futures:
        future.get(timeout=60)
    return values


def _consume(consumer, count: int, timeout_s: float = 60) -> list:
    out: list = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            out.extend(records)
    assert len(out) == count, (len(out), count)
    return out
