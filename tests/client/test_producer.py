"""strom.producer.Producer against a real 3-node cluster: batching, Kafka's partitioning,
futures and callbacks, errors that name Kafka's error, and idempotent retries across a
kill -9 of partition leaders that neither lose, duplicate nor reorder a record."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from strom.consumer import Consumer
from strom.errors import StromError
from strom.partitioner import partition_for_key
from strom.producer import Producer
from strom_api import compression
from strom_api.records import decode_batches
from tests.client.cluster_helpers import bootstrap, create_topic, reader
from tests.node_integration.node_cluster import NodeCluster


def test_records_are_batched_partitioned_like_kafka_and_read_back(cluster):
    create_topic(cluster, "orders")
    with Producer(bootstrap(cluster), linger_ms=10) as producer:
        futures = [
            producer.send("orders", b"value-%d" % i, key=b"user-%d" % (i % 7) if i % 3 else None)
            for i in range(3000)
        ]
        producer.flush()
        results = [f.get(timeout=10) for f in futures]
        assert producer._sender.requests_sent < 300  # batched, not one request per record
    for i, meta in enumerate(results):
        if i % 3:
            assert meta.partition == partition_for_key(b"user-%d" % (i % 7), 3)
        assert meta.topic == "orders" and meta.serialized_value_size == len(b"value-%d" % i)
    client = reader(cluster)
    for partition in range(3):
        records = client.read_all("orders", partition)
        mine = [m for m in results if m.partition == partition]
        assert sorted(m.offset for m in mine) == list(range(len(mine)))
        by_offset = {m.offset: i for i, m in enumerate(results) if m.partition == partition}
        assert [r.value for r in records] == [b"value-%d" % by_offset[r.offset] for r in records]


def test_a_partitions_ready_batches_share_a_request_and_get_their_own_offsets(cluster):
    create_topic(cluster, "packed", partitions=1)
    with Producer(bootstrap(cluster), batch_size=300, linger_ms=50) as producer:
        # One record first: until the leader has the new topic in its metadata it answers
        # UNKNOWN_TOPIC_OR_PARTITION, and each retry would be a request of its own.
        assert producer.send("packed", b"first").get(timeout=30).offset == 0
        before = producer._sender.requests_sent
        futures = [producer.send("packed", b"record-%04d" % i) for i in range(400)]
        producer.flush()
        offsets = [f.get(timeout=10).offset for f in futures]
        # About 13 records a batch, 31 batches: far fewer requests than batches.
        assert producer._sender.requests_sent - before <= 15
    assert offsets == list(range(1, 401))
    records = reader(cluster).read_all("packed", 0)
    assert [r.value for r in records] == [b"first"] + [b"record-%04d" % i for i in range(400)]


def test_a_batch_refused_beside_others_fails_alone(cluster):
    """The leader refuses a partition's batches of one request together; the one too
    large for max.message.bytes fails, the others, sent again alone, are written."""
    create_topic(cluster, "refused-together", partitions=1, **{"max.message.bytes": "700"})
    with Producer(bootstrap(cluster), batch_size=300, linger_ms=20) as producer:
        sizes: list[int] = []  # batches per request
        produce_once = producer._sender._produce_once

        async def counted(leader, batches):
            sizes.append(len(batches))
            await produce_once(leader, batches)

        producer._sender._produce_once = counted
        # The I/O thread's loop held while the records are added, so that full batches wait
        # and go together (on a loaded machine, each went alone as it filled).
        held = threading.Event()
        producer._io.loop.call_soon_threadsafe(lambda: held.set() or time.sleep(1.0))
        held.wait(10)
        small = [producer.send("refused-together", b"a-%03d" % i) for i in range(60)]
        too_big = producer.send("refused-together", b"x" * 1000)
        small += [producer.send("refused-together", b"b-%03d" % i) for i in range(60)]
        producer.flush()
        assert max(sizes) > 1  # some went together
    with pytest.raises(StromError) as refused:
        too_big.get(timeout=10)
    assert refused.value.name == "MESSAGE_TOO_LARGE"
    assert all(f.succeeded() for f in small)
    values = [r.value for r in reader(cluster).read_all("refused-together", 0)]
    assert values == [b"a-%03d" % i for i in range(60)] + [b"b-%03d" % i for i in range(60)]


@pytest.mark.parametrize(
    ("partitions", "in_flight", "request_size"),
    [
        (6, 1, 1024 * 1024),  # partitions of one leader filling at different moments
        (9, 2, 2500),  # one drain's batches split by max.request.size into 3 requests
    ],
)
def test_at_most_max_in_flight_requests_per_broker(cluster, partitions, in_flight, request_size):
    topic = f"per-broker-{partitions}"
    create_topic(cluster, topic, partitions=partitions)
    with Producer(
        bootstrap(cluster),
        linger_ms=0,
        batch_size=1000,
        max_request_size=request_size,
        max_in_flight_requests_per_connection=in_flight,
    ) as producer:
        unanswered: dict[int, int] = {}
        most: dict[int, int] = {}
        sender = producer._sender
        produce_once = sender._produce_once

        async def counted(leader, batches):
            unanswered[leader] = unanswered.get(leader, 0) + 1
            most[leader] = max(most.get(leader, 0), unanswered[leader])
            try:
                await produce_once(leader, batches)
            finally:
                unanswered[leader] -= 1

        sender._produce_once = counted
        producer.partitions_for(topic)
        by_leader: dict[int, list[int]] = {}
        for partition in range(partitions):
            by_leader.setdefault(producer._cluster.leader(topic, partition), []).append(partition)
        # Partitions of one leader that fill at different moments: each could start its
        # own request while another's is unanswered; the connection's limit holds them.
        for i in range(400):
            for group in by_leader.values():
                producer.send(topic, b"v" * 200, partition=group[i % len(group)])
            time.sleep(0.0005)
        producer.flush()
    assert len(most) == 3 and max(most.values()) == in_flight


def test_keyless_records_spread_over_every_partition_at_default_settings(cluster):
    """KIP-794: before it, one partition took 4,712 of 5,000 keyless records."""
    create_topic(cluster, "spread")
    with Producer(bootstrap(cluster)) as producer:
        futures = [producer.send("spread", b"v" * 1024) for _ in range(5000)]
        producer.flush()
    counts = [0, 0, 0]
    for future in futures:
        counts[future.get(timeout=10).partition] += 1
    assert all(c > 5000 * 0.15 for c in counts), counts


def test_partitioner_ignore_keys_spreads_keyed_records_as_keyless_ones(cluster):
    create_topic(cluster, "ignore-keys")
    with Producer(bootstrap(cluster), partitioner_ignore_keys=True) as producer:
        futures = [producer.send("ignore-keys", b"v" * 1024, key=b"one-key") for _ in range(3000)]
        producer.flush()
    assert {f.get(timeout=10).partition for f in futures} == {0, 1, 2}
    with Producer(bootstrap(cluster)) as keyed:
        assert keyed.send("ignore-keys", b"v", key=b"one-key").get(10).partition == (
            partition_for_key(b"one-key", 3)
        )


def test_partitions_of_a_broker_that_stopped_taking_batches_get_no_keyless_records(cluster):
    """partitioner.availability.timeout.ms: a paused leader's partition is left out once its
    broker took nothing for that long while batches waited (with only the adaptive weights
    it would still get a share)."""
    create_topic(cluster, "avoid-stalled")
    with Producer(
        bootstrap(cluster),
        acks=1,
        linger_ms=0,
        batch_size=1000,
        partitioner_availability_timeout_ms=200,
    ) as producer:
        producer.partitions_for("avoid-stalled")
        stalled = producer._cluster.leader("avoid-stalled", 0)
        on_stalled = {
            p for p in range(3) if producer._cluster.leader("avoid-stalled", p) == stalled
        }
        for _ in range(200):  # every partition's batches have been drained once
            producer.send("avoid-stalled", b"v" * 200)
        producer.flush()
        cluster.procs[stalled].send_signal(signal.SIGSTOP)
        try:
            stopped = time.monotonic()
            # The timeout counts from the paused broker's first unanswered request: the clock
            # starts when one is in flight, not when a keyless record first lands there.
            while not producer._sender._requests_to.get(stalled):
                # Only a guard against looping for good: how soon depends on the machine.
                assert time.monotonic() - stopped < 5, "no request went to the paused broker"
                producer.send("avoid-stalled", b"v" * 200)
            started = time.monotonic()
            late = []
            while (elapsed := time.monotonic() - started) < 1.0:
                future = producer.send("avoid-stalled", b"v" * 200)
                if elapsed > 0.5:
                    late.append((elapsed, future.partition))
        finally:
            cluster.procs[stalled].send_signal(signal.SIGCONT)
        producer.flush()
    # Without the timeout (adaptive weights only) the paused broker's partitions get about
    # 18% of these records. Twice in full CI runs a burst of about 5 ms went there (342 and
    # 702 records, under 1.2%), once the stall had been seen: a pause of this busy process
    # itself made every leader look stalled at once, so LeaderWaits.looked no longer counts
    # such a pause; the margin stays, and the message says when the strays were sent. On a
    # machine half as fast one burst took 38 ms, 1,269 of 24,877 records (5.1%): the margin
    # is 6%, a third of what the paused partitions get without the timeout.
    stray = [round(elapsed, 3) for elapsed, p in late if p in on_stalled]
    assert len(late) > 100 and len(stray) <= 0.06 * len(late), (
        len(late),
        len(stray),
        stray[:3],
        stray[-3:],
    )


def test_headers_timestamps_callbacks_and_acks_0(cluster):
    create_topic(cluster, "details", partitions=1)
    seen = []
    done = threading.Event()
    with Producer(bootstrap(cluster)) as producer:
        future = producer.send(
            "details",
            b"v",
            key=b"k",
            headers=[("trace", b"abc"), ("empty", None)],
            timestamp_ms=1234,
        )
        future.add_callback(lambda meta: (seen.append(meta), done.set()))
        assert future.get(timeout=10).timestamp == 1234
        assert done.wait(5) and seen[0].offset == 0
    [record] = reader(cluster).read_all("details", 0)
    assert record.headers == (("trace", b"abc"), ("empty", None)) and record.timestamp == 1234
    with Producer(bootstrap(cluster), acks=0) as fire_and_forget:
        meta = fire_and_forget.send("details", b"w").get(timeout=10)
        assert meta.offset == -1
    deadline = time.monotonic() + 10
    while len(reader(cluster).read_all("details", 0)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_refused_batch_fails_its_records_and_later_sends_still_succeed(cluster):
    create_topic(cluster, "small", partitions=1, **{"max.message.bytes": "300"})
    with Producer(bootstrap(cluster)) as producer:
        assert producer.send("small", b"ok-1").get(timeout=10).offset == 0
        too_big = producer.send("small", b"x" * 1000)
        with pytest.raises(StromError) as refused:
            too_big.get(timeout=10)
        assert refused.value.name == "MESSAGE_TOO_LARGE" and too_big.failed()
        # The refused batch's sequence numbers are given back: no OUT_OF_ORDER after it.
        assert producer.send("small", b"ok-2").get(timeout=10).offset == 1
        with pytest.raises(StromError, match="MESSAGE_TOO_LARGE"):
            producer.send("small", b"y" * (2 << 20))  # over max_request_size: refused at once
        with pytest.raises(StromError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            producer.send("small", b"z", partition=-1)  # (7 waits for metadata: see below)
        with pytest.raises(StromError, match="must be bytes"):
            producer.send("small", "text")
    assert [r.value for r in reader(cluster).read_all("small", 0)] == [b"ok-1", b"ok-2"]


@pytest.mark.parametrize(
    "config, words",
    [
        ({"acks": 2}, "acks must be"),
        ({"acks": 1, "enable_idempotence": True}, "needs acks='all'"),
        ({"compression_type": "brotli"}, "compression_type"),
        ({"delivery_timeout_ms": 100}, "delivery_timeout_ms"),
        ({"partitioner_availability_timeout_ms": -1}, "partitioner_availability_timeout_ms"),
    ],
)
def test_bad_configuration_names_the_setting(cluster, config, words):
    with pytest.raises(StromError, match=words) as error:
        Producer(bootstrap(cluster), **config)
    assert error.value.name == "INVALID_CONFIG"


def test_serializers_and_compression(cluster):
    create_topic(cluster, "typed", partitions=1)
    with Producer(
        bootstrap(cluster),
        compression_type="zstd",
        key_serializer=str.encode,
        value_serializer=lambda v: repr(v).encode(),
    ) as producer:
        for i in range(50):
            producer.send("typed", {"n": i}, key=f"k{i}")
        producer.flush()
    records = reader(cluster).read_all("typed", 0)
    assert [r.value for r in records] == [repr({"n": i}).encode() for i in range(50)]
    assert records[3].key == b"k3"


def test_idempotent_retries_across_leader_kills_lose_and_duplicate_nothing(tmp_path):
    cluster = NodeCluster(str(tmp_path), 3)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        create_topic(cluster, "exactly")
        client = reader(cluster)
        producer = Producer(bootstrap(cluster), linger_ms=2, batch_size=2048, retry_backoff_ms=50)
        futures = []
        for i in range(4000):
            futures.append(producer.send("exactly", b"%06d" % i, key=b"k%d" % (i % 30)))
            if i == 1500:
                victim = client.leader("exactly", 0)
                cluster.stop(victim, signal.SIGKILL)
            if i % 200 == 0:
                time.sleep(0.05)
        producer.flush(timeout=120)
        acked = [f.get(timeout=1) for f in futures]
        producer.close()
        cluster.start(victim)
        per_partition: dict[int, list[bytes]] = {}
        for partition in range(3):
            per_partition[partition] = [r.value for r in client.read_all("exactly", partition)]
        everything = [v for values in per_partition.values() for v in values]
        assert len(everything) == len(set(everything)) == 4000  # no loss, no duplicate
        for partition, values in per_partition.items():
            sent = [b"%06d" % i for i, m in enumerate(acked) if m.partition == partition]
            assert values == sent  # the partition's order is the send order
    finally:
        cluster.stop_all()


@pytest.mark.parametrize(("topic_codec", "stored"), [("zstd", "zstd"), ("producer", "gzip")])
def test_the_topics_compression_type_decides_how_batches_are_stored(cluster, topic_codec, stored):
    """compression.type=zstd: the broker recompresses a gzip producer's batches, and a
    consumer reads the same records from batches whose attributes say zstd (Kafka's
    LogValidator); `producer` stores them as the producer compressed them."""
    topic = f"codec-{topic_codec}"
    create_topic(cluster, topic, partitions=1, **{"compression.type": topic_codec})
    with Producer(bootstrap(cluster), compression_type="gzip", linger_ms=20) as producer:
        futures = [producer.send(topic, b"value-%d" % i, key=b"k%d" % i) for i in range(200)]
        producer.flush()
        assert [f.get(timeout=10).offset for f in futures] == list(range(200))
    with Consumer(
        topic,
        bootstrap_servers=bootstrap(cluster),
        auto_offset_reset="earliest",
        consumer_timeout_ms=1500,
    ) as consumer:
        records = list(consumer)
    assert [(r.key, r.value) for r in records] == [
        (b"k%d" % i, b"value-%d" % i) for i in range(200)
    ]
    client = reader(cluster)
    answer = client.fetch_raw(client.leader(topic, 0), topic, 0, 0)
    headers = [header for header, _ in decode_batches(answer.records)]
    assert headers and {compression.NAMES[h.compression] for h in headers} == {stored}


def test_a_send_to_a_partition_just_added_waits_for_metadata_that_has_it(cluster):
    """Kafka's waitOnMetadata: the producer's metadata still says 1 partition when the
    topic gets a second; a send to partition 1 waits (max.block.ms) for metadata that has
    it instead of failing at once. A partition that never comes is a timeout saying so."""
    from strom.admin import AdminClient
    from strom.errors import KafkaTimeoutError

    create_topic(cluster, "widening", partitions=1)
    with Producer(bootstrap(cluster), max_block_ms=20_000) as producer:
        producer.send("widening", b"first", partition=0).get(timeout=10)
        with AdminClient(bootstrap(cluster)) as admin:
            admin.create_partitions({"widening": 2})
        assert producer.send("widening", b"second", partition=1).get(timeout=10).partition == 1
    with Producer(bootstrap(cluster), max_block_ms=500) as producer:
        with pytest.raises(KafkaTimeoutError) as raised:
            producer.send("widening", b"nowhere", partition=5)
    assert str(raised.value).endswith(
        "Partition 5 of topic widening with partition count 2 is not present in metadata "
        "after 500 ms."
    )
