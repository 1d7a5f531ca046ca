"""ClientService (proto/strom_api/v1/client.proto): what producers, consumers and admin
clients ask a broker. Produce (also pipelined on a ProduceStream, server/produce_stream.py),
Fetch, ListOffsets, OffsetsForLeaderEpoch, InitProducerId and DeleteRecords are answered by
the front-end-neutral handlers of server/requests/, which hold every rule: this servicer
converts protobuf to their requests and their answers back (server/client_messages.py), as
the Kafka listener does with Kafka's messages. Every refusal is a per-partition Error with
Kafka's name, a sentence and retriability."""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from broker.loop_slices import LoopSlices
from broker.producer_ids import ProducerIdManager
from broker.replica_manager import ReplicaManager
from coordinator.group.runtime import GroupCoordinator
from server.api_errors import error_pb
from server.client_messages import (
    delete_records_request,
    delete_records_response,
    fetch_request,
    fetch_response,
    init_producer_id_request,
    init_producer_id_response,
    list_offsets_request,
    list_offsets_response,
    log_dirs_response,
    log_dirs_wanted,
    offsets_for_leader_epoch_request,
    offsets_for_leader_epoch_response,
    produce_request,
    produce_response,
)
from server.group_service import GroupApi
from server.metadata_answer import MetadataSources, metadata_answer
from server.produce_stream import pipelined
from server.request_authorization import RequestAuthorizer
from server.request_session import current_session
from server.requests.delete_records import delete_records
from server.requests.fetch_sessions_path import (
    SessionFetchAnswer,
    fetch_in_session,
    release,
)
from server.requests.leader_epochs import offsets_for_leader_epoch
from server.requests.list_offsets import list_offsets
from server.requests.log_dirs import describe_log_dirs
from server.requests.produce import produce
from server.requests.producer_ids import init_producer_id
from strom_api.error_codes import ErrorCode
from strom_api.v1 import client_pb2, client_pb2_grpc, common_pb2, controller_pb2

Observe = Callable[[str, float], None]


