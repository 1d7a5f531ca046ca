"""Who may do what: the one home of the authorization rules of every RPC, as Kafka's
KafkaApis / ControllerApis apply them (issue 18).

Servicers ask a RequestAuthorizer before doing any work; it asks the node's authorizer
(authorizer.class.name; server/node_authorizer.py keeps one per metadata image) about the
principal and host of the request being served (server/request_session.current_session).
- No authorizer configured (Kafka's default): everything is allowed.
- No session (the node's own work: its timers, its metadata loader, a servicer called in a
  test): the node itself, allowed.
- A denial is answered with Kafka's error (TOPIC_/GROUP_/CLUSTER_/TRANSACTIONAL_ID_
  AUTHORIZATION_FAILED) and a sentence, logged at INFO on `strom.authorizer` in the words
  of Kafka's authorizer log (rate-limited: a flood of denied requests is one line per
  cause a minute), and counted by operation (kafka_server_authorizer_denied_total).
- Listing everything (Metadata or DescribeTopics of all topics, ListGroups, OffsetFetch of
  all partitions) leaves out what the principal may not DESCRIBE, silently: Kafka neither
  logs nor reports those (logIfDenied=false), or every listing would be a denial.

Which operation each API needs is in the tables below (README "Authorization" has them as
a table for operators).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol

from metadata.errors import ApiError
from raft.rate_limited_log import RateLimitedLog
from server.request_session import Session, current_session
from strom_api.acls import CLUSTER_NAME, AclOperation, ResourceType
from strom_api.error_codes import ErrorCode

log = logging.getLogger("strom.authorizer")

Op = AclOperation

# The operation each ClientService API needs on each topic it names (KafkaApis).
TOPIC_OPERATION: dict[str, AclOperation] = {
    "Metadata": Op.DESCRIBE,
    "Produce": Op.WRITE,
    "Fetch": Op.READ,
    "FetchStream": Op.READ,
    "ListOffsets": Op.DESCRIBE,
    "OffsetsForLeaderEpoch": Op.DESCRIBE,
    "DeleteRecords": Op.DELETE,
    "DescribeProducers": Op.READ,
    "OffsetCommit": Op.READ,
    "OffsetFetch": Op.DESCRIBE,
    "OffsetDelete": Op.READ,
    # ControllerService
    "DeleteTopics": Op.DELETE,
    "CreatePartitions": Op.ALTER,
    "DescribeTopics": Op.DESCRIBE,
}
# ... on the group it names.
GROUP_OPERATION: dict[str, AclOperation] = {
    "FindCoordinator": Op.DESCRIBE,
    "JoinGroup": Op.READ,
    "SyncGroup": Op.READ,
    "Heartbeat": Op.READ,
    "LeaveGroup": Op.READ,
    "OffsetCommit": Op.READ,
    "OffsetFetch": Op.DESCRIBE,
    "DescribeGroups": Op.DESCRIBE,
    "DeleteGroups": Op.DELETE,
    "OffsetDelete": Op.DELETE,
}
# ... on the cluster (ControllerService, ReplicaService, RaftService).
CLUSTER_OPERATION: dict[str, AclOperation] = {
    "RegisterBroker": Op.CLUSTER_ACTION,
    "BrokerHeartbeat": Op.CLUSTER_ACTION,
    "AlterPartition": Op.CLUSTER_ACTION,
    "AllocateProducerIds": Op.CLUSTER_ACTION,
    "ReplicaFetch": Op.CLUSTER_ACTION,
    "RaftExchange": Op.CLUSTER_ACTION,
    "DescribeQuorum": Op.DESCRIBE,
    "ListPartitionReassignments": Op.DESCRIBE,
    "DescribeLogDirs": Op.DESCRIBE,
    "ElectLeaders": Op.ALTER,
    "AlterPartitionReassignments": Op.ALTER,
    # ACLs and SCRAM credentials (Kafka's AclApis, ControllerApis): who may grant rights or
    # set passwords is the cluster's ALTER, who may read them its DESCRIBE.
    "CreateAcls": Op.ALTER,
    "DeleteAcls": Op.ALTER,
    "DescribeAcls": Op.DESCRIBE,
    "AlterUserScramCredentials": Op.ALTER,
    "DescribeUserScramCredentials": Op.DESCRIBE,
}

# Kafka's ResourceType.toString, as its authorizer log writes resources.
_RESOURCE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
}
_ERRORS = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


class Authorizer(Protocol):
    """Kafka's Authorizer as the node uses it (metadata/authorizer.StandardAuthorizer)."""

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool: ...

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool: ...


def denied_error(
    principal: str, operation: AclOperation, resource_type: ResourceType, name: str
) -> ApiError:
    """Kafka's error for a denied resource, with Kafka's sentence and who was refused what."""
    if resource_type == ResourceType.TOPIC:
        what = f"Not authorized to access topics: [{name}]"
    elif resource_type == ResourceType.GROUP:
        what = f"Not authorized to access group: {name}"
    elif resource_type == ResourceType.TRANSACTIONAL_ID:
        what = f"Transactional Id authorization failed: {name}"
    else:
        what = "Cluster authorization failed"
    return ApiError(
        _ERRORS[resource_type],
        f"{what} ({principal} may not {operation.name} {_RESOURCE_NAMES[resource_type]} '{name}').",
    )


