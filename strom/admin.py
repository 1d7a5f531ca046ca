"""AdminClient: the cluster's admin operations from Python, after Kafka's Admin client.

    from strom.admin import AdminClient, NewTopic
    with AdminClient(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=3,
                                      topic_configs={"retention.ms": "86400000"})])
        admin.describe_topics(["orders"])

Brokers forward the controller's operations to the active controller (KIP-590), so the
bootstrap servers may be brokers (or controllers). Consumer-group operations go to each
group's coordinator (strom.group_admin), list_offsets to each partition's leader. A failure
raises StromError with Kafka's name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from strom import scram_admin
from strom.acl_binding import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from strom.cluster import Cluster
from strom.controller_client import ControllerClient, parse_bootstrap
from strom.errors import StromError, error_for, error_name, from_pb
from strom.fetcher import EARLIEST, LATEST, TopicPartition
from strom.group_admin import GroupAdmin, GroupDescription, GroupListing, PartitionLag
from strom.log_dirs import LogDirDescription, describe_log_dirs
from strom.record_deletion import DeletedRecords, delete_records
from strom.security import client_security
from strom.uuids import kafka_uuid_from_bytes
from strom_api import scram_credential
from strom_api.error_codes import ErrorCode
from strom_api.v1 import controller_pb2
from strom_api.v1 import metadata_pb2 as mpb

__all__ = [
    "ACL",
    "ACLFilter",
    "ACLOperation",
    "ACLPermissionType",
    "ACLResourcePatternType",
    "AdminClient",
    "AlterConfigOp",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSynonym",
    "GroupDescription",
    "GroupListing",
    "ListOffsetsResultInfo",
    "NewTopic",
    "OffsetSpec",
    "PartitionLag",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "ScramCredentialInfo",
    "TopicDescription",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
    "validate_bootstrap_servers",
]

_RESOURCE_TYPES = {"topic": mpb.TOPIC, "broker": mpb.BROKER}


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the cluster's num.partitions
    replication_factor: int = -1  # -1: the cluster's default.replication.factor
    replica_assignments: Mapping[int, Sequence[int]] | None = None
    topic_configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionDescription:
    """Kafka's TopicPartitionInfo: leader -1 for none; the replicas a reassignment in
    progress adds and removes; the eligible leader replicas (KIP-966)."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    eligible_leader_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: tuple[PartitionDescription, ...]
    configs: Mapping[str, str]
    is_internal: bool = False  # __consumer_offsets


@dataclass(frozen=True)
class ConfigResource:
    resource_type: str  # "topic" or "broker"
    name: str  # a topic, a broker id, or "" for the cluster-wide broker default


@dataclass(frozen=True)
class ConfigSynonym:
    """Kafka's ConfigEntry.ConfigSynonym: where else the config's value could come from
    (source: Kafka's ConfigSource name, e.g. DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG)."""

    name: str
    value: str | None
    source: str


@dataclass(frozen=True)
class ConfigEntry:
    """Kafka's ConfigEntry: the value in force (None when unset, or sensitive), where it
    comes from, and its synonyms in order of precedence."""

    name: str
    value: str | None
    source: str
    is_sensitive: bool = False
    read_only: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()


