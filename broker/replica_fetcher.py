"""The follower side of replication (docs/architecture.md §6): the pump over
broker/follower_fetch.py, whose FollowerFetch decides which stream follows which partition,
what each fetch asks and what its answer does. Here: one bidirectional gRPC stream per
(leader broker, fetcher index), at most `num.replica.fetchers` per leader, multiplexing every
partition this broker follows there (after Kafka's ReplicaFetcherManager and
ReplicaFetcherThread); each stream's task sends the core's next fetch, waits for the answer
(or for the end of a rest, of a backoff, of the follower quota's debt, or for a follow),
hands it back, and logs what it did. A stream that fails (the leader gone, a reset, a read
timeout, a whole-response error) is closed and opened again after the core's backoff.

replica.fetch.max.bytes and num.replica.fetchers are read from ReplicationSettings, so a
dynamic change applies to the next fetch, and resizes the pool (FetcherManager.resize).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from broker.channel_options import CHANNEL_OPTIONS
from broker.follower_fetch import (
    IDLE_MS,
    Answered,
    Applied,
    FetchRequest,
    FetchStream,
    FollowerFetch,
    Placement,
    StreamKey,
)
from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from broker.replica_wire import HURRY, request_pb, response_of
from broker.replication_settings import ReplicationSettings
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode
from strom_api.sasl_client import stream_failed, stream_metadata
from strom_api.v1 import replica_pb2_grpc

log = logging.getLogger("strom.fetcher")

# open_channel(address, options=...): a channel to a leader's inter-broker listener.
OpenChannel = Callable[..., grpc.aio.Channel]


def now_ms() -> int:
    return int(time.monotonic() * 1000)


class StreamGivenUp(ConnectionError):
    """The core gave the stream up (a whole-response error)."""


def log_answered(stream: FetchStream, answered: Answered) -> None:
    leader = stream.leader_id
    for o in answered.outcomes:
        name = o.partition.name
        if o.applied is Applied.DIVERGED:
            assert o.answer.diverging is not None
            log.info(
                "%s diverged from leader %d at epoch %d: truncated to %d",
                name,
                leader,
                o.answer.diverging[0],
                o.log_end_offset,
            )
        elif o.applied is Applied.RESTARTED:
            log.info(
                "%s is behind the leader's log start %d: starting there",
                name,
                o.answer.log_start_offset,
            )
        elif o.applied is Applied.RESTING and o.cause is not None:
            log.warning("replica fetch of %s from broker %d: %s", name, leader, o.cause)
        elif o.applied is Applied.RESTING and o.answer.error != ErrorCode.OFFSET_OUT_OF_RANGE:
            log.debug("replica fetch of %s: %s", name, o.answer.error)
        elif o.applied is Applied.FAILED:
            if not isinstance(o.cause, ApiError):
                log.error(
                    "unexpected error applying the fetch of %s from broker %d",
                    name,
                    leader,
                    exc_info=o.cause,
                )
            log.error(
                "replica fetcher to broker %d: %s is marked failed and no longer fetched: %s",
                leader,
                name,
                o.cause if isinstance(o.cause, ApiError) else "unexpected error",
            )


# --- one stream -------------------------------------------------------------------------------


class ReplicaFetcher:
    """The task and the gRPC stream of one FetchStream."""

    def __init__(
        self,
        stream: FetchStream,
        broker_epoch: Callable[[], int],
        open_channel: OpenChannel = grpc.aio.insecure_channel,
    ) -> None:
        self.stream = stream
        self.broker_epoch = broker_epoch
        self.open_channel = open_channel  # TLS when the inter-broker listener is SSL
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._channel: grpc.aio.Channel | None = None
        # Checked as well as the cancel: a grpc.aio call whose answer arrives in the turn the
        # task is cancelled returns the answer and drops the cancel, and a loop that relied
        # on the cancel alone would go on fetching while stop() waited for it for ever.
        self._stopped = False
        self._call: Any = None  # the stream's call while it is open
        # One write at a time on a stream: a hurry is not sent while a fetch is being
        # written, and the next fetch is not written while a hurry is.
        self._writing = False
        self._hurry_write: asyncio.Task[None] | None = None

    def wake(self) -> None:
        """A partition joined: look at the plan again (and start, the first time); if the
        fetch out does not ask for it, hurry that fetch's answer."""
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        self._maybe_hurry()

    def _maybe_hurry(self) -> None:
        call = self._call
        if call is None or self._writing or self._hurry_write is not None:
            return
        if self.stream.take_hurry():
            self._hurry_write = asyncio.create_task(self._send_hurry(call))

    async def _send_hurry(self, call: Any) -> None:
        try:
            await call.write(HURRY)
        except Exception as exc:  # the stream broke: its read sees why, and reconnects
            log.debug("hurry to broker %d not sent: %s", self.stream.leader_id, exc)
        finally:
            self._hurry_write = None

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._channel is not None:
            await self._channel.close()

    async def _run(self) -> None:
        stream = self.stream
        while not self._stopped:
            call = None
            why = "unexpected error"
            renew = False  # the stream ended for its SASL session to be renewed
            try:
                self._channel = self.open_channel(stream.address, options=CHANNEL_OPTIONS)
                stub = replica_pb2_grpc.ReplicaServiceStub(self._channel)  # type: ignore[no-untyped-call]
                call = self._call = stub.Fetch(metadata=await stream_metadata(self._channel))
                while True:
                    request = await self._next_fetch()
                    if self._hurry_write is not None:
                        await self._hurry_write  # one for the fetch before: never raises
                    self._writing = True
                    try:
                        await call.write(request_pb(request))
                    finally:
                        self._writing = False
                    self._maybe_hurry()  # a follow while the fetch was being written
                    timeout = stream.read_timeout_ms / 1000
                    async with asyncio.timeout(timeout):
                        response = await call.read()
                    if response is grpc.aio.EOF:
                        raise ConnectionError("the leader closed the replication stream")
                    answered = stream.answered(
                        request.correlation_id, response_of(response), now_ms()
                    )
                    log_answered(stream, answered)
                    if answered.broken is not None:
                        raise StreamGivenUp(answered.broken)
            except asyncio.CancelledError:
                if call is not None:
                    call.cancel()
                raise
            except grpc.aio.AioRpcError as exc:
                renew = stream_failed(self._channel, exc)
                why = f"{exc.code().name}: {exc.details()}"
                self._log_failure(why)
            except (ConnectionError, TimeoutError, asyncio.InvalidStateError) as exc:
                # InvalidStateError: the leader's end of the stream went away (a process
                # killed or halted) between two fetches; as expected as a refused connect.
                why = str(exc) or type(exc).__name__
                self._log_failure(why)
            except Exception:  # a bug must not stop replication for good: log, back off
                log.exception("replica fetcher to broker %d failed", stream.leader_id)
            finally:
                self._call = None
                if call is not None:
                    call.cancel()
                if self._channel is not None:
                    await self._channel.close()
                    self._channel = None
            now = now_ms()
            await asyncio.sleep(max(stream.broken(now, why, back_off=not renew) - now, 0) / 1000)

    def _log_failure(self, why: str) -> None:
        log.info(
            "replica fetcher to broker %d (%s): %s", self.stream.leader_id, self.stream.address, why
        )

    async def _next_fetch(self) -> FetchRequest:
        """The core's next fetch; waits while there is none."""
        while True:
            if self._stopped:
                raise asyncio.CancelledError()
            now = now_ms()
            request = self.stream.next_fetch(now, self.broker_epoch())
            if request is not None:
                return request
            self._wake.clear()
            wake_at = self.stream.wake_at(now)
            wait_ms = IDLE_MS if wake_at is None else max(wake_at - now, 1)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_ms / 1000):
                    await self._wake.wait()


