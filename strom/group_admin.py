"""Consumer-group administration through the brokers (the group half of Kafka's Admin
client): list groups (every broker answers for the groups it coordinates), describe them
with their members and assignments, their committed offsets with the log end offsets and
lag, reset committed offsets of an inactive group, delete groups or some of a group's
committed offsets. Synchronous; the calls
run on the process's I/O thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import grpc
import grpc.aio

from strom._loop_thread import shared_loop
from strom.assignors import MalformedAssignment, decode_assignment
from strom.cluster import Cluster, parse_bootstrap
from strom.errors import AuthorizationError, StromError, error_for, error_name, from_pb
from strom.fetcher import EARLIEST, LATEST, FetchConfig, Fetcher, TopicPartition
from strom_api.error_codes import ErrorCode
from strom_api.tls import ChannelSecurity
from strom_api.v1 import client_pb2

T = TypeVar("T")


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str
    protocol_type: str


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol: str
    coordinator: int
    members: tuple[MemberDescription, ...]
    coordinator_address: str = ""  # host:port of the coordinator (Kafka's Node), "" unknown


@dataclass(frozen=True)
class PartitionLag:
    tp: TopicPartition
    committed: int | None
    log_end: int | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(self.log_end - self.committed, 0)


class GroupAdmin:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        request_timeout_ms: int = 30_000,
        tls: ChannelSecurity = None,
    ) -> None:
        """`tls`: the TLS to dial with (strom/security.py), None for PLAINTEXT."""
        self._io = shared_loop()
        self.timeout_s = request_timeout_ms / 1000
        bootstrap = parse_bootstrap(
            bootstrap_servers if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
        )

        async def build() -> tuple[Cluster, Fetcher]:
            cluster = Cluster(bootstrap, request_timeout_ms, tls=tls)
            return cluster, Fetcher(cluster, FetchConfig(request_timeout_ms=request_timeout_ms))

        self._cluster, self._fetcher = self._io.run(build())

    def _run(self, coroutine: Any) -> Any:
        try:
            return self._io.run(coroutine, self.timeout_s + 10)
        except concurrent.futures.TimeoutError:
            raise StromError(
                ErrorCode.REQUEST_TIMED_OUT, "the cluster did not answer in time", True
            ) from None

    def on_brokers(self, work: Callable[[Cluster], Awaitable[T]]) -> T:
        """`work` run with the brokers' cluster on the I/O thread: the broker-side admin
        calls that are not the groups' (strom/log_dirs.py)."""
        return cast(T, self._run(work(self._cluster)))

    def close(self) -> None:
        self._io.run(self._cluster.close())

    def __enter__(self) -> GroupAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- finding -----------------------------------------------------------------------

    async def _coordinator(self, group_id: str) -> int:
        request = client_pb2.FindCoordinatorRequest(key=group_id)
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        last = "no broker answered"
        while asyncio.get_running_loop().time() < deadline:
            if not self._cluster.brokers:
                await self._cluster.refresh()
            for address in list(self._cluster.brokers.values()) or self._cluster.bootstrap:
                try:
                    response = await self._cluster.stub_for(address).FindCoordinator(
                        request, timeout=self.timeout_s
                    )
                except grpc.aio.AioRpcError as exc:
                    last = f"{address}: {exc.code().name}"
                    continue
                if response.error.code == 0:
                    self._cluster.brokers.setdefault(
                        response.node_id, f"{response.host}:{response.port}"
                    )
                    return int(response.node_id)
                refused = from_pb(response.error)
                if isinstance(refused, AuthorizationError):
                    raise refused  # not DESCRIBE on the group: no use asking again
                last = f"{error_name(response.error.code)}: {response.error.message}"
                break
            await asyncio.sleep(0.2)
        raise StromError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"no coordinator for group '{group_id}': {last}",
            True,
        )

    async def _on_coordinator(self, group_id: str, method: str, request: Any) -> Any:
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while True:
            coordinator = await self._coordinator(group_id)
            response = await getattr(self._cluster.stub(coordinator), method)(
                request, timeout=self.timeout_s
            )
            error = _first_error(response)
            if error in (
                ErrorCode.NOT_COORDINATOR,
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ):
                if asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.2)
                    continue
            return response, coordinator

    # --- listing and describing ----------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        async def run() -> list[GroupListing]:
            await self._cluster.refresh()
            found: dict[str, GroupListing] = {}
            for address in self._cluster.brokers.values():
                try:
                    response = await self._cluster.stub_for(address).ListGroups(
                        client_pb2.ListGroupsRequest(), timeout=self.timeout_s
                    )
                except grpc.aio.AioRpcError as exc:
                    raise StromError(
                        ErrorCode.NETWORK_EXCEPTION, f"{address}: {exc.code().name}", True
                    ) from None
                for g in response.groups:
                    found[g.group_id] = GroupListing(g.group_id, g.state, g.protocol_type)
            return sorted(found.values(), key=lambda g: g.group_id)

        return self._run(run())  # type: ignore[no-any-return]

    def describe_group(self, group_id: str) -> GroupDescription:
        async def run() -> GroupDescription:
            response, coordinator = await self._on_coordinator(
                group_id, "DescribeGroups", client_pb2.DescribeGroupsRequest(groups=[group_id])
            )
            g = response.groups[0]
            if g.error.code != 0:
                raise from_pb(g.error)
            members = tuple(
                MemberDescription(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    _assigned(g, m),
                )
                for m in g.members
            )
            address = self._cluster.brokers.get(coordinator, "")
            return GroupDescription(g.group_id, g.state, g.protocol, coordinator, members, address)

        return self._run(run())  # type: ignore[no-any-return]

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        async def run() -> dict[TopicPartition, int]:
            response, _ = await self._on_coordinator(
                group_id, "OffsetFetch", client_pb2.OffsetFetchRequest(group_id=group_id)
            )
            if response.error.code != 0:
                raise from_pb(response.error)
            return {
                TopicPartition(t.name, p.partition): p.committed_offset
                for t in response.topics
                for p in t.partitions
                if p.committed_offset >= 0
            }

        return self._run(run())  # type: ignore[no-any-return]

    def list_offsets(
        self, wanted: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int, int]]:
        """(offset, timestamp, leader epoch) per partition, from each partition's leader."""
        return self._run(self._fetcher.list_offsets_and_epochs(wanted))  # type: ignore[no-any-return]

    def lag(self, group_id: str, partitions: Iterable[TopicPartition] = ()) -> list[PartitionLag]:
        committed = self.committed_offsets(group_id)
        tps = sorted(set(committed) | set(partitions))
        ends = self.list_offsets(dict.fromkeys(tps, LATEST)) if tps else {}
        return [PartitionLag(tp, committed.get(tp), ends.get(tp, (None, 0))[0]) for tp in tps]

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        info = self._run(self._cluster.topic(topic, self.timeout_s))
        return [TopicPartition(topic, p) for p in sorted(info.partitions)]

    def topics(self) -> list[str]:
        self._run(self._cluster.refresh())
        return sorted(t for t, i in self._cluster.topics.items() if i.error == ErrorCode.NONE)

    # --- changing ------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        """Sets an inactive group's committed offsets (Kafka's alterConsumerGroupOffsets)."""
        topics: dict[str, list[Any]] = {}
        for tp, offset in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(
                client_pb2.OffsetCommitRequest.Partition(
                    partition=tp.partition, committed_offset=offset, committed_leader_epoch=-1
                )
            )
        request = client_pb2.OffsetCommitRequest(
            group_id=group_id,
            generation_id=-1,
            topics=[
                client_pb2.OffsetCommitRequest.Topic(name=t, partitions=ps)
                for t, ps in topics.items()
            ],
        )

        async def run() -> None:
            response, _ = await self._on_coordinator(group_id, "OffsetCommit", request)
            if response.error.code != 0:
                raise from_pb(response.error)
            # Kafka's alterConsumerGroupOffsets fails a partition whose commit was refused
            # (its future raises): never report as set an offset the coordinator did not take.
            for topic in response.topics:
                for part in topic.partitions:
                    if part.error.code != 0:
                        error = from_pb(part.error)
                        raise error_for(
                            error.name,
                            f"The offset of {topic.name}-{part.partition} was not set: "
                            f"{error.message}",
                        )

        self._run(run())

    def delete_group(self, group_id: str) -> None:
        async def run() -> None:
            response, _ = await self._on_coordinator(
                group_id, "DeleteGroups", client_pb2.DeleteGroupsRequest(groups=[group_id])
            )
            result = response.results[0]
            if result.error.code != 0:
                raise from_pb(result.error)

        self._run(run())

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, StromError | None]:
        """Kafka's deleteConsumerGroupOffsets: each partition's committed offset deleted
        (None) or why it was kept (GROUP_SUBSCRIBED_TO_TOPIC, UNKNOWN_TOPIC_OR_PARTITION,
        TOPIC_AUTHORIZATION_FAILED). An error of the whole group (GROUP_ID_NOT_FOUND,
        NON_EMPTY_GROUP, GROUP_AUTHORIZATION_FAILED) is raised: nothing was deleted."""
        wanted = list(dict.fromkeys(partitions))
        topics: dict[str, list[int]] = {}
        for tp in wanted:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = client_pb2.OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                client_pb2.OffsetDeleteRequest.Topic(name=t, partitions=ps)
                for t, ps in topics.items()
            ],
        )

        async def run() -> dict[TopicPartition, StromError | None]:
            response, _ = await self._on_coordinator(group_id, "OffsetDelete", request)
            if response.error.code != 0:
                raise from_pb(response.error)
            results: dict[TopicPartition, StromError | None] = {}
            for topic in response.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition)
                    results[tp] = from_pb(part.error) if part.error.code != 0 else None
            missing = [tp for tp in wanted if tp not in results]
            if missing:  # every partition asked is answered: never report one as deleted
                raise StromError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"the coordinator did not answer for {missing[0].topic}-{missing[0].partition}",
                )
            return results

        return self._run(run())  # type: ignore[no-any-return]


