"""The fuzzed cluster: three combined nodes (tests/node_integration's NodeCluster, or the
SASL_SSL one of tests/fuzz/secured.py) with two topics holding a few records, two consumer
groups' coordinator topic created, and one channel per node and listener for the checks
(on a secured cluster: the admin's) and per node, listener and identity for the cases."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import grpc

from strom_api.sasl_client import sync_authenticate
from strom_api.tls import ChannelSecurity, sync_channel
from strom_api.v1 import client_pb2, controller_pb2
from tests.client.cluster_helpers import GROUP_SETTINGS, create_topic
from tests.data_plane.data_client import DataClient, batch
from tests.fuzz.cases import ANONYMOUS, FORGED, REPLAYED, USER
from tests.fuzz.secured import FUZZ_USER, SecuredCluster
from tests.fuzz.services import BROKER, CONTROLLER
from tests.fuzz.values import Context
from tests.node_integration.node_cluster import NodeCluster
from tests.raft_integration.process_cluster import wait_until

TOPICS = {"fuzz-a": 3, "fuzz-b": 1}
GROUPS = ["fuzz-group", "fuzz-group-2"]
# Off so that a Metadata request naming random topics does not create them: a refused
# request must leave the topics alone, and auto-creation would blur that check.
SETTINGS = {**GROUP_SETTINGS, "auto.create.topics.enable": "false"}
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 128 * 1024 * 1024),
    ("grpc.max_send_message_length", 128 * 1024 * 1024),
]


@dataclass
class FuzzCluster:
    base: str
    secured: bool = False
    cluster: NodeCluster = field(init=False)
    ctx: Context = field(init=False)
    channels: dict[tuple[int, str], grpc.Channel] = field(default_factory=dict)  # the checks'
    # (node, listener, identity) -> the channel a case of that identity is sent on
    case_channels: dict[tuple[int, str, str], grpc.Channel] = field(default_factory=dict)
    log_start: dict[int, int] = field(default_factory=dict)  # log size once set up

    def start(self) -> None:
        os.makedirs(self.base, exist_ok=True)
        if self.secured:
            self.cluster = SecuredCluster(self.base, extra=SETTINGS)
        else:
            self.cluster = NodeCluster(self.base, 3, extra=SETTINGS)
        self.cluster.start_all()
        try:
            self._set_up()
        except BaseException:
            self.stop()
            raise

    def _set_up(self) -> None:
        c = self.cluster
        c.wait_for_brokers()
        for name, partitions in TOPICS.items():
            create_topic(c, name, partitions)
        described = c.call(
            "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=list(TOPICS))
        )
        topic_ids = {t.name: t.topic_id for t in described.topics}
        data = DataClient({i: f"127.0.0.1:{c.broker_port[i]}" for i in c.ids}, self.admin)
        for name, partitions in TOPICS.items():
            for p in range(partitions):
                leader = data.leader(name, p)
                wait_until(
                    lambda n=name, p=p, leader=leader: (
                        data.produce_raw(
                            leader, n, p, batch([b"seed-%d" % i for i in range(3)])
                        ).error.code
                        == 0
                        or None
                    ),
                    20,
                    f"a first produce to {name}-{p}",
                )
        tokens = {}
        for node in c.ids:
            for listener, port in (
                (BROKER, c.broker_port[node]),
                (CONTROLLER, c.controller_port[node]),
            ):
                target = f"127.0.0.1:{port}"
                self.channels[(node, listener)] = sync_channel(target, self.admin, CHANNEL_OPTIONS)
                if not isinstance(c, SecuredCluster):
                    self.case_channels[(node, listener, "")] = self.channels[(node, listener)]
                    continue
                for identity, security in (
                    (USER, c.user()),
                    (ANONYMOUS, c.tls),
                    (REPLAYED, c.tls),
                    (FORGED, c.tls),
                ):
                    self.case_channels[(node, listener, identity)] = sync_channel(
                        target, security, CHANNEL_OPTIONS
                    )
                tokens[(node, listener)] = self._token(target, c)
        # __consumer_offsets exists before the first case, so that its creation (by the first
        # FindCoordinator) is not mistaken for a change made by a later request.
        stub = data.stub(c.ids[0])
        for group in GROUPS:
            wait_until(
                lambda g=group: (
                    stub.FindCoordinator(
                        client_pb2.FindCoordinatorRequest(key=g), timeout=5
                    ).error.code
                    == 0
                    or None
                ),
                30,
                "the group coordinator",
            )
        self.ctx = Context(dict(TOPICS), topic_ids, list(GROUPS), list(c.ids), tokens=tokens)
        self.log_start = {n: os.path.getsize(self.log_path(n)) for n in c.ids}

    @property
    def admin(self) -> ChannelSecurity:
        """How the checks dial (None: plaintext)."""
        return self.cluster.admin() if isinstance(self.cluster, SecuredCluster) else None

    def client_settings(self) -> dict[str, object]:
        """strom.Producer / Consumer settings of the round trip: the fuzz user's."""
        if isinstance(self.cluster, SecuredCluster):
            return self.cluster.client_settings()
        return {}

    def health_channel(self, target: str) -> grpc.Channel:
        """Health is served without a session: TLS alone on a secured cluster."""
        tls = self.cluster.tls if isinstance(self.cluster, SecuredCluster) else None
        return sync_channel(target, tls)

    @staticmethod
    def _token(target: str, cluster: SecuredCluster) -> str:
        """A genuine session token of the fuzz user, minted for a connection of its own
        (closed at once): what a token seen in transit or in a log would be."""
        with sync_channel(target, cluster.tls) as channel:
            answer = sync_authenticate(channel, FUZZ_USER)
        return str(answer.session_token.decode())

    def case_channel(self, node: int, listener: str, identity: str) -> grpc.Channel:
        return self.case_channels[(node, listener, identity)]

    def log_path(self, node: int) -> str:
        return os.path.join(self.base, f"node{node}", "server.log")

    def log_since_start(self, node: int) -> str:
        with open(self.log_path(node), "rb") as f:
            f.seek(self.log_start.get(node, 0))
            return f.read().decode(errors="replace")

    def listener_channels(self, listener: str) -> dict[int, grpc.Channel]:
        return {n: ch for (n, name), ch in self.channels.items() if name == listener}

    def stop(self) -> None:
        for channel in {*self.channels.values(), *self.case_channels.values()}:
            channel.close()
        self.channels.clear()
        self.case_channels.clear()
        self.cluster.stop_all()
