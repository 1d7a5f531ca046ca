"""What a running node shows its health service and its metrics collector, so that neither
imports the node (server/node.py imports both; docs/architecture.md §2):

- `NodeStatus`: the facts readiness is decided from, a frozen snapshot the node recomputes
  each time its health service asks (server/health.py holds the rule);
- `MetricsSources`: the parts of the node the scrape-time collector reads
  (server/metrics.py), read-only, live at each scrape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.replica_manager import ReplicaManager
    from coordinator.group.runtime import GroupCoordinator
    from metadata.controller import QuorumController
    from raft.core import RaftCore
    from raft.driver import DriverStats
    from server.sasl_exchange import AuthenticationCounts
    from storage.log_manager import LogManager


@dataclass(frozen=True)
class NodeStatus:
    """The readiness facts of one node at one moment. Facts of a role the node does not have
    are ignored by the rule (a broker-only node's Raft leader, a controller's fencing)."""

    controller_role: bool
    broker_role: bool
    # Controller: it leads or follows the Raft leader of the current epoch.
    raft_leader_known: bool
    # Broker: its log directories are loaded and none is offline after a disk error.
    log_dirs_online: bool
    # Broker: the controller says it has caught up with the metadata log...
    caught_up: bool
    # ...and has unfenced it (the broker lifecycle's answers to its heartbeats).
    unfenced: bool


class NodeIdentity(Protocol):
    """What the metrics read of the node's configuration (a ServerConfig)."""

    @property
    def node_id(self) -> int: ...

    @property
    def voters(self) -> Mapping[int, str]: ...  # a node not among them is a Raft observer

    @property
    def protocols(self) -> Mapping[str, str]: ...  # one authentication series per listener


class AuthorizerDenials(Protocol):
    """The authorizer's denial counts by Kafka's operation name (a RequestAuthorizer)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def denied(self) -> Mapping[str, int]: ...


class RaftView(Protocol):
    """The metadata log's Raft driver, as the metrics read it."""

    @property
    def core(self) -> RaftCore | None: ...

    def stats(self) -> DriverStats: ...


class MetricsSources(Protocol):
    """The parts of a node its metrics read; None where the node has not that role (or has
    not started it yet)."""

    @property
    def config(self) -> NodeIdentity: ...

    @property
    def driver(self) -> RaftView: ...

    @property
    def controller(self) -> QuorumController | None: ...

    @property
    def log_manager(self) -> LogManager | None: ...

    @property
    def replicas(self) -> ReplicaManager | None: ...

    @property
    def groups(self) -> GroupCoordinator | None: ...

    @property
    def authentications(self) -> AuthenticationCounts: ...

    @property
    def authz(self) -> AuthorizerDenials: ...
