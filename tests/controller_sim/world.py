"""The simulated world of tests/sim (clock, network, real RaftCore nodes), with the metadata
state machine on every node and the metadata checker, composed without changing tests/sim:

- ControllerCluster is the simulator's Cluster; its listener, told first when a node
  (re)starts, gives the new incarnation a MetadataStateMachine before the first Ready, and
  `propose` traces metadata records readably (the base class decodes them as text);
- ControllerWorld is the simulator's World built over those, with a MetadataChecker, so the
  scenario helpers of tests/sim/scenario.py (wait_for, stable_leader, snapshot) work on it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from metadata.records import decode
from raft.messages import Entry, Ready
from tests.controller_sim.checker import MetadataChecker
from tests.controller_sim.machine import MetadataStateMachine
from tests.sim.cluster import Cluster, ClusterConfig, ClusterListener, SimNode
from tests.sim.events import EventQueue
from tests.sim.network import Network, NetworkConfig
from tests.sim.scenario import CALM
from tests.sim.trace import Trace
from tests.sim.world import World


def describe_record(data: bytes) -> str:
    record = decode(data)
    fields = ", ".join(
        f"{f.name}={v.hex()[:8] if isinstance(v, bytes) else v}"
        for f, v in record.ListFields()
        if f.name != "endpoints"
    )
    return f"{type(record).__name__.removesuffix('Record')}({fields})"


class _Listener:
    """Puts a MetadataStateMachine on every incarnation, then tells the checker."""

    def __init__(self, checker: ClusterListener) -> None:
        self.checker = checker

    def on_start(self, node: SimNode) -> None:
        node.sm = MetadataStateMachine()
        self.checker.on_start(node)

    def on_crash(self, node: SimNode) -> None:
        self.checker.on_crash(node)

    def on_ready(self, node: SimNode, ready: Ready, committed: Sequence[Entry]) -> None:
        self.checker.on_ready(node, ready, committed)


class ControllerCluster(Cluster):
    def __init__(
        self,
        config: ClusterConfig,
        rng: random.Random,
        queue: EventQueue,
        network: Network,
        listener: ClusterListener,
        trace: Trace,
    ) -> None:
        super().__init__(config, rng, queue, network, _Listener(listener), trace)

    def propose(self, node_id: int, records: Sequence[bytes]) -> int:
        """Raises raft.core.NotLeaderError when the node does not lead."""
        node = self.nodes[node_id]
        assert node.core is not None
        self.touched.add(node_id)
        last = node.core.propose(records)
        self.trace.record(
            f"propose to node {node_id}: {last - len(records) + 1}..{last} "
            f"{[describe_record(r) for r in records]}"
        )
        self._after(node)
        return last

    def image(self, node_id: int) -> MetadataStateMachine:
        sm = self.nodes[node_id].sm
        assert isinstance(sm, MetadataStateMachine)
        return sm


class ControllerWorld(World):
    def __init__(
        self,
        seed: int,
        cluster: ClusterConfig,
        network: NetworkConfig,
        echo: bool = False,
    ) -> None:
        # World.__init__, with the metadata checker and cluster (and a stream for the
        # controller and brokers, drawn after the simulator's, so theirs stay as they were).
        self.seed = seed
        master = random.Random(seed)
        self.streams = {
            name: random.Random(master.getrandbits(64))
            for name in ("network", "cluster", "faults", "clients", "controller")
        }
        self.queue = EventQueue()
        self.trace = Trace(lambda: self.queue.now_ms, echo=echo)
        self.network = Network(self.streams["network"], network)
        self.checker: MetadataChecker = MetadataChecker()
        self.cluster: ControllerCluster = ControllerCluster(
            cluster, self.streams["cluster"], self.queue, self.network, self.checker, self.trace
        )
        self.events = 0
        self.after_event()


def make_controller_world(
    voters: int = 3,
    seed: int = 1,
    network: NetworkConfig = CALM,
    cluster: ClusterConfig | None = None,
) -> ControllerWorld:
    return ControllerWorld(seed, cluster or ClusterConfig(voters=voters), network)
