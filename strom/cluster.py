"""What a client knows of the cluster (Kafka's client Metadata): the brokers, each topic's
partitions with their leaders and leader epochs, and one gRPC channel per broker.

Runs on an asyncio loop. Metadata comes from any broker (the known ones, then the
bootstrap addresses; each request starts one broker further on, as Kafka's client asks its
least loaded node rather than always the same one) and is asked again when a caller marks
it stale (a NOT_LEADER answer, a broker gone) or after `metadata.max.age.ms`; refreshes are
coalesced, at most one in flight, and spaced by `retry.backoff.ms`.

A partition's leader epoch never goes back (KIP-320, as Kafka's client Metadata): an answer
from a broker that has not heard of a newer leader (cut off from the controller, or simply
behind) leaves the newer leader known here in place, so a client that once learned of it is
not sent back to a stale leader that cannot replicate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from strom.connection_states import ConnectionStates, connection_warning
from strom.errors import (
    AUTHORIZATION_ERRORS,
    AuthenticationError,
    KafkaTimeoutError,
    StromError,
    error_for,
    error_name,
)
from strom.repeated_errors import RepeatedErrors
from strom_api.error_codes import ErrorCode
from strom_api.tls import ChannelSecurity, aio_channel, handshake_failure, refused_authentication
from strom_api.v1 import client_pb2, client_pb2_grpc

# Kafka's NetworkClient logger: connection warnings of every client (producer, consumer,
# admin) come from here.
network_log = logging.getLogger("strom.network")

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 128 * 1024 * 1024),
    ("grpc.max_send_message_length", 128 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def channel_options(reconnect_backoff_ms: int, reconnect_backoff_max_ms: int) -> list[Any]:
    """CHANNEL_OPTIONS with the client's reconnect.backoff.ms / .max.ms as the channel's own
    reconnect backoff (gRPC re-dials a broken channel by itself)."""
    first = max(reconnect_backoff_ms, 1)
    return [
        *CHANNEL_OPTIONS[:2],
        ("grpc.initial_reconnect_backoff_ms", first),
        ("grpc.min_reconnect_backoff_ms", first),
        ("grpc.max_reconnect_backoff_ms", max(reconnect_backoff_max_ms, first)),
    ]


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(slots=True)
class TopicInfo:
    error: ErrorCode  # NONE, or why the topic cannot be used now
    message: str = ""
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    topic_id: bytes = b""
    _available: list[int] | None = None

    @property
    def available(self) -> list[int]:
        """The partitions with a leader, sorted: worked out once per metadata answer (a
        TopicInfo is never changed after it is applied), not once per record sent."""
        if self._available is None:
            self._available = sorted(p for p, i in self.partitions.items() if i.leader >= 0)
        return self._available


def topic_info(topic: Any, known: TopicInfo | None) -> TopicInfo:
    """A MetadataResponse topic as a TopicInfo, keeping from `known` (what the client had)
    each partition whose leader epoch is newer than the answer's (KIP-320)."""
    info = TopicInfo(error_name(topic.error.code), topic.error.message, topic_id=topic.topic_id)
    if known is not None and known.topic_id != topic.topic_id:
        known = None  # deleted and created again: its epochs start over
    for p in topic.partitions:
        newer = known.partitions.get(p.partition) if known is not None else None
        if newer is not None and newer.leader_epoch > p.leader_epoch:
            info.partitions[p.partition] = newer
        else:
            info.partitions[p.partition] = PartitionInfo(
                p.leader_id, p.leader_epoch, tuple(p.replicas), tuple(p.isr)
            )
    return info


def _usable(info: TopicInfo) -> bool:
    """Whether a topic can be consumed and produced: it has partitions, even if some
    leader is being elected."""
    return bool(info.partitions) and info.error in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)


def parse_bootstrap(servers: str | Sequence[str]) -> list[str]:
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    addresses = [s.strip() for s in items if s.strip()]
    if not addresses:
        raise StromError(
            ErrorCode.INVALID_CONFIG, "bootstrap_servers is empty: give host:port[,...]"
        )
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise StromError(
                ErrorCode.INVALID_CONFIG, f"bootstrap server '{address}' is not host:port"
            )
    return addresses


