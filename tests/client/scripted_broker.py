"""A scripted broker on real gRPC for client tests whose fault must come at one exact
moment, which a real cluster cannot be made to do on demand: one broker (id 1) leading the
one partition of topic `t`. Subclasses script the calls their test is about."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager

import grpc

from strom_api.v1 import client_pb2, client_pb2_grpc


class OnePartitionBroker(client_pb2_grpc.ClientServiceServicer):
    port = 0  # set by serving()

    def Metadata(self, request, context):  # noqa: N802
        response = client_pb2.MetadataResponse(cluster_id="c", controller_id=1)
        response.brokers.add(node_id=1, host="127.0.0.1", port=self.port)
        topic = response.topics.add(name="t", topic_id=b"t" * 16)
        topic.partitions.add(partition=0, leader_id=1, leader_epoch=0, replicas=[1], isr=[1])
        return response


@contextmanager
def serving(broker: OnePartitionBroker, workers: int = 8) -> Iterator[str]:
    """Serves `broker` on a loopback port for the block; yields its bootstrap address."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    client_pb2_grpc.add_ClientServiceServicer_to_server(broker, server)
    broker.port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{broker.port}"
    finally:
        server.stop(None)
