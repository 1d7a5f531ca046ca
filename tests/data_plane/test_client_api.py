"""ClientService on a real 3-node cluster (combined nodes, RF 3, min.insync.replicas=2):
produce and fetch through the wire contract, and every kind of bad input answered with
its Kafka error name and nothing written."""

from __future__ import annotations

import os
import threading
import time

import pytest

from strom_api.record_batch import TIMESTAMP_TYPE_BIT, parse_header
from strom_api.records import decode_batches
from strom_api.v1 import client_pb2, controller_pb2
from tests.data_plane.data_client import DataClient, batch, error_name
from tests.node_integration.node_cluster import running_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(str(tmp_path_factory.mktemp("client_api"))) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(cluster):
    return DataClient({i: f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids})


def create_topic(cluster, name, partitions=1, rf=3, **configs):
    configs = {"min.insync.replicas": "2", **configs}
    response = cluster.call(
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=rf,
                    configs={k.replace("_", "."): v for k, v in configs.items()},
                )
            ]
        ),
    )
    assert response.topics[0].error.code == 0, response


def latest_offset(client, topic, partition=0):
    leader = client.leader(topic, partition)
    request = client_pb2.ListOffsetsRequest(
        topics=[
            client_pb2.ListOffsetsRequest.Topic(
                name=topic,
                partitions=[
                    client_pb2.ListOffsetsRequest.Partition(partition=partition, timestamp=-1)
                ],
            )
        ]
    )
    answer = client.stub(leader).ListOffsets(request, timeout=5).topics[0].partitions[0]
    assert answer.error.code == 0, answer
    return answer.offset


def test_acks_all_produce_is_read_back_from_the_leader(cluster, client):
    create_topic(cluster, "basic")
    leader = client.leader("basic", 0)
    offsets = []
    for i in range(20):
        answer = client.produce_raw(leader, "basic", 0, batch([b"a%d" % i, b"b%d" % i]))
        assert answer.error.code == 0, answer
        offsets.append(answer.base_offset)
    assert offsets == list(range(0, 40, 2))
    values = [r.value for r in client.read_all("basic", 0)]
    assert values == [v for i in range(20) for v in (b"a%d" % i, b"b%d" % i)]
    assert latest_offset(client, "basic") == 40


def test_every_replica_holds_the_same_batches(cluster, client):
    create_topic(cluster, "copies")
    leader = client.leader("copies", 0)
    for i in range(10):
        assert client.produce_raw(leader, "copies", 0, batch([b"x%d" % i])).error.code == 0

    def logs_equal():
        contents = []
        for node in cluster.ids:
            path = f"{cluster.data_dir(node)}/copies-0/00000000000000000000.log"
            with open(path, "rb") as f:
                contents.append(f.read())
        return len(set(contents)) == 1 and len(contents[0]) > 0

    deadline = time.monotonic() + 10
    while not logs_equal():
        assert time.monotonic() < deadline, "the followers' logs never matched the leader's"
        time.sleep(0.1)
    # The leader stamped its epoch into every stored batch; followers kept the bytes as is.
    with open(f"{cluster.data_dir(leader)}/copies-0/00000000000000000000.log", "rb") as f:
        data = f.read()
    assert {h.partition_leader_epoch for h, _ in decode_batches(data)} == {
        client.metadata(["copies"]).topics[0].partitions[0].leader_epoch
    }


def test_idempotent_retry_is_answered_with_the_original_offset(cluster, client):
    create_topic(cluster, "idem")
    leader = client.leader("idem", 0)
    init = client.stub(leader).InitProducerId(
        client_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1), timeout=10
    )
    assert init.error.code == 0 and init.producer_id >= 0 and init.producer_epoch == 0
    pid = init.producer_id
    first = client.produce_raw(leader, "idem", 0, batch([b"one"], (pid, 0, 0)))
    again = client.produce_raw(leader, "idem", 0, batch([b"one"], (pid, 0, 0)))
    assert first.error.code == 0 and again.error.code == 0
    assert again.base_offset == first.base_offset
    gap = client.produce_raw(leader, "idem", 0, batch([b"three"], (pid, 0, 5)))
    assert error_name(gap.error) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert [r.value for r in client.read_all("idem", 0)] == [b"one"]
    other = client.stub(leader).InitProducerId(
        client_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1), timeout=10
    )
    assert other.producer_id != pid