class Cluster:
    def __init__(
        self,
        bootstrap: Sequence[str],
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300_000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        tls: ChannelSecurity = None,
    ) -> None:
        self.bootstrap = list(bootstrap)
        self.tls = tls  # None: PLAINTEXT (strom/security.py)
        self.request_timeout_s = request_timeout_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.max_age_s = metadata_max_age_ms / 1000
        self.brokers: dict[int, str] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id = ""
        self.controller_id = -1
        self.wanted: set[str] = set()  # topics this client uses: each refresh asks for them
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, Any] = {}
        self._refreshing: asyncio.Task[None] | None = None
        self._updated = 0.0
        self._stale = True
        self._turn = 0  # where the next metadata request starts among the brokers
        self.last_error = ""
        self.connections = ConnectionStates(reconnect_backoff_ms, reconnect_backoff_max_ms)
        self._channel_options = channel_options(reconnect_backoff_ms, reconnect_backoff_max_ms)
        # Why the last metadata request got no answer from any broker ("" once one answered).
        self.unreachable = ""
        self._topic_errors = RepeatedErrors()  # a wanted topic's error, warned once per cause

    # --- channels ----------------------------------------------------------------------

    def stub_for(self, address: str) -> Any:
        stub = self._stubs.get(address)
        if stub is None:
            channel = aio_channel(address, self.tls, self._channel_options)
            self._channels[address] = channel
            stub = self._stubs[address] = client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]
        return stub

    def channel(self, broker_id: int) -> grpc.aio.Channel:
        """The channel of `broker_id`'s stub (opened by `stub`)."""
        address = self.brokers[broker_id]
        self.stub_for(address)
        return self._channels[address]

    def stub(self, broker_id: int) -> Any:
        address = self.brokers.get(broker_id)
        if address is None:
            raise StromError(
                ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not in the metadata", True
            )
        return self.stub_for(address)

    def node_id(self, address: str) -> int:
        """The broker id at `address`; a bootstrap address not known as a broker is -1, -2,
        ... in the order given, as Kafka numbers bootstrap nodes."""
        for broker_id, known in self.brokers.items():
            if known == address:
                return broker_id
        if address in self.bootstrap:
            return -1 - self.bootstrap.index(address)
        return -1

    def rpc_failed(self, address: str, exc: grpc.aio.AioRpcError) -> None:
        """A request to `address` failed: a connection that could not be set up backs the
        address off (reconnect.backoff.ms) and is warned about once per outage."""
        if not address or exc.code() != grpc.StatusCode.UNAVAILABLE:
            return
        if self.connections.failed(address, time.monotonic()):
            network_log.warning(connection_warning(self.node_id(address), address))

    def rpc_answered(self, address: str) -> None:
        self.connections.succeeded(address)

    async def close(self) -> None:
        if self._refreshing is not None:
            self._refreshing.cancel()
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        self._stubs.clear()

    # --- metadata ----------------------------------------------------------------------

    def mark_stale(self) -> None:
        self._stale = True

    def needs_refresh(self) -> bool:
        return self._stale or time.monotonic() - self._updated > self.max_age_s

    async def refresh(self, topics: Iterable[str] = (), auto_create: bool = False) -> None:
        """Asks one broker for the metadata of the wanted topics; concurrent callers share
        one request."""
        self.wanted.update(topics)
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.create_task(self._refresh(auto_create))
        await asyncio.shield(self._refreshing)

    async def _refresh(self, auto_create: bool) -> None:
        since = time.monotonic() - self._updated
        if since < self.retry_backoff_s:
            await asyncio.sleep(self.retry_backoff_s - since)
        await self._ask(
            client_pb2.MetadataRequest(
                topics=sorted(self.wanted), allow_auto_topic_creation=auto_create
            )
        )

    async def topic_names(self, exclude_internal: bool = False) -> list[str]:
        """Every topic's name, learning their metadata on the way: what pattern
        subscriptions match against. `exclude_internal` leaves out the topics the metadata
        marks internal (__consumer_offsets), as Kafka's exclude.internal.topics does; a
        user's topic whose name starts with "__" is not one."""
        response = await self._ask(client_pb2.MetadataRequest())
        return [
            t.name
            for t in response.topics
            if t.error.code == 0 and not (exclude_internal and t.is_internal)
        ]

    async def _ask(self, request: Any) -> Any:
        addresses = list(dict.fromkeys([*self.brokers.values(), *self.bootstrap]))
        self._turn = (self._turn + 1) % len(addresses)
        addresses = addresses[self._turn :] + addresses[: self._turn]
        now = time.monotonic()
        ready = [a for a in addresses if self.connections.can_connect(a, now)]
        if not ready:
            # Every address is backing off (reconnect.backoff.ms): wait for the first one
            # rather than dialling them all again at once.
            first = min(addresses, key=self.connections.retry_at)
            await asyncio.sleep(max(self.connections.retry_at(first) - now, 0))
            ready = [first]
        refused: AuthenticationError | None = None
        for address in ready:
            try:
                response = await self.stub_for(address).Metadata(
                    request, timeout=self.request_timeout_s
                )
            except grpc.aio.AioRpcError as exc:
                why = handshake_failure(exc.details(), self.tls)
                self.last_error = f"{address}: {why or f'{exc.code().name} {exc.details()}'}"
                if why is not None and await asyncio.to_thread(
                    refused_authentication, why, self.tls, address
                ):
                    refused = AuthenticationError(f"{why} (broker {address})")
                self.rpc_failed(address, exc)
                continue
            self.rpc_answered(address)
            self.unreachable = ""
            self._apply(response)
            return response
        self._updated = time.monotonic()  # back off before asking again
        if refused is not None:
            raise refused
        self.unreachable = (
            f"no broker reachable ({', '.join(ready)}); last error: {self.last_error}"
        )
        raise StromError(
            ErrorCode.NETWORK_EXCEPTION,
            f"no broker answered a metadata request ({', '.join(ready)}); last error: "
            f"{self.last_error}",
            retriable=True,
        )

    def _apply(self, response: Any) -> None:
        if response.brokers:
            self.brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        for topic in response.topics:
            self.topics[topic.name] = topic_info(topic, self.topics.get(topic.name))
            self._warn_topic_error(topic.name, self.topics[topic.name].error)
        self._updated = time.monotonic()
        self._stale = False

    def _warn_topic_error(self, name: str, error: ErrorCode) -> None:
        """Kafka's NetworkClient warns "Error while fetching metadata ... : {t=ERROR}" for a
        topic the client uses; here once per topic and cause. LEADER_NOT_AVAILABLE is left
        out: it is a topic being created or failing over, gone within moments."""
        if error in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
            self._topic_errors.cleared(name)
        elif name in self.wanted and self._topic_errors.first_time(name, error):
            network_log.warning("Error while fetching metadata: {%s=%s}", name, error)

    async def topic(
        self, name: str, timeout_s: float, auto_create: bool = False, partitions: int = 1
    ) -> TopicInfo:
        """The topic's metadata, waiting up to `timeout_s` for it to exist and have at least
        `partitions` partitions (Kafka's max.block.ms: a producer sending to a partition
        just added waits until the metadata it learns has it); UNKNOWN_TOPIC_OR_PARTITION
        after that, or a timeout when the topic exists with fewer partitions."""
        deadline = time.monotonic() + timeout_s
        while True:
            info = self.topics.get(name)
            if info is not None and _usable(info) and len(info.partitions) >= partitions:
                return info
            if info is not None and _usable(info) and time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"Partition {partitions - 1} of topic {name} with partition count "
                    f"{len(info.partitions)} is not present in metadata after "
                    f"{timeout_s * 1000:.0f} ms."
                )
            if info is not None and info.error in AUTHORIZATION_ERRORS:
                # Kafka's producer and consumer raise this at once: waiting changes nothing.
                raise error_for(info.error, f"topic '{name}': {info.message}")
            if time.monotonic() >= deadline:
                if info is None and (self.unreachable or not self.cluster_id):
                    # Kafka: "Topic X not present in metadata after N ms."; the network is
                    # the cause, not the topic: no broker was reachable, or none answered
                    # yet (a first request still under way when max.block.ms ran out).
                    cause = self.unreachable or (
                        f"no broker answered a metadata request yet ({', '.join(self.bootstrap)})"
                        + (f"; last error: {self.last_error}" if self.last_error else "")
                    )
                    raise KafkaTimeoutError(
                        f"Topic {name} not present in metadata after {timeout_s * 1000:.0f} "
                        f"ms: {cause}"
                    )
                why = info.message if info is not None else "no metadata"
                raise StromError(
                    info.error
                    if info is not None and info.error != ErrorCode.NONE
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic '{name}' not available within {timeout_s:g} s: {why}",
                    retriable=True,
                )
            try:
                self.mark_stale()
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.01)):
                    await self.refresh([name], auto_create)
            except AuthenticationError:
                raise
            except (StromError, TimeoutError):
                pass
            learned = self.topics.get(name)
            if not (learned and len(learned.partitions) >= partitions):
                await asyncio.sleep(min(self.retry_backoff_s, max(deadline - time.monotonic(), 0)))

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """How many partitions each of `topics` has, as last learned; topics without usable
        metadata (unknown, deleted, not yet learned) are left out."""
        counts = {}
        for name in topics:
            info = self.topics.get(name)
            if info is not None and _usable(info):
                counts[name] = len(info.partitions)
        return counts

    def leader(self, topic: str, partition: int) -> int:
        info = self.topics.get(topic)
        if info is None:
            return -1
        found = info.partitions.get(partition)
        return -1 if found is None else found.leader

    def leader_epoch(self, topic: str, partition: int) -> int:
        info = self.topics.get(topic)
        found = None if info is None else info.partitions.get(partition)
        return -1 if found is None else found.leader_epoch