@dataclass(frozen=True)
class ScramCredentialInfo:
    """Kafka's ScramCredentialInfo: a mechanism ("SCRAM-SHA-256" or "SCRAM-SHA-512") and
    its iterations."""

    mechanism: str
    iterations: int = scram_credential.DEFAULT_ITERATIONS


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Kafka's UserScramCredentialUpsertion: sets the user's credential for one mechanism.
    The password is salted here, with `salt` or a fresh random one; only the salted
    password travels, as with Kafka's Admin client."""

    user: str
    credential_info: ScramCredentialInfo
    password: str | bytes = field(repr=False)
    salt: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Kafka's UserScramCredentialDeletion: removes the user's credential for a mechanism."""

    user: str
    mechanism: str


@dataclass(frozen=True)
class UserScramCredentialsDescription:
    """Kafka's UserScramCredentialsDescription: a user's mechanisms and iterations."""

    name: str
    credential_infos: tuple[ScramCredentialInfo, ...]


# Kafka's ListOffsets timestamp for the offset of the record with the largest timestamp.
MAX_TIMESTAMP = -3


@dataclass(frozen=True)
class OffsetSpec:
    """Kafka's OffsetSpec, what list_offsets looks up for a partition: OffsetSpec.earliest()
    (the log start offset), latest() (the high watermark, the offset the next record
    consumed will get), max_timestamp() (the record with the largest timestamp) or
    for_timestamp(ms) (the first record whose timestamp is at least ms)."""

    timestamp: int  # what ListOffsets carries: a time in ms, or Kafka's -1, -2, -3

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls(EARLIEST)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(LATEST)

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        return cls(MAX_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int) or timestamp_ms < 0:
            # Kafka's brokers read a negative time as one of their special offsets; a
            # caller means a time here, so a negative one is refused rather than reread.
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                f"OffsetSpec.for_timestamp takes a time in ms since the epoch (>= 0), not "
                f"{timestamp_ms!r}; earliest(), latest() and max_timestamp() name the others",
            )
        return cls(timestamp_ms)


@dataclass(frozen=True)
class ListOffsetsResultInfo:
    """Kafka's ListOffsetsResultInfo: the offset found (-1 when no record is that recent),
    the timestamp of its record (-1 for earliest and latest, which name no record), and
    the leader epoch of the batch holding it (None when unknown)."""

    offset: int
    timestamp: int
    leader_epoch: int | None


_OP_TYPES = {
    "SET": controller_pb2.SET,
    "DELETE": controller_pb2.DELETE,
    "APPEND": controller_pb2.APPEND,
    "SUBTRACT": controller_pb2.SUBTRACT,
}


@dataclass(frozen=True)
class AlterConfigOp:
    """Kafka's AlterConfigOp, one change incremental_alter_configs makes to a resource's
    configs: op_type SET (the value), DELETE (back to the default), APPEND or SUBTRACT
    (an item of a list-valued config, e.g. cleanup.policy)."""

    name: str
    value: str | None = None
    op_type: str = "SET"

    def to_pb(self) -> Any:
        op = _OP_TYPES.get(str(self.op_type).upper())
        if op is None:
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                f"AlterConfigOp {self.name}: op_type must be one of {', '.join(_OP_TYPES)}, "
                f"not {self.op_type!r}",
            )
        if op != controller_pb2.DELETE and self.value is None:
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                f"AlterConfigOp {self.name}: {self.op_type} needs a value",
            )
        item = controller_pb2.IncrementalAlterConfigsRequest.Op(name=self.name, op=op)
        if op != controller_pb2.DELETE:
            item.value = str(self.value)
        return item


def validate_bootstrap_servers(servers: str) -> None:
    """Checks bootstrap_servers as AdminClient reads them (`host:port[,...]`, each optionally
    `id@host:port`, an IPv6 host in brackets) without connecting: INVALID_CONFIG naming the
    bad entry. The tools check their --bootstrap-* options with it while parsing."""
    try:
        parse_bootstrap(servers)
    except ValueError as exc:
        raise StromError(ErrorCode.INVALID_CONFIG, str(exc)) from None


def _endpoint(endpoint: Any) -> str:
    """Kafka's Endpoint form, LISTENER://host:port."""
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{endpoint.name}://{host}:{endpoint.port}"


def _replica_state(replica: Any) -> dict[str, int]:
    """Kafka's QuorumInfo.ReplicaState."""
    return {
        "id": replica.replica_id,
        "log_end_offset": replica.log_end_offset,
        "last_fetch_timestamp": replica.last_fetch_timestamp,
        "last_caught_up_timestamp": replica.last_caught_up_timestamp,
    }


def _raise(error: Any) -> None:
    if error is not None and error.code != 0:
        raise error_for(error_name(error.code), error.message, error.retriable)