def test_long_poll_returns_when_records_arrive(cluster, client):
    create_topic(cluster, "poll")
    leader = client.leader("poll", 0)
    assert client.produce_raw(leader, "poll", 0, batch([b"first"])).error.code == 0
    timer = threading.Timer(0.3, lambda: client.produce_raw(leader, "poll", 0, batch([b"second"])))
    timer.start()
    start = time.monotonic()
    answer = client.fetch_raw(leader, "poll", 0, 1, max_wait_ms=5000)
    waited = time.monotonic() - start
    timer.join()
    assert answer.error.code == 0
    assert [r.value for _, rs in decode_batches(answer.records) for r in rs] == [b"second"]
    assert 0.2 < waited < 4.5  # woken by the produce, not by the 5 s timeout
    empty = client.fetch_raw(leader, "poll", 0, 2, max_wait_ms=200)
    assert empty.error.code == 0 and empty.records == b"" and empty.high_watermark == 2


def test_list_offsets_earliest_latest_and_by_time(cluster, client):
    create_topic(cluster, "times")
    leader = client.leader("times", 0)
    base = int(time.time() * 1000) - 10_000
    for i in range(5):
        answer = client.produce_raw(
            leader, "times", 0, batch([b"t%d" % i], timestamp=base + i * 1000)
        )
        assert answer.error.code == 0

    def one(ts: int):
        request = client_pb2.ListOffsetsRequest(
            topics=[
                client_pb2.ListOffsetsRequest.Topic(
                    name="times",
                    partitions=[client_pb2.ListOffsetsRequest.Partition(partition=0, timestamp=ts)],
                )
            ]
        )
        return client.stub(leader).ListOffsets(request, timeout=5).topics[0].partitions[0]

    # One request each: a request naming a partition twice is refused (INVALID_REQUEST).
    answers = [one(ts) for ts in (-2, -1, -3, base + 2500, base + 60_000)]
    assert [(a.offset, a.timestamp) for a in answers] == [
        (0, -1),
        (5, -1),
        (4, base + 4000),
        (3, base + 3000),
        (-1, -1),
    ]


def test_log_append_time_topic_stamps_the_broker_time(cluster, client):
    create_topic(cluster, "appendtime", message_timestamp_type="LogAppendTime")
    leader = client.leader("appendtime", 0)
    before = int(time.time() * 1000)
    answer = client.produce_raw(leader, "appendtime", 0, batch([b"x"], timestamp=1000))
    assert answer.error.code == 0 and answer.log_append_time_ms >= before
    data = client.fetch_raw(leader, "appendtime", 0, 0).records
    header = parse_header(data)
    assert (
        header.attributes & TIMESTAMP_TYPE_BIT and header.max_timestamp == answer.log_append_time_ms
    )


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda b: b[:-3], "CORRUPT_MESSAGE"),  # cut short
        (lambda b: b[:30] + bytes([b[30] ^ 0xFF]) + b[31:], "CORRUPT_MESSAGE"),  # bad CRC
        # magic 1: Kafka's ProduceRequest.validateRecords answers INVALID_RECORD
        (lambda b: b[:16] + b"\x01" + b[17:], "INVALID_RECORD"),
        (lambda b: b"", "INVALID_RECORD"),
    ],
)
def test_malformed_batches_are_refused_and_nothing_is_written(cluster, client, damage, expected):
    topic = f"bad-{expected.lower()}-{abs(hash(str(damage)))}"[:60]
    create_topic(cluster, topic)
    leader = client.leader(topic, 0)
    assert client.produce_raw(leader, topic, 0, batch([b"good"])).error.code == 0
    answer = client.produce_raw(leader, topic, 0, damage(batch([b"evil"])))
    assert error_name(answer.error) == expected, answer
    assert answer.error.message
    assert latest_offset(client, topic) == 1


