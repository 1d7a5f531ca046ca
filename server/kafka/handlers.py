"""The Kafka listener's dispatcher: a parsed request to its response (kio messages), by
the served table of apis.py. Each handler converts at the edge and calls what the gRPC
servicers call (server/metadata_answer.py for Metadata, server/requests/ through the
data-plane modules: produce_api.py, producer_id_api.py, fetch_api.py, offsets_api.py,
delete_records_api.py; the group paths through group_apis.py; the gRPC forwarder's
authorized path to the controller through topic_admin.py, config_admin.py,
cluster_admin.py, acl_admin.py, scram_admin.py; broker_admin.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode

from broker.replica_manager import ReplicaManager
from metadata.image import MetadataImage
from server.controller_forwarder import ControllerCall, NoControllerAnswered
from server.kafka.acl_admin import AclAdmin
from server.kafka.api_versions import api_versions_response, valid_request
from server.kafka.apis import (
    ALTER_CONFIGS,
    ALTER_PARTITION_REASSIGNMENTS,
    ALTER_USER_SCRAM_CREDENTIALS,
    API_VERSIONS,
    CONNECTION_APIS,
    CREATE_ACLS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_ACLS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_ACLS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_LOG_DIRS,
    DESCRIBE_PRODUCERS,
    DESCRIBE_QUORUM,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ELECT_LEADERS,
    FETCH,
    INCREMENTAL_ALTER_CONFIGS,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    LIST_PARTITION_REASSIGNMENTS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    SERVED,
)
from server.kafka.broker_admin import BrokerAdmin
from server.kafka.cluster_admin import ClusterAdmin
from server.kafka.config_admin import ConfigAdmin
from server.kafka.data_plane import DataPlane
from server.kafka.delete_records_api import delete_records_api
from server.kafka.fetch_api import fetch_api
from server.kafka.frames import Request, UnsupportedApiVersions
from server.kafka.group_apis import GroupApis
from server.kafka.metadata_api import metadata_response, requested_names
from server.kafka.offsets_api import list_offsets_api, offset_for_leader_epoch_api
from server.kafka.produce_api import produce_api
from server.kafka.producer_id_api import init_producer_id_api
from server.kafka.scram_admin import ScramAdmin
from server.kafka.topic_admin import TopicAdmin
from server.metadata_answer import MetadataSources, metadata_answer
from server.request_authorization import RequestAuthorizer
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
        *,
        controller: ControllerCall | None = None,
        authz: RequestAuthorizer | None = None,
        replicas: Callable[[], ReplicaManager | None] = lambda: None,
    ) -> None:
        self.listener_name = listener_name
        self.image = image
        self.sources = sources
        self.data_plane = data_plane
        # Admin requests go where the gRPC forwarder sends them (controller_forwarder.py).
        topics = TopicAdmin(controller or _no_controller, image)
        configs = ConfigAdmin(controller or _no_controller)
        cluster = ClusterAdmin(
            controller or _no_controller, listener_name, authz or RequestAuthorizer()
        )
        broker = BrokerAdmin(replicas, authz or RequestAuthorizer())
        acls = AclAdmin(controller or _no_controller, authz or RequestAuthorizer())
        scram = ScramAdmin(controller or _no_controller)
        handlers: dict[int, Handler] = {
            API_VERSIONS: self.api_versions,
            METADATA: self.metadata,
            PRODUCE: lambda r: produce_api(data_plane, listener_name, r),
            INIT_PRODUCER_ID: lambda r: init_producer_id_api(data_plane, r),
            FETCH: lambda r: fetch_api(data_plane, listener_name, r),
            LIST_OFFSETS: lambda r: list_offsets_api(data_plane, r),
            OFFSET_FOR_LEADER_EPOCH: lambda r: offset_for_leader_epoch_api(data_plane, r),
            DELETE_RECORDS: lambda r: delete_records_api(data_plane, r),
            CREATE_TOPICS: topics.create_topics,
            DELETE_TOPICS: topics.delete_topics,
            CREATE_PARTITIONS: topics.create_partitions,
            DESCRIBE_CONFIGS: configs.describe_configs,
            INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
            ALTER_CONFIGS: configs.alter_configs,
            DESCRIBE_CLUSTER: cluster.describe_cluster,
            ELECT_LEADERS: cluster.elect_leaders,
            ALTER_PARTITION_REASSIGNMENTS: cluster.alter_partition_reassignments,
            LIST_PARTITION_REASSIGNMENTS: cluster.list_partition_reassignments,
            DESCRIBE_QUORUM: cluster.describe_quorum,
            DESCRIBE_LOG_DIRS: broker.describe_log_dirs,
            DESCRIBE_PRODUCERS: broker.describe_producers,
            DESCRIBE_ACLS: acls.describe_acls,
            CREATE_ACLS: acls.create_acls,
            DELETE_ACLS: acls.delete_acls,
            DESCRIBE_USER_SCRAM_CREDENTIALS: scram.describe_user_scram_credentials,
            ALTER_USER_SCRAM_CREDENTIALS: scram.alter_user_scram_credentials,
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
        return await metadata_response(request.api_version, answer, unknown_ids)


async def _no_controller(method: str, request: Any) -> Any:
    """A dispatcher made without the controller path (the listener's unit tests)."""
    raise NoControllerAnswered(f"no controller path to send {method} to")
