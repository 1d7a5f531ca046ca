"""The producer's ProduceStream against a broker whose stream ends INTERNAL before answering
anything, as a broker without ProduceStream looks when the client's write races its
UNIMPLEMENTED ("Internal error from Core"): the request goes unary and is answered. Before,
every retry opened a new stream that lost the race again (a CI run under load), and the
record timed out. A scripted broker on real gRPC: the race cannot be made on demand."""

from __future__ import annotations

import threading

import grpc

from strom.producer import Producer
from strom_api.v1 import client_pb2
from tests.client.scripted_broker import OnePartitionBroker, serving


class StreamlessBroker(OnePartitionBroker):
    def __init__(self) -> None:
        self.streams = 0
        self.unary = 0
        self.lock = threading.Lock()

    def InitProducerId(self, request, context):  # noqa: N802
        return client_pb2.InitProducerIdResponse(producer_id=7, producer_epoch=0)

    def ProduceStream(self, request_iterator, context):  # noqa: N802
        with self.lock:
            self.streams += 1
        context.abort(grpc.StatusCode.INTERNAL, "Internal error from Core")

    def Produce(self, request, context):  # noqa: N802
        with self.lock:
            offset = self.unary
            self.unary += 1
        answer = client_pb2.ProduceResponse()
        answer.topics.add(name="t").partitions.add(partition=0, base_offset=offset)
        return answer


def test_a_stream_that_ends_internal_before_any_answer_sends_the_request_unary():
    broker = StreamlessBroker()
    with (
        serving(broker, workers=4) as bootstrap,
        Producer(
            bootstrap,
            acks="all",
            linger_ms=0,
            request_timeout_ms=3000,
            delivery_timeout_ms=4000,
        ) as producer,
    ):
        first = producer.send("t", b"first", partition=0).get(timeout=10)
        second = producer.send("t", b"second", partition=0).get(timeout=10)
    assert (first.offset, second.offset) == (0, 1)
    assert broker.unary == 2
    assert broker.streams >= 1
