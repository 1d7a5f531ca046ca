"""The producer's ProduceStream against a broker whose stream ends INTERNAL before answering
anything, as a broker without ProduceStream looks when the client's write races its
UNIMPLEMENTED ("Internal error from Core"): the request goes unary and is answered. Before,
every retry opened a new stream that lost the race again (a CI run under load), and the
record timed out. A scripted broker on real gRPC: the race cannot be made on demand."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc

from strom.producer import Producer
from strom_api.v1 import client_pb2, client_pb2_grpc


class StreamlessBroker(client_pb2_grpc.ClientServiceServicer):
    def __init__(self) -> None:
        self.port = 0
        self.streams = 0
        self.unary = 0
        self.lock = threading.Lock()

    def Metadata(self, request, context):  # noqa: N802
        response = client_pb2.MetadataResponse(cluster_id="c", controller_id=1)
        response.brokers.add(node_id=1, host="127.0.0.1", port=self.port)
        topic = response.topics.add(name="t", topic_id=b"t" * 16)
        topic.partitions.add(partition=0, leader_id=1, leader_epoch=0, replicas=[1], isr=[1])
        return response

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
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    client_pb2_grpc.add_ClientServiceServicer_to_server(broker, server)
    broker.port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with Producer(
            f"127.0.0.1:{broker.port}",
            acks="all",
            linger_ms=0,
            request_timeout_ms=3000,
            delivery_timeout_ms=4000,
        ) as producer:
            first = producer.send("t", b"first", partition=0).get(timeout=10)
            second = producer.send("t", b"second", partition=0).get(timeout=10)
        assert (first.offset, second.offset) == (0, 1)
        assert broker.unary == 2
        assert broker.streams >= 1
    finally:
        server.stop(None)
