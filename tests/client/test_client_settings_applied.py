"""Client settings that the code applies but no other test showed taking effect, each
checked by what a user sees against a real 3-node cluster: the consumer's
key_deserializer, exclude_internal_topics with a pattern subscription, fetch_min_bytes with
fetch_max_wait_ms (the broker's long poll), fetch_max_bytes (how much one fetch answer
carries), and the producer's custom partitioner. A setting accepted and then dropped on its
way to where it acts would leave the client working at its default, which the neighbouring
tests cannot tell apart; each test here fails if its setting is ignored."""

from __future__ import annotations

import json
import time

from strom.consumer import Consumer, TopicPartition
from strom.partitioner import partition_for_key
from strom.producer import Producer
from tests.client.cluster_helpers import bootstrap, create_topic

MiB = 1024 * 1024


def produce_one_batch_each(cluster, topic, values, keys=None):
    """Each record waited for before the next is sent, so each is a batch of its own (the
    unit a fetch answer carries whole)."""
    keys = keys or [None] * len(values)
    with Producer(bootstrap(cluster)) as producer:
        return [
            producer.send(topic, value, key=key, partition=0).get(timeout=10)
            for value, key in zip(values, keys, strict=True)
        ]


def first_records(consumer, timeout_s=15.0):
    """Polls until a poll returns records; returns them (empty: none came in time)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=500)
        if batches:
            return [r for records in batches.values() for r in records]
    return []


def test_key_deserializer_turns_the_keys_read_back_into_objects(cluster):
    create_topic(cluster, "keyed", partitions=1)
    keys = [json.dumps({"user": i}).encode() for i in range(3)]
    produce_one_batch_each(cluster, "keyed", [b"a", b"b", b"c", b"keyless"], [*keys, None])
    # No value_deserializer: the keys alone must decide that records are deserialized.
    with Consumer(
        "keyed",
        bootstrap_servers=bootstrap(cluster),
        auto_offset_reset="earliest",
        consumer_timeout_ms=1500,
        key_deserializer=json.loads,
    ) as consumer:
        records = list(consumer)
    assert [(r.key, r.value) for r in records] == [
        ({"user": 0}, b"a"),
        ({"user": 1}, b"b"),
        ({"user": 2}, b"c"),
        (None, b"keyless"),  # a record without a key keeps None, as in Kafka
    ]


def test_a_pattern_subscription_takes_internal_topics_only_when_not_excluded(cluster):
    """`__consumer_offsets` exists once a group has committed; a pattern that matches it
    and user topics takes only the user topics by default (Kafka's
    exclude.internal.topics=true), all of them when exclude_internal_topics=False. Internal
    is what the metadata says (is_internal), not a name's "__": a user's `__audit_...` topic
    is taken either way, as Kafka's consumer takes it."""
    create_topic(cluster, "mirror_consumer_offsets", partitions=2)
    create_topic(cluster, "__audit_consumer_offsets", partitions=1)
    with Consumer(bootstrap_servers=bootstrap(cluster), group_id="makes-offsets-topic") as c:
        c.commit({TopicPartition("mirror_consumer_offsets", 0): 0})
    pattern = r".*_consumer_offsets"
    user = {TopicPartition("mirror_consumer_offsets", p) for p in range(2)}
    user.add(TopicPartition("__audit_consumer_offsets", 0))
    with Consumer(bootstrap_servers=bootstrap(cluster)) as consumer:
        consumer.subscribe(pattern=pattern)
        assert consumer.subscription() == {"mirror_consumer_offsets", "__audit_consumer_offsets"}
        assert consumer.assignment() == user
    with Consumer(bootstrap_servers=bootstrap(cluster), exclude_internal_topics=False) as consumer:
        consumer.subscribe(pattern=pattern)
        assert consumer.subscription() == {
            "mirror_consumer_offsets",
            "__audit_consumer_offsets",
            "__consumer_offsets",
        }
        # offsets.topic.num.partitions is 5 on the test cluster (GROUP_SETTINGS).
        internal = {TopicPartition("__consumer_offsets", p) for p in range(5)}
        assert consumer.assignment() == user | internal


