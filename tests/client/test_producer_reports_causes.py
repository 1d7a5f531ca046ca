"""A producer says what is wrong while it is wrong (issue 17): the retriable error it keeps
getting, once per cause and partition, and a final error that names that cause; a broker it
cannot reach, once per address, with reconnect.backoff.ms spacing its attempts."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from strom.errors import KafkaTimeoutError
from strom.producer import Producer
from tests.client.cluster_helpers import bootstrap, create_topic


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_too_few_replicas_is_named_while_retrying_and_in_the_final_error(cluster, caplog):
    # min.insync.replicas above the replication factor: every acks=all send is refused with
    # NOT_ENOUGH_REPLICAS (retriable) until delivery.timeout.ms.
    create_topic(cluster, "under-replicated", partitions=1, **{"min.insync.replicas": "4"})
    caplog.set_level(logging.INFO, logger="strom")
    with Producer(
        bootstrap(cluster),
        acks="all",
        linger_ms=0,
        request_timeout_ms=1000,
        delivery_timeout_ms=2000,
        retry_backoff_ms=20,
        client_id="orders-app",
    ) as producer:
        future = producer.send("under-replicated", b"value")
        with pytest.raises(KafkaTimeoutError) as failed:
            future.get(timeout=10)
        attempts = producer._sender.requests_sent
    assert "NOT_ENOUGH_REPLICAS" in str(failed.value), failed.value
    assert "delivery.timeout.ms" in str(failed.value) or "not delivered" in str(failed.value)
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "NOT_ENOUGH_REPLICAS" in r.getMessage()
    ]
    assert attempts > 5  # it did keep retrying ...
    assert len(warned) == 1, warned  # ... and said so once, not once per retry
    assert "under-replicated-0" in warned[0] and "retrying" in warned[0]
    # client.id says whose line it is, as Kafka's producer logs do.
    assert warned[0].startswith("[Producer clientId=orders-app] "), warned[0]


def test_a_dead_address_is_one_warning_and_a_network_cause(caplog):
    address = f"127.0.0.1:{_free_port()}"
    caplog.set_level(logging.DEBUG, logger="strom")
    producer = Producer(address, max_block_ms=1500)
    try:
        with pytest.raises(KafkaTimeoutError) as failed:
            producer.send("events", b"value")
    finally:
        producer.close(0)
    text = str(failed.value)
    assert "Topic events not present in metadata after 1500 ms" in text, text
    assert "no broker reachable" in text and address in text
    assert "UNKNOWN_TOPIC_OR_PARTITION" not in text
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        f"Connection to node -1 ({address}) could not be established. Broker may not be available."
    ]


@pytest.mark.parametrize("backoff_ms, most", [(5000, 2), (20, 1000)])
def test_reconnect_backoff_spaces_the_attempts(backoff_ms, most):
    """reconnect.backoff.ms is read: at 5 s the dead address is dialled once in 1.5 s (the
    metadata and InitProducerId requests may both dial before either failed); at 20 ms
    (doubling to reconnect.backoff.max.ms=200) several times."""
    producer = Producer(
        f"127.0.0.1:{_free_port()}",
        max_block_ms=1500,
        reconnect_backoff_ms=backoff_ms,
        reconnect_backoff_max_ms=max(backoff_ms, 200),
    )
    try:
        with pytest.raises(KafkaTimeoutError):
            producer.send("events", b"value")
        attempts = producer._cluster.connections.attempts_refused
    finally:
        producer.close(0)
    assert 1 <= attempts <= most
    if backoff_ms < 1000:
        assert attempts >= 4


def test_no_answer_within_max_block_ms_is_a_timeout_not_an_unknown_topic():
    """A broker that takes the metadata request and does not answer before max.block.ms
    runs out (a first request still under way, as on a loaded machine): Kafka's "Topic X
    not present in metadata after N ms", not UNKNOWN_TOPIC_OR_PARTITION."""
    from concurrent import futures

    import grpc

    answered = threading.Event()

    def slow_metadata(request: bytes, context: object) -> bytes:
        answered.wait(5)  # holds the request past the producer's max.block.ms
        return b""

    handler = grpc.method_handlers_generic_handler(
        "strom_api.v1.ClientService",
        {"Metadata": grpc.unary_unary_rpc_method_handler(slow_metadata)},
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    address = f"127.0.0.1:{port}"
    producer = Producer(address, max_block_ms=500)
    try:
        with pytest.raises(KafkaTimeoutError) as raised:
            producer.send("events", b"value")
    finally:
        answered.set()
        producer.close(0)
        server.stop(0)
    text = str(raised.value)
    assert "Topic events not present in metadata after 500 ms" in text, text
    assert "no broker answered a metadata request yet" in text and address in text