def test_oversized_batch_gets_message_too_large(cluster, client):
    create_topic(cluster, "small", max_message_bytes="200")
    leader = client.leader("small", 0)
    answer = client.produce_raw(leader, "small", 0, batch([b"x" * 500]))
    assert error_name(answer.error) == "MESSAGE_TOO_LARGE"
    assert "max.message.bytes" in answer.error.message
    assert latest_offset(client, "small") == 0


def test_wrong_broker_unknown_topic_and_stale_epoch(cluster, client):
    create_topic(cluster, "routing")
    leader = client.leader("routing", 0)
    follower = next(b for b in cluster.ids if b != leader)
    answer = client.produce_raw(follower, "routing", 0, batch([b"x"]))
    assert error_name(answer.error) == "NOT_LEADER_OR_FOLLOWER" and answer.error.retriable
    assert answer.current_leader.leader_id == leader
    unknown = client.produce_raw(leader, "no-such-topic", 0, batch([b"x"]))
    assert error_name(unknown.error) == "UNKNOWN_TOPIC_OR_PARTITION"
    request = client_pb2.FetchRequest(
        max_wait_ms=0,
        topics=[
            client_pb2.FetchRequest.Topic(
                name="routing",
                partitions=[
                    client_pb2.FetchRequest.Partition(
                        partition=0, fetch_offset=0, current_leader_epoch=epoch
                    )
                    for epoch in (0,)
                ],
            )
        ],
    )
    meta_epoch = client.metadata(["routing"]).topics[0].partitions[0].leader_epoch
    request.topics[0].partitions[0].current_leader_epoch = meta_epoch + 5
    stale = client.stub(leader).Fetch(request, timeout=5).topics[0].partitions[0]
    assert error_name(stale.error) == "UNKNOWN_LEADER_EPOCH"
    bad_acks = client.produce_raw(leader, "routing", 0, batch([b"x"]), acks=2)
    assert error_name(bad_acks.error) == "INVALID_REQUIRED_ACKS"
    assert latest_offset(client, "routing") == 0


def test_metadata_describes_brokers_topics_and_leaders(cluster, client):
    create_topic(cluster, "described", partitions=3)
    client.leader("described", 2)
    meta = client.metadata(["described", "missing"])
    assert {b.node_id for b in meta.brokers} == set(cluster.ids)
    assert {b.port for b in meta.brokers} == set(cluster.broker_port.values())
    described, missing = meta.topics
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    assert all(len(p.replicas) == 3 and p.leader_id in p.replicas for p in described.partitions)
    assert error_name(missing.error) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert meta.controller_id in cluster.ids


