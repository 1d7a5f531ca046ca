"""strom.consumer.Consumer (without a group) against a real 3-node cluster: subscriptions,
assignment, seeking, offsets by time, pause/resume, poll limits, resets when records are
deleted under it, and a leader killed while it reads."""

from __future__ import annotations

import signal
import socket
import time

import pytest

from strom.consumer import Consumer, TopicPartition
from strom.errors import StromError
from strom.producer import Producer
from strom_api.v1 import client_pb2
from tests.client.cluster_helpers import bootstrap, create_topic, grow_topic, reader
from tests.node_integration.node_cluster import NodeCluster


def produce(cluster, topic, count, key=None, start=0, partition=None, **kw):
    with Producer(bootstrap(cluster), **kw) as producer:
        futures = [
            producer.send(
                topic, b"%s-%d" % (topic.encode(), start + i), key=key, partition=partition
            )
            for i in range(count)
        ]
        producer.flush()
        return [f.get(timeout=10) for f in futures]


def test_a_subscription_reads_every_partition_in_order(cluster):
    create_topic(cluster, "feed")
    sent = produce(cluster, "feed", 900)
    with Consumer(
        "feed",
        bootstrap_servers=bootstrap(cluster),
        auto_offset_reset="earliest",
        consumer_timeout_ms=1500,
    ) as consumer:
        assert consumer.assignment() == {TopicPartition("feed", p) for p in range(3)}
        records = list(consumer)
    assert len(records) == 900
    for partition in range(3):
        got = [(r.offset, r.value) for r in records if r.partition == partition]
        expected = [
            (m.offset, b"feed-%d" % i) for i, m in enumerate(sent) if m.partition == partition
        ]
        assert got == expected


def test_latest_reads_only_new_records_and_poll_respects_max_records(cluster):
    create_topic(cluster, "fresh", partitions=1)
    produce(cluster, "fresh", 10)
    with Consumer("fresh", bootstrap_servers=bootstrap(cluster)) as consumer:
        tp = TopicPartition("fresh", 0)
        assert consumer.position(tp) == 10
        produce(cluster, "fresh", 30, start=10)
        first = consumer.poll(timeout_ms=5000, max_records=7)
        assert [r.value for r in first[tp]] == [b"fresh-%d" % i for i in range(10, 17)]
        rest = []
        deadline = time.monotonic() + 10
        while len(rest) < 23 and time.monotonic() < deadline:
            rest += consumer.poll(timeout_ms=500).get(tp, [])
        assert [r.offset for r in rest] == list(range(17, 40))
        assert consumer.poll(timeout_ms=200) == {}


def test_seek_to_beginning_right_after_assign_is_not_undone_by_the_automatic_reset(cluster):
    """assign() starts the automatic reset (auto_offset_reset, latest by default) of the
    partitions without a position; a seek_to_beginning() made meanwhile is the later request
    and wins, and the fetching starts once it has its answer (before: the automatic reset's
    answer could land last and put the consumer at the end, or the fetch tasks, started
    while no partition had a position, ended and nothing restarted them: it read nothing
    for ever). Several fresh consumers, as the race depends on which answer comes first."""
    create_topic(cluster, "rewound", partitions=3)
    for p in range(3):
        produce(cluster, "rewound", 20, partition=p)
    tps = [TopicPartition("rewound", p) for p in range(3)]
    for _ in range(5):
        with Consumer(bootstrap_servers=bootstrap(cluster)) as consumer:
            consumer.assign(tps)
            consumer.seek_to_beginning()
            seen: dict[TopicPartition, list[int]] = {tp: [] for tp in tps}
            deadline = time.monotonic() + 15
            while sum(map(len, seen.values())) < 60 and time.monotonic() < deadline:
                for tp, records in consumer.poll(timeout_ms=500).items():
                    seen[tp] += [r.offset for r in records]
            assert seen == {tp: list(range(20)) for tp in tps}