def test_fetch_min_bytes_holds_the_answer_until_fetch_max_wait_ms(cluster):
    """The broker answers a fetch once it has fetch_min_bytes, else after
    fetch_max_wait_ms: a few bytes under a 1 MiB minimum come only after the 1.5 s wait,
    while a 1-byte minimum gets them at once. Only a lower bound on the wait is asserted
    (a loaded machine may be slow, never early); 1.0 s also tells 1.5 s from the 0.5 s
    default fetch_max_wait_ms."""
    create_topic(cluster, "trickle", partitions=1)
    produce_one_batch_each(cluster, "trickle", [b"few bytes"])

    def seconds_to_first_records(min_bytes):
        started = time.monotonic()
        with Consumer(
            "trickle",
            bootstrap_servers=bootstrap(cluster),
            auto_offset_reset="earliest",
            fetch_min_bytes=min_bytes,
            fetch_max_wait_ms=1500,
        ) as consumer:
            records = first_records(consumer)
            elapsed = time.monotonic() - started
        assert [r.value for r in records] == [b"few bytes"]
        return elapsed

    prompt = seconds_to_first_records(1)
    held = seconds_to_first_records(MiB)
    assert held >= 1.0, held
    assert prompt < held, (prompt, held)


def test_fetch_max_bytes_limits_one_fetch_answer_to_its_first_batch(cluster):
    """KIP-74: a fetch answer carries at most fetch_max_bytes, but at least the first batch,
    so a consumer never stalls. With a 1-byte limit each answer carries one batch; with a
    minimum no answer reaches (fetch_min_bytes), the broker holds each for the whole
    fetch_max_wait_ms, so the first poll that returns records returns only the first one,
    and reading the three takes three waits. (With the default 50 MiB limit one answer
    would carry all three, after one wait.) The three waits are a lower bound on the time,
    which a slow machine cannot break."""
    create_topic(cluster, "bulky", partitions=1)
    values = [bytes([ord("a") + i]) * 2000 for i in range(3)]
    produce_one_batch_each(cluster, "bulky", values)
    wait_s = 0.8
    started = time.monotonic()
    with Consumer(
        "bulky",
        bootstrap_servers=bootstrap(cluster),
        auto_offset_reset="earliest",
        fetch_min_bytes=MiB,
        fetch_max_wait_ms=int(wait_s * 1000),
        fetch_max_bytes=1,
    ) as consumer:
        first = first_records(consumer)
        records = list(first)
        while len(records) < 3:
            more = first_records(consumer)
            assert more, records
            records += more
        elapsed = time.monotonic() - started
    assert [r.value for r in first] == values[:1]
    assert [r.value for r in records] == values
    assert elapsed >= 2 * wait_s, elapsed  # 3 waits of 0.8 s; one wait without the limit


def test_a_custom_partitioner_decides_each_records_partition(cluster):
    """partitioner(key_bytes, all_partitions, available_partitions) -> partition, Kafka's
    partitioner.class as kafka-python takes it: it decides keyed and keyless records alike,
    where murmur2 and the sticky partitioner would otherwise."""
    create_topic(cluster, "routed", partitions=3)
    calls = []

    def by_last_digit(key, all_partitions, available):
        calls.append((key, all_partitions, available))
        return 2 if key is None else int(key[-1:]) % len(all_partitions)

    keys = [b"k%d" % i for i in range(9)]
    # Not what Kafka's default partitioner would pick, or the test would prove nothing.
    assert [partition_for_key(k, 3) for k in keys] != [i % 3 for i in range(9)]
    with Producer(bootstrap(cluster), partitioner=by_last_digit) as producer:
        futures = [producer.send("routed", b"v%d" % i, key=k) for i, k in enumerate(keys)]
        futures += [producer.send("routed", b"keyless-%d" % i) for i in range(3)]
        sent = [f.get(timeout=10) for f in futures]
    assert [m.partition for m in sent] == [i % 3 for i in range(9)] + [2, 2, 2]
    assert [c[0] for c in calls] == [*keys, None, None, None]
    # The available partitions (those with a leader) are a subset of all of them.
    assert all(c[1] == [0, 1, 2] and set(c[2]) <= {0, 1, 2} for c in calls), calls
    # The records are where the producer said: read back per partition.
    with Consumer(
        "routed",
        bootstrap_servers=bootstrap(cluster),
        auto_offset_reset="earliest",
        consumer_timeout_ms=1500,
    ) as consumer:
        read = {(r.partition, r.value) for r in consumer}
    assert read == {(i % 3, b"v%d" % i) for i in range(9)} | {
        (2, b"keyless-%d" % i) for i in range(3)
    }