class AdminClient:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = "127.0.0.1:9092",
        request_timeout_ms: int = 30_000,
        security_protocol: str = "PLAINTEXT",
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_password: str | None = None,
        ssl_check_hostname: bool = True,
        sasl_mechanism: str = "PLAIN",
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: Any = None,
    ) -> None:
        """The ssl_* settings and security_protocol are kafka-python's (strom/security.py)."""
        tls = client_security(
            security_protocol,
            ssl_cafile,
            ssl_certfile,
            ssl_keyfile,
            ssl_password,
            ssl_check_hostname,
            sasl_mechanism,
            sasl_plain_username,
            sasl_plain_password,
            sasl_oauth_token_provider,
        )
        text = (
            bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
        )
        try:
            addresses = parse_bootstrap(text)
        except ValueError as exc:
            raise StromError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        self._controllers = ControllerClient(
            addresses, timeout_s=request_timeout_ms / 1000, tls=tls
        )
        self._groups = GroupAdmin(text, request_timeout_ms, tls)

    def close(self) -> None:
        self._controllers.close()
        self._groups.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, request: Any, describe: bool = False) -> Any:
        if describe:
            return self._controllers.describe(method, request)
        return self._controllers.call(method, request)

    # --- topics ---------------------------------------------------------------------

    def create_topics(self, new_topics: Iterable[NewTopic], validate_only: bool = False) -> None:
        """Creates every topic; raises the first failure (e.g. TOPIC_ALREADY_EXISTS) after
        the others were tried. With `validate_only` every check is made and nothing is
        created (Kafka's CreateTopicsOptions.validateOnly)."""
        topics = [
            controller_pb2.CreatableTopic(
                name=t.name,
                num_partitions=-1 if t.replica_assignments else t.num_partitions,
                replication_factor=-1 if t.replica_assignments else t.replication_factor,
                assignments={
                    p: mpb.BrokerIdList(ids=list(r))
                    for p, r in (t.replica_assignments or {}).items()
                },
                configs=dict(t.topic_configs),
            )
            for t in new_topics
        ]
        response = self._call(
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(topics=topics, validate_only=validate_only),
        )
        for result in response.topics:
            if result.HasField("error"):
                _raise(result.error)

    def delete_topics(self, names: Iterable[str]) -> None:
        response = self._call("DeleteTopics", controller_pb2.DeleteTopicsRequest(names=list(names)))
        for result in response.topics:
            if result.HasField("error"):
                _raise(result.error)

    def create_partitions(
        self,
        new_counts: Mapping[str, int],
        assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
    ) -> None:
        """Grows each topic to the given total partition count; `assignments` may give a
        topic's new partitions their replicas, in order (Kafka's NewPartitions.increaseTo
        with newAssignments), where the controller would place them otherwise."""
        for name, count in new_counts.items():
            request = controller_pb2.CreatePartitionsRequest(name=name, count=count)
            for replicas in (assignments or {}).get(name, ()):
                request.assignments.add(ids=list(replicas))
            self._call("CreatePartitions", request)

    def list_topics(self) -> set[str]:
        response = self._call(
            "DescribeTopics", controller_pb2.DescribeTopicsRequest(), describe=True
        )
        return {t.name for t in response.topics if not t.HasField("error") or t.error.code == 0}

    def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicDescription]:
        request = controller_pb2.DescribeTopicsRequest(names=list(names or []))
        response = self._call("DescribeTopics", request, describe=True)
        out = []
        for t in response.topics:
            if t.HasField("error"):
                _raise(t.error)
            out.append(
                TopicDescription(
                    t.name,
                    kafka_uuid_from_bytes(t.topic_id) if t.topic_id else "",
                    tuple(
                        PartitionDescription(
                            p.partition,
                            p.leader,
                            p.leader_epoch,
                            tuple(p.replicas),
                            tuple(p.isr),
                            tuple(p.adding_replicas),
                            tuple(p.removing_replicas),
                            tuple(p.eligible_leader_replicas),
                        )
                        for p in t.partitions
                    ),
                    dict(t.configs),
                    t.is_internal,
                )
            )
        return out

    # --- cluster and configs --------------------------------------------------------

    def describe_cluster(self) -> dict[str, Any]:
        """The cluster id, the active controller, the metadata offset the answer reflects,
        and every registered broker: its listeners as Kafka's Endpoint strings
        (LISTENER://host:port, an IPv6 host in brackets), rack (None for none), epoch and
        whether it is fenced or in controlled shutdown."""
        response = self._call(
            "DescribeCluster", controller_pb2.DescribeClusterRequest(), describe=True
        )
        return {
            "cluster_id": response.cluster_id,
            "controller_id": response.controller_id,
            "metadata_offset": response.metadata_offset,
            "brokers": [
                {
                    "node_id": b.broker_id,
                    "endpoints": [_endpoint(e) for e in b.endpoints],
                    "rack": b.rack or None,
                    "fenced": b.fenced,
                    "in_controlled_shutdown": b.in_controlled_shutdown,
                    "broker_epoch": b.broker_epoch,
                }
                for b in response.brokers
            ],
        }

    def describe_metadata_quorum(self) -> dict[str, Any]:
        """Kafka's QuorumInfo: the leader, its epoch, the high watermark, and each voter's
        and observer's replica state (timestamps in ms, -1 when unknown)."""
        response = self._call("DescribeQuorum", controller_pb2.DescribeQuorumRequest())
        return {
            "leader_id": response.leader_id,
            "leader_epoch": response.leader_epoch,
            "high_watermark": response.high_watermark,
            "voters": [_replica_state(v) for v in response.voters],
            "observers": [_replica_state(v) for v in response.observers],
        }

    def _resource(self, resource: ConfigResource) -> Any:
        kind = _RESOURCE_TYPES.get(resource.resource_type)
        if kind is None:
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                f"resource type must be topic or broker, not {resource.resource_type!r}",
            )
        return controller_pb2.ConfigResource(type=kind, name=resource.name)

    def describe_configs(self, resource: ConfigResource) -> dict[str, str | None]:
        request = controller_pb2.DescribeConfigsRequest(resources=[self._resource(resource)])
        result = self._call("DescribeConfigs", request, describe=True).results[0]
        if result.HasField("error"):
            _raise(result.error)
        return {e.name: (e.value if e.HasField("value") else None) for e in result.entries}

    def describe_configs_of(
        self, resources: Iterable[ConfigResource], names: Iterable[str] = ()
    ) -> dict[ConfigResource, dict[str, str | None]]:
        """Kafka's describeConfigs of many resources in one request, each with its configs'
        values (only `names`, when given); the first resource refused raises its error."""
        wanted = list(dict.fromkeys(resources))
        if not wanted:
            return {}
        request = controller_pb2.DescribeConfigsRequest(
            resources=[self._resource(r) for r in wanted], keys=list(names)
        )
        results = self._call("DescribeConfigs", request, describe=True).results
        if len(results) != len(wanted):
            raise StromError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"The controller described {len(results)} of {len(wanted)} resources.",
            )
        out: dict[ConfigResource, dict[str, str | None]] = {}
        for resource, result in zip(wanted, results, strict=True):
            if result.HasField("error"):
                _raise(result.error)
            out[resource] = {
                e.name: (e.value if e.HasField("value") else None) for e in result.entries
            }
        return out

    def describe_config_entries(self, resource: ConfigResource) -> list[ConfigEntry]:
        """Every config of the topic or broker as Kafka's Admin.describeConfigs answers it
        (ConfigEntry: source, sensitivity, synonyms), where describe_configs gives only
        the values."""
        request = controller_pb2.DescribeConfigsRequest(resources=[self._resource(resource)])
        results = self._call("DescribeConfigs", request, describe=True).results
        if not results:
            raise StromError(
                ErrorCode.UNKNOWN_SERVER_ERROR, "The controller did not describe the configs."
            )
        if results[0].HasField("error"):
            _raise(results[0].error)
        return [
            ConfigEntry(
                e.name,
                e.value if e.HasField("value") else None,
                e.source,
                e.is_sensitive,
                e.read_only,
                tuple(
                    ConfigSynonym(y.name, y.value if y.HasField("value") else None, y.source)
                    for y in e.synonyms
                ),
            )
            for e in results[0].entries
        ]

    def incremental_alter_configs(
        self,
        resource: ConfigResource | Mapping[ConfigResource, Iterable[AlterConfigOp]],
        set_: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
    ) -> None:
        """Sets (set_) and deletes (delete) configs of one resource; or, given
        {ConfigResource: [AlterConfigOp, ...]} as Kafka's Admin.incrementalAlterConfigs
        takes it, changes several resources in one request. Every resource is tried; the
        first one refused is raised (INVALID_CONFIG, ...)."""
        if isinstance(resource, ConfigResource):
            changes: Mapping[ConfigResource, Iterable[AlterConfigOp]] = {
                resource: [AlterConfigOp(k, v) for k, v in (set_ or {}).items()]
                + [AlterConfigOp(k, op_type="DELETE") for k in delete]
            }
        elif set_ or delete:
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                "set_ and delete go with one ConfigResource; with several resources, give "
                "each its AlterConfigOps",
            )
        else:
            changes = resource
        request = controller_pb2.IncrementalAlterConfigsRequest(
            resources=[
                controller_pb2.IncrementalAlterConfigsRequest.Resource(
                    resource=self._resource(r), ops=[op.to_pb() for op in ops]
                )
                for r, ops in changes.items()
            ]
        )
        response = self._call("IncrementalAlterConfigs", request)
        for result in response.results:
            if result.HasField("error"):
                _raise(result.error)

    # --- SCRAM credentials ----------------------------------------------------------

    def alter_user_scram_credentials(
        self, alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion]
    ) -> None:
        """Kafka's alterUserScramCredentials in one request: every user that passes Kafka's
        checks is altered, then the first failure (UNSUPPORTED_SASL_MECHANISM,
        UNACCEPTABLE_CREDENTIAL, RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE) is raised."""
        request = controller_pb2.AlterUserScramCredentialsRequest()
        for a in alterations:
            if isinstance(a, UserScramCredentialDeletion):
                request.deletions.append(scram_admin.deletion(a.user, a.mechanism))
            else:
                password = a.password.encode() if isinstance(a.password, str) else a.password
                info = a.credential_info
                request.upsertions.append(
                    scram_admin.upsertion(a.user, info.mechanism, info.iterations, password, a.salt)
                )
        scram_admin.check_altered(self._call("AlterUserScramCredentials", request))

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None
    ) -> dict[str, UserScramCredentialsDescription]:
        """Kafka's describeUserScramCredentials: every user with a credential, or the users
        named (RESOURCE_NOT_FOUND raised for one without a credential)."""
        request = controller_pb2.DescribeUserScramCredentialsRequest(users=list(users or []))
        response = self._call("DescribeUserScramCredentials", request, describe=True)
        return {
            user: UserScramCredentialsDescription(
                user, tuple(ScramCredentialInfo(m, i) for m, i in infos)
            )
            for user, infos in scram_admin.described(response).items()
        }

    # --- ACLs (kafka-python's names, types and return shapes) --------------------------

    def create_acls(self, acls: Iterable[ACL]) -> dict[str, list[Any]]:
        """Creates the ACLs; {"succeeded": [ACL, ...], "failed": [(ACL, StromError), ...]}
        as kafka-python answers (an ACL that exists already succeeds)."""
        wanted = list(acls)
        for acl in wanted:
            if not isinstance(acl, ACL):
                raise StromError(ErrorCode.INVALID_REQUEST, f"not an ACL: {acl!r}")
        request = controller_pb2.CreateAclsRequest(creations=[a.binding_pb() for a in wanted])
        response = self._call("CreateAcls", request)
        out: dict[str, list[Any]] = {"succeeded": [], "failed": []}
        for acl, result in zip(wanted, response.results, strict=True):
            if result.HasField("error") and result.error.code != 0:
                out["failed"].append((acl, from_pb(result.error)))
            else:
                out["succeeded"].append(acl)
        return out

    def describe_acls(self, acl_filter: ACLFilter) -> tuple[list[ACL], None]:
        """The ACLs the filter matches, as kafka-python's (acls, error) pair: a failure
        raises StromError (kafka-python raises too), so the error is always None."""
        request = controller_pb2.DescribeAclsRequest(filter=acl_filter.to_pb())
        response = self._call("DescribeAcls", request)
        return [ACL.from_pb(b) for b in response.acls], None

    def delete_acls(
        self, acl_filters: Iterable[ACLFilter]
    ) -> list[tuple[ACLFilter, list[tuple[ACL, None]], StromError | None]]:
        """Deletes every ACL each filter matches; per filter, kafka-python's
        (filter, [(deleted ACL, error), ...], error) with errors None on success."""
        filters = list(acl_filters)
        request = controller_pb2.DeleteAclsRequest(filters=[f.to_pb() for f in filters])
        response = self._call("DeleteAcls", request)
        out: list[tuple[ACLFilter, list[tuple[ACL, None]], StromError | None]] = []
        for acl_filter, result in zip(filters, response.results, strict=True):
            error = from_pb(result.error) if result.HasField("error") else None
            deleted: list[tuple[ACL, None]] = [(ACL.from_pb(b), None) for b in result.deleted]
            out.append((acl_filter, deleted, error))
        return out

    # --- leaders and reassignments --------------------------------------------------

    @overload
    def elect_leaders(
        self,
        election_type: str,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        as_errors: Literal[False] = False,
    ) -> dict[TopicPartition, str]: ...

    @overload
    def elect_leaders(
        self,
        election_type: str,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        as_errors: Literal[True],
    ) -> dict[TopicPartition, StromError | None]: ...

    def elect_leaders(
        self,
        election_type: str,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        as_errors: bool = False,
    ) -> dict[TopicPartition, str] | dict[TopicPartition, StromError | None]:
        """PREFERRED or UNCLEAN elections of the partitions (every partition for None);
        {partition: error name, "NONE" when elected}. With as_errors=True, Kafka's
        ElectLeadersResult.partitions(): {partition: None when elected, else the StromError
        with the controller's sentence, ELECTION_NOT_NEEDED included}."""
        kind = {"preferred": controller_pb2.PREFERRED, "unclean": controller_pb2.UNCLEAN}.get(
            election_type.lower()
        )
        if kind is None:
            raise StromError(
                ErrorCode.INVALID_REQUEST, "election_type must be preferred or unclean"
            )
        tps = list(partitions or [])
        request = controller_pb2.ElectLeadersRequest(
            election_type=kind,
            partitions=[controller_pb2.TopicPartition(topic=t, partition=p) for t, p in tps],
            all_partitions=not tps,
        )
        response = self._call("ElectLeaders", request)
        errors = {
            TopicPartition(r.partition.topic, r.partition.partition): (
                from_pb(r.error) if r.HasField("error") and r.error.code != 0 else None
            )
            for r in response.results
        }
        if as_errors:
            return errors
        # Members, which are str: the public type says str, as kafka-python users expect.
        names: dict[TopicPartition, str] = {
            tp: ErrorCode.NONE if e is None else e.name for tp, e in errors.items()
        }
        return names

    @overload
    def alter_partition_reassignments(
        self,
        reassignments: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        as_errors: Literal[False] = False,
    ) -> None: ...

    @overload
    def alter_partition_reassignments(
        self,
        reassignments: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        as_errors: Literal[True],
    ) -> dict[TopicPartition, StromError | None]: ...

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        as_errors: bool = False,
    ) -> dict[TopicPartition, StromError | None] | None:
        """Moves partitions to new replica lists (None cancels a move in progress), Kafka's
        alterPartitionReassignments (KIP-455); the first partition refused is raised
        (UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
        ...) after every other was tried. With as_errors=True, Kafka's per-partition result
        instead: {partition: None when accepted, else its StromError}."""
        request = controller_pb2.AlterPartitionReassignmentsRequest(
            reassignments=[
                controller_pb2.AlterPartitionReassignmentsRequest.Reassignment(
                    partition=controller_pb2.TopicPartition(topic=t, partition=p),
                    replicas=mpb.BrokerIdList(ids=list(replicas)) if replicas is not None else None,
                )
                for (t, p), replicas in reassignments.items()
            ]
        )
        response = self._call("AlterPartitionReassignments", request)
        errors = {
            TopicPartition(r.partition.topic, r.partition.partition): (
                from_pb(r.error) if r.HasField("error") and r.error.code != 0 else None
            )
            for r in response.results
        }
        if as_errors:
            return errors
        for error in errors.values():
            if error is not None:
                raise error
        return None

    def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[TopicPartition, dict[str, list[int]]]:
        """The reassignments in progress (of the partitions given; all for None), Kafka's
        listPartitionReassignments: per partition its "replicas" and the replicas it is
        "adding" and "removing"."""
        request = controller_pb2.ListPartitionReassignmentsRequest(
            partitions=[
                controller_pb2.TopicPartition(topic=t, partition=p) for t, p in partitions or ()
            ]
        )
        response = self._call("ListPartitionReassignments", request)
        return {
            TopicPartition(r.partition.topic, r.partition.partition): {
                "replicas": list(r.replicas),
                "adding": list(r.adding_replicas),
                "removing": list(r.removing_replicas),
            }
            for r in response.reassignments
        }

    # --- offsets --------------------------------------------------------------------

    def list_offsets(
        self, topic_partition_offsets: Mapping[tuple[str, int], OffsetSpec]
    ) -> dict[TopicPartition, ListOffsetsResultInfo]:
        """Kafka's Admin.listOffsets: per partition, the offset its OffsetSpec names, from
        the partition's leader (the call waits while a leader moves). A topic or partition
        the controller does not know is UNKNOWN_TOPIC_OR_PARTITION at once."""
        wanted: dict[TopicPartition, int] = {}
        for tp, spec in topic_partition_offsets.items():
            if not isinstance(spec, OffsetSpec):
                raise StromError(
                    ErrorCode.INVALID_REQUEST,
                    f"list_offsets takes an OffsetSpec per partition (OffsetSpec.earliest(), "
                    f"latest(), max_timestamp(), for_timestamp(ms)), not {spec!r}",
                )
            wanted[TopicPartition(*tp)] = spec.timestamp
        if not wanted:
            return {}
        # The controller's metadata settles whether a partition exists (a broker may not
        # have learned a topic just created yet: the leaders are waited for, not refused).
        counts = {
            t.name: len(t.partitions)
            for t in self.describe_topics(sorted({tp.topic for tp in wanted}))
        }
        for tp in sorted(wanted):
            if not 0 <= tp.partition < counts[tp.topic]:
                raise StromError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"Partition {tp.topic}-{tp.partition} does not exist: topic {tp.topic} "
                    f"has {counts[tp.topic]} partition{'' if counts[tp.topic] == 1 else 's'}.",
                )
        return {
            tp: ListOffsetsResultInfo(offset, timestamp, None if epoch < 0 else epoch)
            for tp, (offset, timestamp, epoch) in self._groups.list_offsets(wanted).items()
        }

    # --- records ----------------------------------------------------------------------

    def delete_records(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, DeletedRecords]:
        """Kafka's deleteRecords: each partition's records below its offset deleted
        (HIGH_WATERMARK, -1: all below the high watermark), asked of its leader; returns
        each partition's new low watermark, or the error that kept its records
        (OFFSET_OUT_OF_RANGE above the high watermark, UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        wanted = {TopicPartition(*tp): offset for tp, offset in offsets.items()}

        async def work(cluster: Cluster) -> dict[TopicPartition, DeletedRecords]:
            return await delete_records(cluster, wanted, self._groups.timeout_s)

        return self._groups.on_brokers(work)

    # --- log directories ------------------------------------------------------------

    def describe_log_dirs(
        self, broker_ids: Iterable[int] | None = None
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Kafka's describeLogDirs: each broker's log directories by path (every broker
        the metadata lists when `broker_ids` is None), with their replicas, sizes, offset
        lags and the volumes' bytes; a broker not in the metadata is INVALID_REQUEST."""

        async def work(cluster: Cluster) -> dict[int, dict[str, LogDirDescription]]:
            if broker_ids is None:
                await cluster.refresh()
                wanted: Iterable[int] = sorted(cluster.brokers)
            else:
                wanted = broker_ids
            return await describe_log_dirs(cluster, wanted, self._groups.timeout_s)

        return self._groups.on_brokers(work)

    # --- consumer groups ------------------------------------------------------------

    def list_consumer_groups(self) -> list[GroupListing]:
        return self._groups.list_groups()

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """Kafka's describeConsumerGroups: each group's state, protocol, members with their
        assignments, and coordinator (its broker id, and coordinator_address host:port)."""
        return [self._groups.describe_group(g) for g in group_ids]

    def list_consumer_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        return self._groups.committed_offsets(group_id)

    def consumer_group_lag(self, group_id: str) -> list[PartitionLag]:
        return self._groups.lag(group_id)

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Sets an inactive group's committed offsets (Kafka's alterConsumerGroupOffsets)."""
        self._groups.commit_offsets(group_id, {TopicPartition(*tp): o for tp, o in offsets.items()})

    def delete_consumer_groups(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            self._groups.delete_group(group_id)

    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, StromError | None]:
        """Kafka's deleteConsumerGroupOffsets (KIP-496): the group's committed offsets of
        `partitions` are deleted, except those of topics a member of the group subscribes
        to. Returns each partition with None (deleted) or the error that kept it; raises
        the group's error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) when nothing was."""
        return self._groups.delete_offsets(group_id, (TopicPartition(*tp) for tp in partitions))
