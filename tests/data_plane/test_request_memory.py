"""What one node holds for its requests is bounded (issue 16: 20 concurrent 60 MiB produces
took a node to 877 MiB; 45 stalled FetchStreams asking 100 MiB each killed one): a real node
with small limits — socket.request.max.bytes, fetch.max.bytes, queued.max.request.bytes —
and Kafka's MemoryPoolUsed gauge to watch."""

from __future__ import annotations

import threading

import grpc
import pytest

from strom_api.v1 import client_pb2
from tests.data_plane.data_client import DataClient, batch, error_name
from tests.data_plane.test_client_api import create_topic
from tests.node_integration.node_cluster import running_cluster

MiB = 1024 * 1024
POOL = 3 * MiB
LIMITS = {
    "socket.request.max.bytes": str(4 * MiB),
    "fetch.max.bytes": str(MiB),
    "queued.max.request.bytes": str(POOL),
}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with running_cluster(str(tmp_path_factory.mktemp("memory")), 1, extra=LIMITS) as cluster:
        create_topic(cluster, "mem", rf=1, min_insync_replicas="1")
        yield cluster


@pytest.fixture(scope="module")
def client(node):
    client = DataClient({1: f"127.0.0.1:{node.broker_port[1]}"})
    client.leader("mem", 0)
    for i in range(8):  # batches of ~1,000,000 bytes: one per fetch of fetch.max.bytes
        answer = client.produce_raw(1, "mem", 0, batch([bytes([i]) * 999_000]), acks=1)
        assert error_name(answer.error) == "NONE", answer
    return client


def pool_used(node) -> float:
    return node.scrape(1)[("kafka_network_socketserver_memorypoolused", ())]


def fetch_request(offset: int = 0) -> client_pb2.FetchRequest:
    partition = client_pb2.FetchRequest.Partition(
        partition=0, fetch_offset=offset, partition_max_bytes=100 * MiB, current_leader_epoch=-1
    )
    return client_pb2.FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=100 * MiB,
        topics=[client_pb2.FetchRequest.Topic(name="mem", partitions=[partition])],
    )


def test_a_fetch_answers_at_most_fetch_max_bytes_whatever_it_asks(node, client):
    answer = client.stub(1).Fetch(fetch_request(), timeout=10).topics[0].partitions[0]
    assert 900_000 < len(answer.records) <= MiB  # one batch; the next would pass 1 MiB


def test_stalled_fetch_streams_hold_no_more_than_the_pool(node, client):
    done = threading.Event()

    def one_request_then_wait():
        yield fetch_request()
        done.wait(30)

    calls, sizes = [], []
    try:
        for _ in range(6):
            call = client.stub(1).FetchStream(one_request_then_wait(), timeout=30)
            calls.append(call)
            sizes.append(len(next(call).topics[0].partitions[0].records))
        used = pool_used(node)
    finally:
        done.set()
        for call in calls:
            call.cancel()
    # Each open stream holds its answer until it asks again: three streams fill the 3 MiB
    # pool, a fourth gets in while anything is free (non-strict), the rest answer empty.
    assert sum(1 for s in sizes if s > 0) == 4, sizes
    assert POOL < used <= POOL + MiB
    # The streams ended: their memory is free again.
    for _ in range(50):
        if pool_used(node) == 0:
            break
        threading.Event().wait(0.1)
    assert pool_used(node) == 0


def test_a_request_over_socket_request_max_bytes_is_refused_as_it_arrives(node, client):
    request = client_pb2.ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topics=[
            client_pb2.ProduceRequest.Topic(
                name="mem",
                partitions=[
                    client_pb2.ProduceRequest.Partition(partition=0, records=b"x" * 5 * MiB)
                ],
            )
        ],
    )
    with pytest.raises(grpc.RpcError) as caught:
        client.stub(1).Produce(request, timeout=10)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_negative_max_bytes_leaks_nothing_from_the_pool(node, client):
    """Found by tests/fuzz: max_bytes=-2^31 reserved a negative amount, the release that
    followed the read leaked 2^31 bytes, and after a few such fetches every produce waited
    for memory until REQUEST_TIMED_OUT."""
    request = fetch_request()
    request.max_bytes = -(2**31)
    for _ in range(5):
        client.stub(1).Fetch(request, timeout=10)
    assert pool_used(node) == 0
    answer = client.produce_raw(1, "mem", 0, batch([b"after"]), acks=1, timeout_ms=2000)
    assert error_name(answer.error) == "NONE", answer


def test_queued_max_requests_refuses_calls_past_it(tmp_path):
    """queued.max.requests bounds the calls a broker serves at once (open streams count):
    past it a call is refused RESOURCE_EXHAUSTED, not queued without bound."""
    with running_cluster(str(tmp_path), 1, extra={"queued.max.requests": "2"}) as cluster:
        client = DataClient({1: f"127.0.0.1:{cluster.broker_port[1]}"})
        done = threading.Event()

        def wait_forever():
            done.wait(30)
            yield from ()

        calls = [client.stub(1).FetchStream(wait_forever(), timeout=30) for _ in range(2)]
        try:
            threading.Event().wait(0.5)  # both streams are being served
            with pytest.raises(grpc.RpcError) as caught:
                client.stub(1).Metadata(client_pb2.MetadataRequest(), timeout=5)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        finally:
            done.set()
            for call in calls:
                call.cancel()
