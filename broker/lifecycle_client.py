"""A broker's side of its membership (Kafka's BrokerLifecycleManager), the pump: the
decisions (when to register and heartbeat, what a heartbeat asks, what an answer does, when
a controlled shutdown is over) are broker/lifecycle_state.BrokerLifecycle's; this module
sends its requests to the active controller over gRPC and feeds the answers back.

The active controller is found through the voters' CONTROLLER listeners: which voter each
try goes to, what an answer or a failure does to that and when a call gives up are
broker/controller_routing.ControllerRouting's rules (a standby answers NOT_CONTROLLER with
the active one's id, any failure moves on to the next voter); this module asks. A
heartbeat carries the offset the broker's metadata image stands at, so the controller
unfences it once it has caught up, and names the replicas of the broker's failed log
directories, for the controller to move away (KIP-858). Each process registers under a new
incarnation id (KIP-631), so a restarted broker replaces its old registration at once
(metadata/broker_lifecycle.register_broker).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import grpc
import grpc.aio

from broker.channel_options import CHANNEL_OPTIONS
from broker.controller_routing import FORWARD_BACKOFF_S, NO_CONTROLLER_S, ControllerRouting
from broker.lifecycle_state import (
    REGISTRATION_ERRORS,
    BrokerHeartbeat,
    BrokerLifecycle,
    RegisterBroker,
    Request,
)
from metadata.image import Endpoint
from strom_api.error_codes import ErrorCode
from strom_api.tls import handshake_failure
from strom_api.v1 import common_pb2, controller_pb2, controller_pb2_grpc

log = logging.getLogger("strom.lifecycle")


def _refused(exc: grpc.aio.AioRpcError) -> bool:
    """The controller refused the request itself: malformed or out of bounds (its gRPC
    guard's INVALID_ARGUMENT), or larger than its listener's socket.request.max.bytes (gRPC's
    RESOURCE_EXHAUSTED "Received message larger than max": a Kafka request under the Kafka
    listener's limit can grow past it as protobuf). RESOURCE_EXHAUSTED for a full request
    queue (queued.max.requests) passes, so it is tried again."""
    if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
        return True
    return exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in (
        exc.details() or ""
    )


class ForwardRefused(Exception):
    """A controller refused a forwarded request itself (`_refused`): another try, or another
    controller, would refuse it alike, so the client hears it now rather than at the
    forward's deadline (30 s of retries before)."""

    def __init__(self, details: str) -> None:
        super().__init__(details)
        self.details = details


class LifecycleClient:
    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        voters: Mapping[int, str],
        endpoints: Sequence[Endpoint],
        rack: str | None,
        metadata_offset: Callable[[], int],
        heartbeat_interval_ms: int = 2000,
        previous_broker_epoch: int = -1,
        # open_channel(address, options)
        open_channel: Callable[..., grpc.aio.Channel] = grpc.aio.insecure_channel,
        tls: bool = False,
    ) -> None:
        self.broker_id = broker_id
        self.open_channel = open_channel  # TLS when the controller listener is SSL
        self.tls = tls
        # The epoch of its last clean shutdown, -1 if none (KIP-966; metadata/broker_lifecycle)
        self.previous_broker_epoch = previous_broker_epoch
        self.cluster_id = cluster_id
        self.voters = dict(voters)
        self.endpoints = list(endpoints)
        self.rack = rack
        self.metadata_offset = metadata_offset
        self.interval = heartbeat_interval_ms / 1000
        self.incarnation_id = uuid.uuid4().bytes
        self.core = BrokerLifecycle(broker_id, self.interval)
        self.last_error = ""
        self._logged_error = ""
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._stubs: dict[int, Any] = {}
        self.routing = ControllerRouting(self.voters)
        self._task: asyncio.Task[None] | None = None
        self._background_stopped = False
        # (topic id, partition) of replicas in failed log directories (set by the node).
        self.offline_replicas: Callable[[], Iterable[tuple[bytes, int]]] = tuple

    # What the node reads of the core: its registration, and what the controller last said.
    @property
    def broker_epoch(self) -> int:
        return self.core.broker_epoch

    @property
    def fenced(self) -> bool:
        return self.core.fenced

    @property
    def caught_up(self) -> bool:
        return self.core.caught_up

    @property
    def ready_to_unfence(self) -> bool:
        return self.core.ready_to_unfence

    @ready_to_unfence.setter
    def ready_to_unfence(self, ready: bool) -> None:
        """Set by the node once it serves (broker/lifecycle_state.py)."""
        if ready:
            self.core.set_ready_to_unfence()

    def start(self) -> None:
        self._task = asyncio.create_task(self._pump(background=True))

    async def stop(self) -> None:
        await self._stop_background_pump()
        for channel in self._channels.values():
            await channel.close()

    async def _stop_background_pump(self) -> None:
        """Ends the pump start() began and waits until it has ended, so that no two pumps ever
        drive the core. The flag matters as much as the cancel: a gRPC call whose answer
        arrives as the task is cancelled returns that answer instead of raising
        CancelledError (grpc.aio's call swallows the cancel), and the pump would go on."""
        self._background_stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def controlled_shutdown(
        self, timeout_s: float, no_controller_s: float = NO_CONTROLLER_S
    ) -> bool:
        """Heartbeats with want_shut_down until the controller lets the broker go; returns
        whether it did in time (the rules: BrokerLifecycle.begin_controlled_shutdown)."""
        await self._stop_background_pump()
        loop = asyncio.get_running_loop()
        self.core.begin_controlled_shutdown(loop.time(), timeout_s, no_controller_s)
        await self._pump(background=False)
        return self.core.released

    # --- the pump --------------------------------------------------------------------------

    async def _pump(self, background: bool) -> None:
        """Does what the core says until it is done: send, or sleep until it wants to look
        again. One request at a time, so the core always has a wake-up time after one. The
        background pump also ends when told to (_stop_background_pump)."""
        loop = asyncio.get_running_loop()
        while not (background and self._background_stopped):
            step = self.core.poll(loop.time())
            if step.done:
                return
            if step.send is not None:
                await self._send(step.send)
            else:
                assert step.wake_at is not None, "nothing in flight and nothing to wait for"
                await asyncio.sleep(max(step.wake_at - loop.time(), 0.0))

    async def _send(self, request: Request) -> None:
        loop = asyncio.get_running_loop()
        if isinstance(request, RegisterBroker):
            response = await self._register()
            if response is None:
                self.core.failed(request.request_id, loop.time())
            else:
                self.core.registered(request.request_id, response.broker_epoch, loop.time())
            return
        response = await self._call("BrokerHeartbeat", self._heartbeat(request))
        if response is None:
            self.core.failed(request.request_id, loop.time())
        else:
            self.core.heartbeat_answered(
                request.request_id,
                response.is_caught_up,
                response.is_fenced,
                response.should_shut_down,
                loop.time(),
            )

    async def _register(self) -> Any | None:
        """One registration attempt: the controller's answer, or None."""
        request = controller_pb2.RegisterBrokerRequest(
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            endpoints=[e.to_pb() for e in self.endpoints],
            rack=self.rack or "",
            previous_broker_epoch=self.previous_broker_epoch,
        )
        response = await self._call("RegisterBroker", request)
        if response is None:
            if self.last_error != self._logged_error:  # once per cause, not every retry
                self._logged_error = self.last_error
                # Routine while the quorum forms; not so for a second process with this id.
                duplicate = self.last_error.startswith(ErrorCode.DUPLICATE_BROKER_REGISTRATION)
                refused = self.last_error.startswith("SSL handshake failed")  # as Kafka's
                log.log(
                    logging.ERROR if duplicate or refused else logging.INFO,
                    "Broker %d not registered yet: %s",
                    self.broker_id,
                    self.last_error,
                )
            return None
        self._logged_error = ""
        log.info(
            "Broker %d registered with the controller (incarnation %s, broker epoch %d)",
            self.broker_id,
            uuid.UUID(bytes=self.incarnation_id),
            response.broker_epoch,
        )
        return response

    def _heartbeat(self, request: BrokerHeartbeat) -> Any:
        offline: dict[bytes, list[int]] = {}
        for topic_id, partition in self.offline_replicas():
            offline.setdefault(topic_id, []).append(partition)
        return controller_pb2.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=request.broker_epoch,
            current_metadata_offset=self.metadata_offset(),
            want_fence=request.want_fence,
            want_shut_down=request.want_shut_down,
            offline_replicas=[
                controller_pb2.BrokerHeartbeatRequest.OfflineReplicas(
                    topic_id=topic_id, partitions=sorted(partitions)
                )
                for topic_id, partitions in sorted(offline.items())
            ],
        )

    async def call_controller(self, method: str, request: Any) -> Any | None:
        """Any ControllerService call from this broker (AlterPartition, AllocateProducerIds,
        CreateTopics), following NOT_CONTROLLER; None when no voter answered it."""
        for _ in range(self.routing.attempts):
            response = await self._call(method, request)
            if response is not None:
                return response
        return None

    async def forward(self, method: str, request: Any, timeout_s: float) -> Any | None:
        """A client's admin request, forwarded to the active controller (KIP-590): its
        answer as it is, following NOT_CONTROLLER; None when no controller answered in
        `timeout_s`. Raises ForwardRefused when a controller refused the request itself."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        not_controller = common_pb2.ErrorCode.Value(ErrorCode.NOT_CONTROLLER)
        while loop.time() < deadline:
            stub = self._stub(self.routing.target)
            try:
                response = await getattr(stub, method)(
                    request, timeout=max(deadline - loop.time(), 0.1)
                )
            except grpc.aio.AioRpcError as exc:
                if _refused(exc):
                    raise ForwardRefused(exc.details() or "") from None
                self.last_error = self._rpc_error(exc)
                self.routing.no_answer()
                await asyncio.sleep(FORWARD_BACKOFF_S)
                continue
            has_error = "error" in response.DESCRIPTOR.fields_by_name
            if has_error and response.error.error.code == not_controller:
                if not self.routing.forward_refused(response.error.active_controller_id):
                    await asyncio.sleep(FORWARD_BACKOFF_S)
                continue
            return response
        return None

    async def _call(self, method: str, request: Any) -> Any | None:
        """The active controller's answer, or None (the error is kept in last_error and
        the next try goes to the controller it names, or the next voter)."""
        stub = self._stub(self.routing.target)
        try:
            response = await getattr(stub, method)(request, timeout=max(self.interval, 1.0))
        except grpc.aio.AioRpcError as exc:
            self.last_error = self._rpc_error(exc)
            self.routing.no_answer()
            return None
        if response.HasField("error"):
            error = response.error
            name = common_pb2.ErrorCode.Name(error.error.code)
            self.last_error = f"{name}: {error.error.message}"
            if name in REGISTRATION_ERRORS:
                # Whether it means the registration was replaced is the core's rule.
                self.core.refused(name, getattr(request, "broker_epoch", None))
            else:
                self.routing.refused(error.active_controller_id)
            return None
        return response

    def _rpc_error(self, exc: grpc.aio.AioRpcError) -> str:
        """The failure as last_error keeps it: a refused TLS handshake said as such."""
        refused = handshake_failure(exc.details(), self.tls)
        return refused if refused is not None else f"{exc.code().name}: {exc.details()}"

    def _stub(self, voter: int) -> Any:
        """One channel and stub per voter, made on first use and kept (a heartbeat every
        couple of seconds must not build them anew)."""
        stub = self._stubs.get(voter)
        if stub is None:
            channel = self._channels[voter] = self.open_channel(
                self.voters[voter], CHANNEL_OPTIONS
            )
            stub = self._stubs[voter] = controller_pb2_grpc.ControllerServiceStub(  # type: ignore[no-untyped-call]
                channel
            )
        return stub
