"""grpc.health.v1 on every listener of a node: what Kubernetes' gRPC probes ask.

Two services, as the probes need them (deploy/k8s):
- "" (the server as a whole, liveness and startup): SERVING while the process answers at
  all. It never depends on a leader or a quorum: a cluster that lost its quorum must not
  have its nodes restarted one after another by their liveness probes. After a fatal fault
  (the node's Raft task died, server/node.py) it answers NOT_SERVING until the process ends.
- "strom.ready" (readiness): SERVING once the node is part of a working cluster:
  - a broker (broker or combined role) has registered, caught up with the metadata log and
    been unfenced by the controller (the broker lifecycle's `caught_up`, as Kafka's broker
    only serves once its initial catch-up is done);
  - a controller (controller or combined role) knows the Raft leader of the current epoch
    (it is the leader, or follows one), so a rolling restart only moves on to the next
    controller once the restarted one has rejoined the quorum.
  A broker with a log directory offline after a disk error (storage.log_dir_failures) is
  not ready: some of its partitions answer only KAFKA_STORAGE_ERROR until it restarts.
  A combined node needs both. A broker-only node that loses the controllers stays ready:
  it goes on serving its partitions (as Kafka's brokers do) until a controller fences it.
  During shutdown it turns NOT_SERVING before the controlled shutdown starts.

The status is recomputed every `interval_s` by a task on the node's event loop, which asks
the node for its status snapshot (server/node_status.NodeStatus; this module never imports
the node), decides, and pushes the answer into grpc_health's servicer (which also answers
Watch streams). Each change of the answer is logged with the reason the node is not ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]
from grpc_health.v1.health import aio  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from server.node_status import NodeStatus

log = logging.getLogger("strom.health")

READY_SERVICE = "strom.ready"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def not_ready_reason(status: NodeStatus) -> str | None:
    """The readiness rule of the module docstring: why the node is not ready, None if it is.
    The first failing fact in the order a starting node passes them."""
    if status.controller_role and not status.raft_leader_known:
        return "the controller knows no Raft leader of the current epoch"
    if status.broker_role:
        if not status.log_dirs_online:
            return "a log directory is offline (or the log directories are not loaded yet)"
        if not status.caught_up:
            return "the broker has not caught up with the metadata log"
        if not status.unfenced:
            return "the broker is fenced by the controller"
    return None


class _HealthServicer(aio.HealthServicer):  # type: ignore[misc]
    """grpc_health's servicer with List, which its aio version leaves unimplemented (every
    List call then logged a traceback)."""

    async def List(self, request: object, context: object) -> object:  # noqa: N802
        statuses = {
            service: health_pb2.HealthCheckResponse(status=status)
            for service, status in sorted(self._server_status.items())
        }
        return health_pb2.HealthListResponse(statuses=statuses)


class NodeHealth:
    """The health servicer of one node, shared by its listeners."""

    def __init__(self, status: Callable[[], NodeStatus], interval_s: float = 0.5) -> None:
        self.servicer = _HealthServicer()
        self.status = status  # the node's snapshot, recomputed on each call
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def add_to(self, server: object) -> None:
        """Adds grpc.health.v1.Health to a gRPC server that has not started yet."""
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)

    async def start(self) -> None:
        await self.servicer.set(READY_SERVICE, NOT_SERVING)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        previous: str | None = ""  # neither ready (None) nor a reason: the first answer logs
        while not self._stopping:
            try:
                reason = not_ready_reason(self.status())
            except Exception:  # a bug here must not leave a stale SERVING behind
                log.exception("could not compute readiness")
                reason = "its readiness could not be computed"
            if reason != previous:
                if reason is None:
                    log.info("%s: SERVING", READY_SERVICE)
                else:
                    log.info("%s: NOT_SERVING, %s", READY_SERVICE, reason)
                previous = reason
            await self.servicer.set(READY_SERVICE, SERVING if reason is None else NOT_SERVING)
            await asyncio.sleep(self.interval_s)

    async def fail(self) -> None:
        """A fatal fault: neither live nor ready from now on (the process is ending)."""
        await self.stop()
        await self.servicer.set("", NOT_SERVING)

    async def stop(self) -> None:
        """Not ready from now on; the process itself still answers SERVING until it exits."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.servicer.set(READY_SERVICE, NOT_SERVING)
