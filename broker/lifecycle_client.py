"""A broker's side of its membership: register with the active controller, heartbeat, and
shut down under control (Kafka's BrokerLifecycleManager).

The active controller is found through the voters' CONTROLLER listeners: a standby answers
NOT_CONTROLLER with the active one's id, and any failure moves on to the next voter. A
heartbeat carries the offset the broker's metadata image stands at, so the controller
unfences it once it has caught up (heartbeats come every FENCED_HEARTBEAT_S while it is
fenced) and the broker says it is ready: until the node sets `ready_to_unfence` (its first
image after the catch-up applied, its listeners serving) the heartbeats ask to stay fenced
(want_fence), as Kafka's BrokerLifecycleManager does until setReadyToUnfence, so clients
are never sent to a broker that does not serve yet. STALE_BROKER_EPOCH (its registration
was replaced) registers again. Each process registers under a new incarnation id
(KIP-631), so a restarted broker replaces its old registration at once
(metadata/broker_lifecycle.register_broker). Controlled shutdown
heartbeats with want_shut_down until the controller says every leadership has moved (or
the time runs out). Every heartbeat names the replicas of the broker's failed log
directories, for the controller to move away (KIP-858).
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

from metadata.image import Endpoint
from strom_api.tls import handshake_failure
from strom_api.v1 import common_pb2, controller_pb2, controller_pb2_grpc

log = logging.getLogger("strom.lifecycle")

REGISTRATION_BACKOFF_S = 0.2
FENCED_HEARTBEAT_S = 0.05  # while fenced (Kafka: 10 ms until the initial catch-up)


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
        open_channel: Callable[[str], grpc.aio.Channel] = grpc.aio.insecure_channel,
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
        self.broker_epoch = -1
        self.fenced = True
        self.caught_up = False
        self.ready_to_unfence = False  # set by the node once it serves (above)
        self.last_error = ""
        self._logged_error = ""
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._stubs: dict[int, Any] = {}
        self._active = min(self.voters)
        self._task: asyncio.Task[None] | None = None
        self._shutting_down = False
        # (topic id, partition) of replicas in failed log directories (set by the node).
        self.offline_replicas: Callable[[], Iterable[tuple[bytes, int]]] = tuple

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for channel in self._channels.values():
            await channel.close()

    async def controlled_shutdown(self, timeout_s: float, no_controller_s: float = 5.0) -> bool:
        """Heartbeats with want_shut_down until the controller lets the broker go; returns
        whether it did in time. With no controller answering for `no_controller_s` (the
        whole cluster is stopping and the quorum is gone) it gives up sooner: nobody is
        left to move leaderships to."""
        self._shutting_down = True
        if self._task is not None:
            self._task.cancel()
        if self.broker_epoch < 0:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        last_answer = loop.time()
        while loop.time() < deadline and loop.time() - last_answer < no_controller_s:
            response = await self._call("BrokerHeartbeat", self._heartbeat(want_shut_down=True))
            if response is not None:
                last_answer = loop.time()
                if response.should_shut_down:
                    return True
            await asyncio.sleep(min(self.interval, 0.2))
        return False

    # --- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._shutting_down:
            if self.broker_epoch < 0:
                delay = 0.0 if await self._register() else REGISTRATION_BACKOFF_S
            else:
                response = await self._call("BrokerHeartbeat", self._heartbeat())
                delay = self.interval
                if response is not None:
                    self.fenced = response.is_fenced
                    self.caught_up = response.is_caught_up
                    # Kafka's broker heartbeats every 10 ms until its initial catch-up is
                    # done: a (re)started broker is unfenced as soon as it has replayed its
                    # registration, not a few heartbeat intervals later.
                    if self.fenced:
                        delay = FENCED_HEARTBEAT_S
            await asyncio.sleep(delay)

    async def _register(self) -> bool:
        """One registration attempt; whether it registered."""
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
                duplicate = self.last_error.startswith("DUPLICATE_BROKER_REGISTRATION")
                refused = self.last_error.startswith("SSL handshake failed")  # as Kafka's
                log.log(
                    logging.ERROR if duplicate or refused else logging.INFO,
                    "Broker %d not registered yet: %s",
                    self.broker_id,
                    self.last_error,
                )
            return False
        self._logged_error = ""
        self.broker_epoch = response.broker_epoch
        log.info(
            "Broker %d registered with the controller (incarnation %s, broker epoch %d)",
            self.broker_id,
            uuid.UUID(bytes=self.incarnation_id),
            self.broker_epoch,
        )
        return True

    def _heartbeat(self, want_shut_down: bool = False) -> Any:
        offline: dict[bytes, list[int]] = {}
        for topic_id, partition in self.offline_replicas():
            offline.setdefault(topic_id, []).append(partition)
        return controller_pb2.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self.metadata_offset(),
            want_fence=not self.ready_to_unfence,
            want_shut_down=want_shut_down,
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
        for _ in range(len(self.voters) + 1):
            response = await self._call(method, request)
            if response is not None:
                return response
        return None

    async def forward(self, method: str, request: Any, timeout_s: float) -> Any | None:
        """A client's admin request, forwarded to the active controller (KIP-590): its
        answer as it is, following NOT_CONTROLLER; None when no controller answered in
        `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        not_controller = common_pb2.ErrorCode.Value("NOT_CONTROLLER")
        while loop.time() < deadline:
            stub = self._stub(self._active)
            try:
                response = await getattr(stub, method)(
                    request, timeout=max(deadline - loop.time(), 0.1)
                )
            except grpc.aio.AioRpcError as exc:
                self.last_error = self._rpc_error(exc)
                self._next_voter()
                await asyncio.sleep(0.05)
                continue
            has_error = "error" in response.DESCRIPTOR.fields_by_name
            if has_error and response.error.error.code == not_controller:
                active = response.error.active_controller_id
                if active in self.voters and active != self._active:
                    self._active = active
                else:
                    self._next_voter()
                    await asyncio.sleep(0.05)
                continue
            return response
        return None

    async def _call(self, method: str, request: Any) -> Any | None:
        """The active controller's answer, or None (the error is kept in last_error and
        the next try goes to the controller it names, or the next voter)."""
        stub = self._stub(self._active)
        try:
            response = await getattr(stub, method)(request, timeout=max(self.interval, 1.0))
        except grpc.aio.AioRpcError as exc:
            self.last_error = self._rpc_error(exc)
            self._next_voter()
            return None
        if response.HasField("error"):
            error = response.error
            name = common_pb2.ErrorCode.Name(error.error.code)
            self.last_error = f"{name}: {error.error.message}"
            if name == "STALE_BROKER_EPOCH" or name == "BROKER_ID_NOT_REGISTERED":
                # Only an answer about the current registration means it was replaced; a
                # request stamped with an older epoch (or none yet) says nothing new.
                if getattr(request, "broker_epoch", None) == self.broker_epoch >= 0:
                    self.broker_epoch = -1
            elif error.active_controller_id in self.voters:
                self._active = error.active_controller_id
            else:
                self._next_voter()
            return None
        return response

    def _rpc_error(self, exc: grpc.aio.AioRpcError) -> str:
        """The failure as last_error keeps it: a refused TLS handshake said as such."""
        refused = handshake_failure(exc.details(), self.tls)
        return refused if refused is not None else f"{exc.code().name}: {exc.details()}"

    def _next_voter(self) -> None:
        ids = sorted(self.voters)
        self._active = ids[(ids.index(self._active) + 1) % len(ids)]

    def _stub(self, voter: int) -> Any:
        """One channel and stub per voter, made on first use and kept (a heartbeat every
        couple of seconds must not build them anew)."""
        stub = self._stubs.get(voter)
        if stub is None:
            channel = self._channels[voter] = self.open_channel(self.voters[voter])
            stub = self._stubs[voter] = controller_pb2_grpc.ControllerServiceStub(  # type: ignore[no-untyped-call]
                channel
            )
        return stub
