"""The readiness decision of server/health.py from the status snapshot a node publishes
(server/node_status.NodeStatus): each fact a role needs, false, makes the node not ready with
its reason; facts of a role the node does not have are ignored."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from server.health import READY_SERVICE, NodeHealth, not_ready_reason
from server.node_status import NodeStatus

ALL_TRUE = dict(raft_leader_known=True, log_dirs_online=True, caught_up=True, unfenced=True)
CONTROLLER = NodeStatus(controller_role=True, broker_role=False, **ALL_TRUE)
BROKER = NodeStatus(controller_role=False, broker_role=True, **ALL_TRUE)
COMBINED = NodeStatus(controller_role=True, broker_role=True, **ALL_TRUE)

NO_LEADER = "the controller knows no Raft leader of the current epoch"
LOG_DIRS = "a log directory is offline (or the log directories are not loaded yet)"
NOT_CAUGHT_UP = "the broker has not caught up with the metadata log"
FENCED = "the broker is fenced by the controller"

# (node with every fact true, the fact made false, the reason; None: still ready)
CASES = [
    (CONTROLLER, "raft_leader_known", NO_LEADER),
    (CONTROLLER, "log_dirs_online", None),
    (CONTROLLER, "caught_up", None),
    (CONTROLLER, "unfenced", None),
    # A broker-only node that loses the controllers goes on serving until it is fenced.
    (BROKER, "raft_leader_known", None),
    (BROKER, "log_dirs_online", LOG_DIRS),
    (BROKER, "caught_up", NOT_CAUGHT_UP),
    (BROKER, "unfenced", FENCED),
    (COMBINED, "raft_leader_known", NO_LEADER),
    (COMBINED, "log_dirs_online", LOG_DIRS),
    (COMBINED, "caught_up", NOT_CAUGHT_UP),
    (COMBINED, "unfenced", FENCED),
]


@pytest.mark.parametrize(
    "node, fact, reason",
    CASES,
    ids=[
        f"{'+'.join(r for r in ('controller', 'broker') if getattr(n, r + '_role'))}-{f}"
        for n, f, _ in CASES
    ],
)
def test_each_fact_a_role_needs(node: NodeStatus, fact: str, reason: str | None) -> None:
    assert not_ready_reason(node) is None
    assert not_ready_reason(dataclasses.replace(node, **{fact: False})) == reason


def test_a_starting_combined_node_names_the_first_fact_it_lacks() -> None:
    # In the order a starting node passes them: Raft leader, log dirs, catch-up, unfencing.
    nothing = NodeStatus(True, True, False, False, False, False)
    assert not_ready_reason(nothing) == NO_LEADER
    leader = dataclasses.replace(nothing, raft_leader_known=True)
    assert not_ready_reason(leader) == LOG_DIRS
    loaded = dataclasses.replace(leader, log_dirs_online=True)
    assert not_ready_reason(loaded) == NOT_CAUGHT_UP
    assert not_ready_reason(dataclasses.replace(loaded, caught_up=True)) == FENCED


def test_the_health_service_answers_and_logs_each_change(caplog: pytest.LogCaptureFixture) -> None:
    # Real gRPC: a probe's Check follows the snapshot; each change is logged once, with its
    # reason, however many times the same answer is recomputed.
    async def run() -> None:
        current = [dataclasses.replace(BROKER, caught_up=False)]
        health = NodeHealth(lambda: current[0], interval_s=0.01)
        server = grpc.aio.server()
        health.add_to(server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            await health.start()
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)

                async def settled(want: int) -> None:
                    for _ in range(200):
                        request = health_pb2.HealthCheckRequest(service=READY_SERVICE)
                        if (await stub.Check(request, timeout=2)).status == want:
                            return
                        await asyncio.sleep(0.01)
                    raise AssertionError(f"readiness never became {want}")

                await settled(health_pb2.HealthCheckResponse.NOT_SERVING)
                await asyncio.sleep(0.05)  # several recomputations of the same answer
                current[0] = BROKER
                await settled(health_pb2.HealthCheckResponse.SERVING)
                current[0] = dataclasses.replace(BROKER, unfenced=False)
                await settled(health_pb2.HealthCheckResponse.NOT_SERVING)
        finally:
            await health.stop()
            await server.stop(0)

    with caplog.at_level(logging.INFO, logger="strom.health"):
        asyncio.run(run())
    assert [r.getMessage() for r in caplog.records] == [
        f"{READY_SERVICE}: NOT_SERVING, {NOT_CAUGHT_UP}",
        f"{READY_SERVICE}: SERVING",
        f"{READY_SERVICE}: NOT_SERVING, {FENCED}",
    ]
