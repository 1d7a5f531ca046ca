"""The Kafka listener's dispatcher: a parsed request to its response (kio messages), by
the served table of apis.py. Each handler converts at the edge and calls what the gRPC
servicers call (server/metadata_answer.py for Metadata, server/requests/ through the
data-plane modules: produce_api.py, producer_id_api.py, fetch_api.py, offsets_api.py,
delete_records_api.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode

from metadata.image import MetadataImage
from server.kafka.api_versions import api_versions_response, valid_request
from server.kafka.apis import (
    API_VERSIONS,
    CONNECTION_APIS,
    DELETE_RECORDS,
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    SERVED,
)
from server.kafka.data_plane import DataPlane
from server.kafka.delete_records_api import delete_records_api
from server.kafka.fetch_api import fetch_api
from server.kafka.frames import Request, UnsupportedApiVersions
from server.kafka.group_apis import GroupApis
from server.kafka.metadata_api import metadata_response, requested_names
from server.kafka.offsets_api import list_offsets_api, offset_for_leader_epoch_api
from server.kafka.produce_api import produce_api
from server.kafka.producer_id_api import init_producer_id_api
from server.metadata_answer import MetadataSources, metadata_answer
from server.requests.groups import GroupPaths

Handler = Callable[[Request], Awaitable[Any]]


class KafkaApis:
    """One per Kafka listener (Metadata answers carry the endpoints of `listener_name`)."""

    def __init__(
        self,
        listener_name: str,
        image: Callable[[], MetadataImage],
        sources: MetadataSources,
        groups: GroupPaths,
        data_plane: DataPlane,
    ) -> None:
        self.listener_name = listener_name
        self.image = image
        self.sources = sources
        self.data_plane = data_plane
        handlers: dict[int, Handler] = {
            API_VERSIONS: self.api_versions,
            METADATA: self.metadata,
            PRODUCE: lambda r: produce_api(data_plane, listener_name, r),
            INIT_PRODUCER_ID: lambda r: init_producer_id_api(data_plane, r),
            FETCH: lambda r: fetch_api(data_plane, listener_name, r),
            LIST_OFFSETS: lambda r: list_offsets_api(data_plane, r),
            OFFSET_FOR_LEADER_EPOCH: lambda r: offset_for_leader_epoch_api(data_plane, r),
            DELETE_RECORDS: lambda r: delete_records_api(data_plane, r),
        }
        handlers.update(GroupApis(listener_name, groups).handlers())
        # Served exactly what is advertised: a table entry without a handler is a bug.
        assert set(handlers) | CONNECTION_APIS == set(SERVED), (set(handlers), set(SERVED))
        self.handlers = handlers

    async def handle(self, request: Request | UnsupportedApiVersions) -> Any:
        if isinstance(request, UnsupportedApiVersions):
            return api_versions_response(0, KafkaErrorCode.unsupported_version)
        return await self.handlers[request.api_key](request)

    async def api_versions(self, request: Request) -> Any:
        if not valid_request(request.body):  # Kafka answers INVALID_REQUEST, with the ranges
            return api_versions_response(request.api_version, KafkaErrorCode.invalid_request)
        return api_versions_response(request.api_version)

    async def metadata(self, request: Request) -> Any:
        body = request.body
        image = self.image()
        names, unknown_ids = requested_names(image, body)
        answer = await metadata_answer(
            image,
            names,
            # v0-v3 have no such field: those clients' Metadata always allowed it
            getattr(body, "allow_auto_topic_creation", True),
            self.listener_name,
            self.sources,
        )
        return metadata_response(request.api_version, answer, unknown_ids)