class RequestAuthorizer:
    """The node's authorization of requests: the current authorizer (None: none configured,
    everything allowed), the denials counted by operation, the authorizer log. One per node,
    shared by its servicers; used on the event loop only."""

    def __init__(self, authorizer: Callable[[], Authorizer | None] = lambda: None) -> None:
        self._authorizer = authorizer
        self.denied: Counter[str] = Counter()  # operation name -> denials (the metric)
        self._log = RateLimitedLog(log)

    @property
    def enabled(self) -> bool:
        return self._authorizer() is not None

    # --- the one question, asked in every form below -----------------------------------------

    def allowed(
        self,
        api: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
        session: Session | None = None,
    ) -> bool:
        """Whether the request's principal (or `session`'s) may; a denial logged and counted
        unless `log_denied` is False (filtering a listing)."""
        authorizer = self._authorizer()
        if authorizer is None:
            return True
        session = session or current_session()
        if session is None:
            return True
        if authorizer.authorize(session.principal, session.host, operation, resource_type, name):
            return True
        if log_denied:
            self.record_denial(session, api, operation, resource_type, name)
        return False

    def record_denial(
        self,
        session: Session,
        api: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> None:
        self.denied[operation.name] += 1
        # One line per principal, operation and kind of resource a minute: a flood of
        # denied requests (or of made-up topic names) cannot fill the disk.
        self._log.log(
            (session.principal, operation, resource_type, api),
            logging.INFO,
            "Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s "
            "for request = %s",
            session.principal,
            operation.name,
            session.host,
            _RESOURCE_NAMES[resource_type],
            name,
            api,
        )

    def refusal(
        self,
        api: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        session: Session | None = None,
    ) -> ApiError | None:
        """None when allowed, else Kafka's error for it."""
        session = session or current_session()
        if session is None or self.allowed(api, operation, resource_type, name, session=session):
            return None
        return denied_error(session.principal, operation, resource_type, name)

    # --- by API -------------------------------------------------------------------------------

    def cluster(self, api: str, session: Session | None = None) -> ApiError | None:
        """The API's operation on the cluster (CLUSTER_OPERATION)."""
        return self.refusal(
            api, CLUSTER_OPERATION[api], ResourceType.CLUSTER, CLUSTER_NAME, session
        )

    def topic(self, api: str, name: str, session: Session | None = None) -> ApiError | None:
        return self.refusal(api, TOPIC_OPERATION[api], ResourceType.TOPIC, name, session)

    def group(self, api: str, group_id: str, session: Session | None = None) -> ApiError | None:
        return self.refusal(api, GROUP_OPERATION[api], ResourceType.GROUP, group_id, session)

    def topics(
        self, api: str, names: Iterable[str], session: Session | None = None
    ) -> dict[str, ApiError]:
        """The refusal of each named topic the principal may not (each asked once)."""
        if not self.enabled:
            return {}  # the hot path without an authorizer: not a call per topic
        refused = {}
        for name in dict.fromkeys(names):
            error = self.topic(api, name, session)
            if error is not None:
                refused[name] = error
        return refused

    def visible_topics(self, names: Iterable[str], session: Session | None = None) -> list[str]:
        """The topics of a listing the principal may DESCRIBE (others left out, silently)."""
        if not self.enabled:
            return list(names)
        return [
            n
            for n in names
            if self.allowed(
                "", Op.DESCRIBE, ResourceType.TOPIC, n, log_denied=False, session=session
            )
        ]

    def visible_groups(self, group_ids: Iterable[str], session: Session | None = None) -> list[str]:
        """ListGroups: every group with DESCRIBE on the cluster, else those the principal
        may DESCRIBE."""
        if not self.enabled or self.allowed(
            "", Op.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False, session=session
        ):
            return list(group_ids)
        return [
            g
            for g in group_ids
            if self.allowed(
                "", Op.DESCRIBE, ResourceType.GROUP, g, log_denied=False, session=session
            )
        ]

    def create_topics(self, api: str, names: Iterable[str]) -> dict[str, ApiError]:
        """CREATE on the cluster, or else on each topic (CreateTopics, Metadata's
        auto-creation)."""
        names = list(dict.fromkeys(names))
        if not names or self.allowed(
            api, Op.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
        ):
            return {}
        refused = {}
        for name in names:
            error = self.refusal(api, Op.CREATE, ResourceType.TOPIC, name)
            if error is not None:
                refused[name] = error
        return refused

    def init_producer_id(
        self, transactional_id: str, session: Session | None = None
    ) -> ApiError | None:
        """A transactional producer needs WRITE on its TransactionalId; an idempotent one
        IDEMPOTENT_WRITE on the cluster or, since Kafka 3.0 (KIP-679), WRITE on any topic."""
        api = "InitProducerId"
        if transactional_id:
            return self.refusal(
                api, Op.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id, session
            )
        authorizer = self._authorizer()
        session = session or current_session()
        if authorizer is None or session is None:
            return None
        if self.allowed(
            api,
            Op.IDEMPOTENT_WRITE,
            ResourceType.CLUSTER,
            CLUSTER_NAME,
            log_denied=False,
            session=session,
        ) or authorizer.authorize_by_resource_type(
            session.principal, session.host, Op.WRITE, ResourceType.TOPIC
        ):
            return None
        self.record_denial(session, api, Op.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
        return denied_error(
            session.principal, Op.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME
        )

    def config_resource(
        self, api: str, operation: AclOperation, is_topic: bool, name: str
    ) -> ApiError | None:
        """ALTER_CONFIGS / DESCRIBE_CONFIGS on a topic, or on the cluster for a broker's
        configs (and the cluster-wide defaults)."""
        if is_topic:
            return self.refusal(api, operation, ResourceType.TOPIC, name)
        return self.refusal(api, operation, ResourceType.CLUSTER, CLUSTER_NAME)