def test_fetch_stream_answers_each_request_in_order(cluster, client):
    create_topic(cluster, "streamed")
    leader = client.leader("streamed", 0)
    for i in range(3):
        assert client.produce_raw(leader, "streamed", 0, batch([b"r%d" % i])).error.code == 0

    def request(offset):
        return client_pb2.FetchRequest(
            max_wait_ms=100,
            topics=[
                client_pb2.FetchRequest.Topic(
                    name="streamed",
                    partitions=[
                        client_pb2.FetchRequest.Partition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        )

    answers = list(client.stub(leader).FetchStream(iter([request(0), request(2), request(3)])))
    got = [
        [r.value for _, rs in decode_batches(a.topics[0].partitions[0].records) for r in rs]
        for a in answers
    ]
    assert got == [[b"r0", b"r1", b"r2"], [b"r2"], []]


def test_produce_stream_answers_pipelined_requests_in_order(cluster, client):
    """More requests than a stream takes unanswered (5), an idempotent producer's sequences
    among them (appended out of order, they would be refused OUT_OF_ORDER_SEQUENCE_NUMBER),
    a refused one and an acks=0 one: one answer each, in order, the stream going on."""
    create_topic(cluster, "pipelined")
    leader = client.leader("pipelined", 0)
    producer = client.stub(leader).InitProducerId(client_pb2.InitProducerIdRequest(), timeout=5)
    assert producer.error.code == 0, producer

    def request(records, topic="pipelined", acks=-1):
        return client_pb2.ProduceRequest(
            acks=acks,
            timeout_ms=10_000,
            topics=[
                client_pb2.ProduceRequest.Topic(
                    name=topic,
                    partitions=[client_pb2.ProduceRequest.Partition(partition=0, records=records)],
                )
            ],
        )

    pid, epoch = producer.producer_id, producer.producer_epoch
    requests = [request(batch([b"v%d" % i], producer=(pid, epoch, i))) for i in range(12)]
    requests.insert(6, request(batch([b"lost"]), topic="no-such-topic-here"))
    requests.append(request(batch([b"unacknowledged"]), acks=0))
    answers = list(client.stub(leader).ProduceStream(iter(requests), timeout=30))
    assert len(answers) == len(requests)
    acked = [a.topics[0].partitions[0] for a in answers[:6] + answers[7:-1]]
    assert [(p.error.code, p.base_offset) for p in acked] == [(0, i) for i in range(12)]
    refused = answers[6].topics[0].partitions[0]
    assert error_name(refused.error) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert not answers[-1].topics  # acks=0: an empty answer, as the unary Produce gives
    values = [r.value for r in client.read_all("pipelined", 0)]
    assert values[:12] == [b"v%d" % i for i in range(12)]  # the acks=0 one may lag


def test_offsets_for_leader_epoch_and_delete_records(cluster, client):
    create_topic(cluster, "epochs")
    leader = client.leader("epochs", 0)
    for i in range(4):
        assert client.produce_raw(leader, "epochs", 0, batch([b"e%d" % i])).error.code == 0
    epoch = client.metadata(["epochs"]).topics[0].partitions[0].leader_epoch
    answer = (
        client.stub(leader)
        .OffsetsForLeaderEpoch(
            client_pb2.OffsetsForLeaderEpochRequest(
                topics=[
                    client_pb2.OffsetsForLeaderEpochRequest.Topic(
                        name="epochs",
                        partitions=[
                            client_pb2.OffsetsForLeaderEpochRequest.Partition(
                                partition=0, current_leader_epoch=epoch, leader_epoch=epoch
                            )
                        ],
                    )
                ]
            ),
            timeout=5,
        )
        .topics[0]
        .partitions[0]
    )
    assert (answer.error.code, answer.leader_epoch, answer.end_offset) == (0, epoch, 4)
    deleted = (
        client.stub(leader)
        .DeleteRecords(
            client_pb2.DeleteRecordsRequest(
                topics=[
                    client_pb2.DeleteRecordsRequest.Topic(
                        name="epochs",
                        partitions=[
                            client_pb2.DeleteRecordsRequest.Partition(partition=0, offset=2)
                        ],
                    )
                ]
            ),
            timeout=5,
        )
        .topics[0]
        .partitions[0]
    )
    assert deleted.error.code == 0 and deleted.low_watermark == 2
    # Durable before the answer: the leader's log-start checkpoint already says so.
    with open(os.path.join(cluster.data_dir(leader), "log-start-offset-checkpoint")) as f:
        assert "epochs 0 2" in f.read().splitlines()
    below = client.fetch_raw(leader, "epochs", 0, 0)
    assert error_name(below.error) == "OFFSET_OUT_OF_RANGE" and not below.error.retriable
    from_start = client.fetch_raw(leader, "epochs", 0, 2)
    assert [r.value for _, rs in decode_batches(from_start.records) for r in rs] == [b"e2", b"e3"]


def test_metadata_auto_creates_a_missing_topic_when_asked(cluster, client):
    broker = cluster.ids[0]
    first = client.stub(broker).Metadata(
        client_pb2.MetadataRequest(topics=["auto-made"], allow_auto_topic_creation=True), timeout=10
    )
    assert error_name(first.topics[0].error) in ("LEADER_NOT_AVAILABLE", "NONE")
    assert client.leader("auto-made", 0) in cluster.ids
    never = client.metadata(["not-made"])
    assert error_name(never.topics[0].error) == "UNKNOWN_TOPIC_OR_PARTITION"