def test_assign_seek_offsets_for_times_pause_and_resume(cluster):
    create_topic(cluster, "timed", partitions=2)
    base = int(time.time() * 1000) - 100_000
    with Producer(bootstrap(cluster)) as producer:
        for i in range(20):
            producer.send("timed", b"t%d" % i, partition=i % 2, timestamp_ms=base + i * 1000)
    tp0, tp1 = TopicPartition("timed", 0), TopicPartition("timed", 1)
    with Consumer(
        bootstrap_servers=bootstrap(cluster), value_deserializer=bytes.decode
    ) as consumer:
        consumer.assign([tp0, tp1])
        assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert consumer.end_offsets([tp0]) == {tp0: 10}
        # t6 (partition 0, offset 3) is the first of partition 0 at or after base + 5500.
        assert consumer.offsets_for_times({tp0: base + 5500, tp1: base + 10**9}) == {
            tp0: (3, base + 6000),
            tp1: None,
        }
        consumer.seek(tp0, 3)
        consumer.seek_to_end(tp1)
        got = consumer.poll(timeout_ms=5000)
        assert [r.value for r in got[tp0]] == [f"t{i}" for i in range(6, 20, 2)]
        assert tp1 not in got
        consumer.seek_to_beginning(tp1)
        consumer.pause(tp1)
        assert consumer.poll(timeout_ms=500) == {} and consumer.paused() == {tp1}
        consumer.resume(tp1)
        got = consumer.poll(timeout_ms=5000)
        assert [r.offset for r in got[tp1]] == list(range(10))
        with pytest.raises(StromError, match="not assigned"):
            consumer.seek(TopicPartition("timed", 5), 0)


def test_deleted_records_reset_the_position_per_auto_offset_reset(cluster):
    create_topic(cluster, "trimmed", partitions=1)
    produce(cluster, "trimmed", 10)
    client = reader(cluster)
    leader = client.leader("trimmed", 0)
    client.stub(leader).DeleteRecords(
        client_pb2.DeleteRecordsRequest(
            topics=[
                client_pb2.DeleteRecordsRequest.Topic(
                    name="trimmed",
                    partitions=[client_pb2.DeleteRecordsRequest.Partition(partition=0, offset=6)],
                )
            ]
        ),
        timeout=5,
    )
    tp = TopicPartition("trimmed", 0)
    with Consumer(bootstrap_servers=bootstrap(cluster), auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 2)  # deleted: the broker says OFFSET_OUT_OF_RANGE, earliest is 6
        records = []
        deadline = time.monotonic() + 10
        while len(records) < 4 and time.monotonic() < deadline:
            records += consumer.poll(timeout_ms=500).get(tp, [])
        assert [r.offset for r in records] == [6, 7, 8, 9]


def test_bad_settings_are_refused(cluster):
    for config, words in (
        ({"auto_offset_reset": "smallest"}, "auto_offset_reset"),
        ({"isolation_level": "serializable"}, "isolation_level"),
        ({"max_poll_records": 0}, "max_poll_records"),
        ({"metadata_max_age_ms": -1}, "metadata_max_age_ms"),
        ({"reconnect_backoff_ms": -1}, "reconnect_backoff_ms"),
    ):
        with pytest.raises(StromError, match=words):
            Consumer(bootstrap_servers=bootstrap(cluster), **config)


