"""The client's view of the cluster (strom/cluster.py): a partition's leader epoch never
goes back (KIP-320), and metadata requests go round the brokers instead of always asking
the same one (which, cut off from the controller, could keep a client on a stale leader)."""

from __future__ import annotations

import asyncio

import grpc.aio

from strom.cluster import Cluster
from strom_api.v1 import client_pb2, client_pb2_grpc

ID_A, ID_B = b"a" * 16, b"b" * 16


def answer(leader: int, epoch: int, topic_id: bytes = ID_A) -> client_pb2.MetadataResponse:
    response = client_pb2.MetadataResponse(cluster_id="c")
    topic = response.topics.add(name="t", topic_id=topic_id)
    topic.partitions.add(partition=0, leader_id=leader, leader_epoch=epoch, replicas=[1, 2, 3])
    topic.partitions.add(partition=1, leader_id=3, leader_epoch=epoch, replicas=[1, 2, 3])
    return response


def test_an_answer_from_a_broker_behind_does_not_bring_back_an_older_leader():
    cluster = Cluster(["h:1"])
    cluster._apply(answer(leader=2, epoch=5))
    stale = answer(leader=1, epoch=4)
    stale.topics[0].partitions[1].leader_epoch = 6  # newer here: taken
    cluster._apply(stale)
    info = cluster.topics["t"]
    assert (info.partitions[0].leader, info.partitions[0].leader_epoch) == (2, 5)
    assert (info.partitions[1].leader, info.partitions[1].leader_epoch) == (3, 6)
    # The topic deleted and created again: its epochs start over, and are believed.
    cluster._apply(answer(leader=1, epoch=0, topic_id=ID_B))
    assert cluster.topics["t"].partitions[0].leader == 1


class _Broker(client_pb2_grpc.ClientServiceServicer):
    def __init__(self, name: str, asked: list[str]) -> None:
        self.name, self.asked = name, asked
        self.brokers: list[tuple[int, int]] = []

    async def Metadata(self, request, context):  # noqa: N802
        self.asked.append(self.name)
        response = client_pb2.MetadataResponse(cluster_id="c")
        for node_id, port in self.brokers:
            response.brokers.add(node_id=node_id, host="127.0.0.1", port=port)
        return response


def test_metadata_requests_go_round_the_brokers():
    async def scenario() -> list[str]:
        asked: list[str] = []
        servers, handlers = [], []
        for name in ("one", "two", "three"):
            server = grpc.aio.server()
            handler = _Broker(name, asked)
            client_pb2_grpc.add_ClientServiceServicer_to_server(handler, server)
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            servers.append((server, port))
            handlers.append(handler)
        ports = [(i + 1, port) for i, (_, port) in enumerate(servers)]
        for handler in handlers:
            handler.brokers = ports
        cluster = Cluster([f"127.0.0.1:{servers[0][1]}"], retry_backoff_ms=0)
        try:
            for _ in range(7):
                cluster.mark_stale()
                await cluster.refresh()
        finally:
            await cluster.close()
            for server, _ in servers:
                await server.stop(None)
        return asked

    asked = asyncio.run(scenario())
    assert asked[0] == "one"  # only the bootstrap address is known at first
    assert set(asked[1:4]) == {"one", "two", "three"}  # then each in turn
    assert set(asked[4:7]) == {"one", "two", "three"}