def _timed(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Reports the time each call took under its RPC name (strom_request_duration_seconds)."""
    name = method.__name__

    @functools.wraps(method)
    async def timed(self: ClientServicer, request: Any, context: Any) -> Any:
        start = time.perf_counter()
        try:
            return await method(self, request, context)
        finally:
            self.observe(name, time.perf_counter() - start)

    return timed


async def _nothing() -> None:
    return None


def _named(topic: str | bytes) -> str | None:
    return topic if isinstance(topic, str) else None


class ClientServicer(GroupApi, client_pb2_grpc.ClientServiceServicer):
    def __init__(
        self,
        replicas: ReplicaManager,
        producer_ids: ProducerIdManager,
        cluster_id: str,
        listener_name: str,
        controller_id: Callable[[], int],
        create_topics: Callable[[list[str]], Awaitable[list[str]]] | None = None,
        auto_create_topics: bool = True,
        observe: Observe = lambda api, seconds: None,
        groups: GroupCoordinator | None = None,
        create_offsets_topic: Callable[[], Awaitable[None]] | None = None,
        persist_offsets: Callable[[], Awaitable[None]] | None = None,
        authz: RequestAuthorizer | None = None,
    ) -> None:
        self.authz = authz or RequestAuthorizer()  # default: no authorizer, all allowed
        self.persist_offsets = persist_offsets or _nothing
        self.observe = observe
        if groups is not None:
            self.groups = groups
        if create_offsets_topic is not None:
            self.create_offsets_topic = create_offsets_topic
        self.replicas = replicas
        self.producer_ids = producer_ids
        self.cluster_id = cluster_id
        self.listener_name = listener_name
        self.controller_id = controller_id
        self.create_topics = create_topics
        self.auto_create_topics = auto_create_topics

    def for_listener(self, listener_name: str) -> ClientServicer:
        """This servicer as another listener serves it: the same state and collaborators,
        Metadata answers carrying every broker's endpoint for `listener_name` (Kafka answers
        with the endpoints of the listener a request came in on). Made once the servicer is
        set up: attributes set on one afterwards are not the other's."""
        twin = copy.copy(self)
        twin.listener_name = listener_name
        return twin

    # --- Metadata ---------------------------------------------------------------------------

    @_timed
    async def Metadata(self, request: Any, context: Any) -> Any:  # noqa: N802
        # The rules are server/metadata_answer.py's, shared with the Kafka listener; here
        # only protobuf in and out (an empty topic list asks for every topic).
        answer = await metadata_answer(
            self.replicas.image,
            list(request.topics) or None,
            request.allow_auto_topic_creation,
            self.listener_name,
            self.metadata_sources(),
        )
        response = client_pb2.MetadataResponse(
            cluster_id=answer.cluster_id, controller_id=answer.controller_id
        )
        for b in answer.brokers:
            response.brokers.add(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack or "")
        slices = LoopSlices()
        for topic in answer.topics:
            await slices.step(1 + len(topic.partitions))
            out = response.topics.add(name=topic.name, is_internal=topic.is_internal)
            if topic.error is not None:
                out.error.CopyFrom(error_pb(topic.error))
                continue
            out.topic_id = topic.topic_id
            for p in topic.partitions:
                item = out.partitions.add(
                    partition=p.partition,
                    leader_id=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    replicas=p.replicas,
                    isr=p.isr,
                    offline_replicas=p.offline_replicas,
                )
                if p.error is not None:
                    item.error.CopyFrom(error_pb(p.error))
        return response

    def metadata_sources(self) -> MetadataSources:
        """What a Metadata answer of this broker reads (server/metadata_answer.py)."""
        return MetadataSources(
            self.cluster_id,
            self.controller_id,
            self.authz,
            self.create_topics,
            self.auto_create_topics,
        )

    # --- Produce ----------------------------------------------------------------------------

    @_timed
    async def Produce(self, request: Any, context: Any) -> Any:  # noqa: N802
        answer = await produce(
            self.replicas, self.authz, await produce_request(request), current_session()
        )
        if request.acks == 0:  # the producer reads no answer
            return client_pb2.ProduceResponse()
        return await produce_response(answer)

    async def ProduceStream(  # noqa: N802
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        # An async generator function, as server/rpc_guard.py wraps only those.
        async for response in pipelined(request_iterator, self._produce_in_stream):
            yield response

    async def _produce_in_stream(self, request: Any, appended: Callable[[], None]) -> Any:
        start = time.perf_counter()
        try:
            answer = await produce(
                self.replicas,
                self.authz,
                await produce_request(request),
                current_session(),
                appended,
            )
        finally:
            self.observe("ProduceStream", time.perf_counter() - start)
        if request.acks == 0:
            return client_pb2.ProduceResponse()
        return await produce_response(answer)

    # --- Fetch ------------------------------------------------------------------------------

    @_timed
    async def Fetch(self, request: Any, context: Any) -> Any:  # noqa: N802
        answer = await self._fetch(request, "Fetch")
        try:
            return await fetch_response(answer, request.session_id)
        finally:
            release(self.replicas, answer)  # handed to gRPC now

    async def FetchStream(  # noqa: N802
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        held: SessionFetchAnswer | None = None  # the last answer, until the client asks again
        try:
            async for request in request_iterator:
                if held is not None:
                    release(self.replicas, held)  # the client took it
                    held = None
                start = time.perf_counter()
                held = await self._fetch(request, "FetchStream")
                self.observe("FetchStream", time.perf_counter() - start)
                yield await fetch_response(held, request.session_id)
        finally:
            if held is not None:
                release(self.replicas, held)

    async def _fetch(self, request: Any, api: str) -> SessionFetchAnswer:
        """One fetch, in the session it names (server/requests/fetch_sessions_path.py, the
        Kafka listener's too); topics are named, never by id."""
        return await fetch_in_session(
            self.replicas, self.authz, await fetch_request(request), current_session(), _named, api
        )

    # --- ListOffsets ------------------------------------------------------------------------

    @_timed
    async def ListOffsets(self, request: Any, context: Any) -> Any:  # noqa: N802
        answer = await list_offsets(
            self.replicas, self.authz, await list_offsets_request(request), current_session()
        )
        return await list_offsets_response(answer)

    # --- OffsetsForLeaderEpoch --------------------------------------------------------------

    @_timed
    async def OffsetsForLeaderEpoch(self, request: Any, context: Any) -> Any:  # noqa: N802
        answer = await offsets_for_leader_epoch(
            self.replicas,
            self.authz,
            await offsets_for_leader_epoch_request(request),
            current_session(),
        )
        return await offsets_for_leader_epoch_response(answer)

    # --- InitProducerId ---------------------------------------------------------------------

    @_timed
    async def InitProducerId(self, request: Any, context: Any) -> Any:  # noqa: N802
        answer = await init_producer_id(
            self.producer_ids, self.authz, init_producer_id_request(request), current_session()
        )
        return init_producer_id_response(answer)

    # --- DeleteRecords ----------------------------------------------------------------------

    @_timed
    async def DeleteRecords(self, request: Any, context: Any) -> Any:  # noqa: N802
        answer = await delete_records(
            self.replicas,
            self.authz,
            self.persist_offsets,
            await delete_records_request(request),
            current_session(),
        )
        return await delete_records_response(answer)

    async def DescribeLogDirs(self, request: Any, context: Any) -> Any:  # noqa: N802
        refusal, dirs = await describe_log_dirs(
            self.replicas, self.authz, await log_dirs_wanted(request), current_session()
        )
        return await log_dirs_response(refusal, dirs)


async def auto_create(
    controller_call: Callable[[str, Any], Awaitable[Any | None]],
    names: list[str],
    partitions: int = -1,
    replication_factor: int = -1,
    configs: dict[str, str] | None = None,
) -> list[str]:
    """Asks the controller to create `names` (by default with the cluster's num.partitions
    and default.replication.factor, as auto.create.topics.enable does); returns those it
    created or that already exist."""
    request = controller_pb2.CreateTopicsRequest(
        topics=[
            controller_pb2.CreatableTopic(
                name=n,
                num_partitions=partitions,
                replication_factor=replication_factor,
                configs=configs or {},
            )
            for n in names
        ]
    )
    response = await controller_call("CreateTopics", request)
    if response is None:
        return []
    ok = (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
    return [r.name for r in response.topics if common_pb2.ErrorCode.Name(r.error.code) in ok]