@pytest.mark.parametrize(("backoff_ms", "fewest", "most"), [(5000, 1, 2), (20, 4, 1000)])
def test_reconnect_backoff_spaces_a_consumers_attempts(backoff_ms, fewest, most):
    """reconnect_backoff_ms is the consumer's too (Kafka's reconnect.backoff.ms): a dead
    address is dialled about once in 1.5 s at 5 s, several times at 20 ms."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with Consumer(
        bootstrap_servers=dead,
        reconnect_backoff_ms=backoff_ms,
        reconnect_backoff_max_ms=max(backoff_ms, 200),
    ) as consumer:
        consumer.assign([TopicPartition("events", 0)])
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
        attempts = consumer._cluster.connections.attempts_refused
    assert fewest <= attempts <= most


def test_reading_goes_on_when_the_leader_is_killed(tmp_path):
    cluster = NodeCluster(str(tmp_path), 3)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        create_topic(cluster, "survive", partitions=1)
        produce(cluster, "survive", 2000)
        tp = TopicPartition("survive", 0)
        with Consumer(
            bootstrap_servers=bootstrap(cluster),
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=4096,
        ) as consumer:
            consumer.assign([tp])
            seen = []
            while len(seen) < 500:
                seen += consumer.poll(timeout_ms=1000).get(tp, [])
            cluster.stop(reader(cluster).leader("survive", 0), signal.SIGKILL)
            deadline = time.monotonic() + 60
            while len(seen) < 2000 and time.monotonic() < deadline:
                seen += consumer.poll(timeout_ms=1000).get(tp, [])
        assert [r.offset for r in seen] == list(range(2000))
    finally:
        cluster.stop_all()


def test_a_pattern_subscription_follows_new_matching_topics(cluster):
    create_topic(cluster, "metrics.cpu", partitions=2)
    create_topic(cluster, "metrics_disk", partitions=1)  # "." is a regex: must not match
    produce(cluster, "metrics.cpu", 20)
    with Consumer(
        bootstrap_servers=bootstrap(cluster),
        auto_offset_reset="earliest",
        metadata_max_age_ms=300,
    ) as consumer:
        consumer.subscribe(pattern=r"metrics\..*")
        assert consumer.subscription() == {"metrics.cpu"}
        create_topic(cluster, "metrics.mem", partitions=1)
        produce(cluster, "metrics.mem", 5)
        seen: dict[str, set[bytes]] = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(seen.get("metrics.mem", ())) < 5:
            for tp, records in consumer.poll(timeout_ms=200).items():
                seen.setdefault(tp.topic, set()).update(r.value for r in records)
        assert consumer.subscription() == {"metrics.cpu", "metrics.mem"}
        assert seen["metrics.cpu"] == {b"metrics.cpu-%d" % i for i in range(20)}
        assert seen["metrics.mem"] == {b"metrics.mem-%d" % i for i in range(5)}
        assert "metrics_disk" not in seen
        with pytest.raises(StromError, match="INVALID_CONFIG"):
            consumer.subscribe(pattern="metrics.(")
        with pytest.raises(StromError, match="INVALID_CONFIG"):
            consumer.subscribe(["a"], pattern="a")


def test_a_subscription_takes_partitions_added_within_metadata_max_age(cluster):
    create_topic(cluster, "widening", partitions=1)
    produce(cluster, "widening", 5)
    fast = Consumer(
        "widening",
        bootstrap_servers=bootstrap(cluster),
        auto_offset_reset="earliest",
        metadata_max_age_ms=500,
    )
    # The same subscription with the default metadata_max_age_ms (5 minutes): it must not
    # have looked again by the time the fast one has read everything.
    slow = Consumer("widening", bootstrap_servers=bootstrap(cluster), auto_offset_reset="earliest")
    try:
        grow_topic(cluster, "widening", 3)
        sent = []
        for partition in (0, 1, 2):  # before the consumer can know of the new partitions
            sent += produce(cluster, "widening", 4, start=10 * partition, partition=partition)
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < 5 + 12 and time.monotonic() < deadline:
            seen += [r for rs in fast.poll(timeout_ms=200).values() for r in rs]
            slow.poll()
        everything = {TopicPartition("widening", p) for p in range(3)}
        assert fast.assignment() == everything
        assert sorted((r.partition, r.offset) for r in seen) == sorted(
            [(0, o) for o in range(5)] + [(m.partition, m.offset) for m in sent]
        )
        assert slow.assignment() == {TopicPartition("widening", 0)}
    finally:
        fast.close()
        slow.close()


def test_latest_reads_every_record_written_after_the_new_partition_is_assigned(cluster):
    create_topic(cluster, "later-wide", partitions=1)
    with Consumer(
        "later-wide", bootstrap_servers=bootstrap(cluster), metadata_max_age_ms=500
    ) as consumer:
        consumer.poll()
        grow_topic(cluster, "later-wide", 3)
        everything = {TopicPartition("later-wide", p) for p in range(3)}
        deadline = time.monotonic() + 20
        while consumer.assignment() != everything and time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
        assert consumer.assignment() == everything
        sent = [m for p in (0, 1, 2) for m in produce(cluster, "later-wide", 10, partition=p)]
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < 30 and time.monotonic() < deadline:
            seen += [r for rs in consumer.poll(timeout_ms=200).values() for r in rs]
        assert sorted((r.partition, r.offset) for r in seen) == sorted(
            (m.partition, m.offset) for m in sent
        )


def test_a_pattern_subscription_takes_added_partitions_and_new_topics(cluster):
    create_topic(cluster, "gauges.a", partitions=1)
    with Consumer(
        bootstrap_servers=bootstrap(cluster), auto_offset_reset="earliest", metadata_max_age_ms=500
    ) as consumer:
        consumer.subscribe(pattern=r"gauges\..*")
        seen: list[tuple[str, int, int]] = []

        def read_all(sent):
            deadline = time.monotonic() + 20
            while len(seen) < len(sent) and time.monotonic() < deadline:
                seen.extend(
                    (r.topic, r.partition, r.offset)
                    for rs in consumer.poll(timeout_ms=200).values()
                    for r in rs
                )
            assert sorted(seen) == sorted((m.topic, m.partition, m.offset) for m in sent)

        # The matching topics stay the same: only the partition count changes.
        grow_topic(cluster, "gauges.a", 2)
        sent = produce(cluster, "gauges.a", 3, partition=1)
        read_all(sent)
        create_topic(cluster, "gauges.b", partitions=1)
        sent += produce(cluster, "gauges.b", 3)
        read_all(sent)
        assert consumer.assignment() == {
            TopicPartition("gauges.a", 0),
            TopicPartition("gauges.a", 1),
            TopicPartition("gauges.b", 0),
        }