def _first_error(response: Any) -> ErrorCode:
    fields = response.DESCRIPTOR.fields_by_name
    if "error" in fields and response.HasField("error") and response.error.code != 0:
        return error_name(response.error.code)
    for name in ("groups", "results"):
        items = getattr(response, name, None)
        if items:
            for item in items:
                if item.error.code != 0:
                    return error_name(item.error.code)
    return ErrorCode.NONE


__all__ = ["EARLIEST", "LATEST", "GroupAdmin", "GroupDescription", "GroupListing", "PartitionLag"]


def _assigned(group: Any, member: Any) -> tuple[TopicPartition, ...]:
    """A member's partitions, from its assignment when the group speaks Kafka's consumer
    protocol (or has no protocol type yet), as Kafka's AdminClient reads them; other groups'
    assignments are their own business (none). Bytes that are not a consumer assignment
    are CORRUPT_MESSAGE with a sentence, as Kafka's describe fails on them."""
    if group.protocol_type not in ("consumer", ""):
        return ()
    try:
        assignment = decode_assignment(member.assignment)
    except MalformedAssignment as exc:
        raise StromError(
            ErrorCode.CORRUPT_MESSAGE,
            f"member {member.member_id} of group {group.group_id} has an assignment that is "
            f"not a consumer protocol assignment: {exc}",
        ) from None
    return tuple(TopicPartition(t, p) for t, p in assignment.partitions)
