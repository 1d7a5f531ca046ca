"""The fuzzed cluster: three combined nodes with a KAFKA listener each (tests/kafka_listener's
KafkaCluster, a NodeCluster), two data topics holding a few records, the victim topic that
destructive requests name, the consumer groups' __consumer_offsets created, and the
Context cases are built from (names, topic ids, leaders as the Kafka listener tells them)."""

from __future__ import annotations

import os
import shutil
import signal
import uuid

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from tests.client.cluster_helpers import create_topic
from tests.data_plane.data_client import DataClient, batch
from tests.kafka_fuzz.connection import Prober
from tests.kafka_fuzz.seeds import Context
from tests.kafka_listener.kafka_cluster import KafkaCluster
from tests.raft_integration.process_cluster import wait_until

DATA_TOPICS = {"fuzz-a": 3, "fuzz-b": 1}
VICTIM = "fuzz-victim"
GROUPS = ("fuzz-group", "fuzz-group-2")
OFFSETS_TOPIC = "__consumer_offsets"
# Groups rebalance without the initial delay and allow short sessions (tests/kafka_listener's
# QUICK_GROUPS); no auto-creation, so that a Metadata naming random topics creates nothing.
OFFSETS_PARTITIONS = 3
SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "auto.create.topics.enable": "false",
}
SETUP_TIMEOUT_S = 30


def context(
    topic_ids: dict[str, uuid.UUID], leaders: dict[tuple[str, int], int], nodes: tuple[int, ...]
) -> Context:
    """The Context of a cluster set up as FuzzCluster sets one up. A case drawn against
    another (fewer topics, groups) would not be the same case."""
    return Context(dict(DATA_TOPICS), VICTIM, topic_ids, leaders, GROUPS, nodes)


class FuzzCluster:
    def __init__(self, base: str) -> None:
        self.base = base
        self.cluster: KafkaCluster | None = None
        self.ctx: Context | None = None
        self.log_seen: dict[int, int] = {}  # node -> bytes of its log already looked at

    @property
    def nodes(self) -> KafkaCluster:
        assert self.cluster is not None
        return self.cluster

    def start(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)  # an earlier run's (--keep)
        os.makedirs(self.base)
        self.cluster = KafkaCluster(self.base, 3, extra=SETTINGS)
        self.cluster.start_all()
        try:
            self._set_up()
        except BaseException:
            self.stop()
            raise

    def _set_up(self) -> None:
        c = self.nodes
        c.wait_for_brokers()
        for name, partitions in {**DATA_TOPICS, VICTIM: 1}.items():
            create_topic(c, name, partitions)
        data = DataClient({i: f"127.0.0.1:{c.broker_port[i]}" for i in c.ids})
        for name, partitions in DATA_TOPICS.items():
            for p in range(partitions):
                wait_until(
                    lambda n=name, p=p: (
                        data.produce_raw(
                            data.leader(n, p), n, p, batch([b"seed-%d" % i for i in range(3)])
                        ).error.code
                        == 0
                        or None
                    ),
                    SETUP_TIMEOUT_S,
                    f"a first produce to {name}-{p}",
                )
        for group in GROUPS:  # __consumer_offsets exists before the first case
            wait_until(lambda g=group: self._coordinator_found(g), SETUP_TIMEOUT_S, "a coordinator")
        self.ctx = wait_until(self._context, SETUP_TIMEOUT_S, "every node to know the topics")
        self.mark_logs()

    def address(self, node: int) -> tuple[str, int]:
        return self.nodes.host[node], self.nodes.kafka_port[node]

    def _ask(self, node: int, request: object) -> object:
        prober = Prober(*self.address(node))
        try:
            frame = prober.call(request, timeout_s=5)
        finally:
            prober.close()
        response_type = load_response_schema(request.__api_key__, request.__version__)  # type: ignore[attr-defined]
        header, size = entity_reader(response_type.__header_schema__)(frame, 0)
        return entity_reader(response_type)(frame, size)[0]

    def _coordinator_found(self, group: str) -> bool:
        request = load_request_schema(10, 4)(key_type=0, coordinator_keys=(group,))
        try:
            answer = self._ask(self.nodes.ids[0], request)
        except OSError:
            return False
        return all(c.error_code == ErrorCode.none for c in answer.coordinators)  # type: ignore[attr-defined]

    def _known(self, wanted: dict[str, int]) -> dict[str, object] | None:
        """The topics of one node's Metadata once every node's Kafka listener answers each
        of `wanted` (name -> partitions) with a leader for every partition."""
        request = load_request_schema(3, 12)(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        topics: dict[str, object] = {}
        for node in self.nodes.ids:
            try:
                answer = self._ask(node, request)
            except OSError:
                return None
            topics = {t.name: t for t in answer.topics if t.error_code == ErrorCode.none}  # type: ignore[attr-defined]
            for name, partitions in wanted.items():
                t = topics.get(name)
                if t is None or len(t.partitions) != partitions:  # type: ignore[attr-defined]
                    return None
                if any(p.error_code != ErrorCode.none or p.leader_id < 0 for p in t.partitions):  # type: ignore[attr-defined]
                    return None
        return topics

    def _context(self) -> Context | None:
        names = {**DATA_TOPICS, VICTIM: 1, OFFSETS_TOPIC: OFFSETS_PARTITIONS}
        topics = self._known(names)
        if topics is None:
            return None
        return context(
            {name: topics[name].topic_id for name in names},  # type: ignore[attr-defined]
            {
                (name, p.partition_index): p.leader_id
                for name in names
                for p in topics[name].partitions  # type: ignore[attr-defined]
            },
            tuple(self.nodes.ids),
        )

    # --- logs ------------------------------------------------------------------------

    def log_path(self, node: int) -> str:
        return os.path.join(self.base, f"node{node}", "server.log")

    def mark_logs(self) -> None:
        """What the nodes logged so far is not the fuzzer's business (start-up, recovery)."""
        self.log_seen = {n: os.path.getsize(self.log_path(n)) for n in self.nodes.ids}

    def new_log(self, node: int) -> str:
        """What `node` logged since the last look."""
        with open(self.log_path(node), "rb") as f:
            f.seek(self.log_seen.get(node, 0))
            data = f.read()
        self.log_seen[node] = self.log_seen.get(node, 0) + len(data)
        return data.decode(errors="replace")

    # --- processes -------------------------------------------------------------------

    def exited(self, node: int) -> int | None:
        """The exit status of a node that is no longer running, else None."""
        proc = self.nodes.procs.get(node)
        return None if proc is None else proc.poll()

    def restart(self, node: int) -> None:
        """Kills `node` if it still runs and starts it again; waits until it serves."""
        c = self.nodes
        if node in c.procs:
            c.stop(node, signal.SIGKILL)
        c.start(node)
        c.wait_for_brokers(timeout_s=SETUP_TIMEOUT_S)
        wanted = {**DATA_TOPICS, OFFSETS_TOPIC: OFFSETS_PARTITIONS}  # the victim may be gone
        wait_until(lambda: self._known(wanted), SETUP_TIMEOUT_S, f"node {node} to serve again")
        self.mark_logs()

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop_all()