# --- every stream -------------------------------------------------------------------------


class FetcherManager:
    """Follows and unfollows partitions through the core (FollowerFetch: which stream, by
    (leader, hash of the partition mod num.replica.fetchers)), and keeps one ReplicaFetcher
    per stream of the core: one the core retired (a resize left it empty, its leader moved to
    another address) is stopped."""

    def __init__(
        self,
        broker_id: int,
        config: ReplicaConfig,
        broker_epoch: Callable[[], int],
        leader_address: Callable[[int], str | None],
        replication: ReplicationSettings | None = None,
        open_channel: OpenChannel = grpc.aio.insecure_channel,
    ) -> None:
        self.broker_id = broker_id
        self.open_channel = open_channel
        self.broker_epoch = broker_epoch
        self.leader_address = leader_address
        self.replication = replication or ReplicationSettings(broker_id, config)
        self.core = FollowerFetch(broker_id, config, self.replication)
        self._pumps: dict[FetchStream, ReplicaFetcher] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._stopped = False  # no fetcher starts once stop() began (metadata still arrives)
        self.replication.on_change.append(self.resize)

    @property
    def fetchers(self) -> dict[StreamKey, FetchStream]:
        return self.core.streams

    def resize(self) -> None:
        """Applies the current num.replica.fetchers (replica.fetch.max.bytes needs nothing:
        every fetch reads it)."""
        size = self.replication.num_fetchers
        if size == self.core.size:
            return
        log.info("Resizing fetcher thread pool size from %d to %d", self.core.size, size)
        for partition, placement in self.core.resize(size, self.leader_address):
            self._placed(partition, placement)
        self._retire()

    def follow(self, partition: Partition) -> None:
        """Puts the partition on the fetcher of its current leader (or on none, when this
        broker leads it or it has no leader)."""
        self._placed(partition, self.core.follow(partition, self.leader_address))
        self._retire()

    def unfollow(self, partition: Partition) -> None:
        self.core.unfollow(partition)

    def _placed(self, partition: Partition, placement: Placement) -> None:
        if placement.no_address:
            log.warning("no address for leader %d of %s", partition.leader_id, partition.name)
        stream = placement.stream
        if stream is None or self._stopped:
            return
        pump = self._pumps.get(stream)
        if pump is None:
            pump = self._pumps[stream] = ReplicaFetcher(
                stream, self.broker_epoch, self.open_channel
            )
        pump.wake()

    def _retire(self) -> None:
        """Stops the fetchers of the streams the core let go of."""
        live = set(self.core.streams.values())
        for stream in [s for s in self._pumps if s not in live]:
            task = asyncio.create_task(self._pumps.pop(stream).stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    async def stop(self) -> None:
        self._stopped = True
        await asyncio.gather(*(f.stop() for f in self._pumps.values()), *list(self._stopping))
        self._pumps.clear()
