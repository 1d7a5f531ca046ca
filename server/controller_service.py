"""ControllerService (strom_api/v1/controller.proto) on a controller's CONTROLLER listener.

A thin edge: requests become QuorumController calls, ApiErrors become ControllerError
answers with Kafka's code, a sentence, whether a retry may succeed, and (NOT_CONTROLLER)
the active controller's id so the caller goes there. Descriptions are answered from this
node's own image, as Kafka's controllers answer DescribeCluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from itertools import repeat
from typing import Any

from metadata.acl_control import AclBindingFilter, check_count, from_code
from metadata.alter_partition import IsrProposal
from metadata.authorizer import StandardAcl
from metadata.broker_lifecycle import BrokerRegistrationRequest, HeartbeatRequest
from metadata.config_control import ConfigEntry, LocalConfig, describe_configs, new_topic_configs
from metadata.controller import EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP, QuorumController
from metadata.errors import ApiError
from metadata.image import Endpoint
from metadata.partition_change import Election
from metadata.scram_control import ScramDeletion, ScramUpsertion, check_alterations
from metadata.topic_control import INTERNAL_TOPICS, NewTopic
from server.api_errors import error_pb
from server.loop_slices import each
from strom_api.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from strom_api.error_codes import ErrorCode
from strom_api.v1 import controller_pb2, controller_pb2_grpc
from strom_api.v1 import metadata_pb2 as mpb

YIELD_EVERY = 1000  # topics described between two turns of the event loop
UUID_BYTES = 16


def _tp(p: Any) -> tuple[str, int]:
    return (p.topic, p.partition)


def _results(out: Any, results: Mapping[tuple[str, int], ApiError | None]) -> Any:
    for (topic, partition), err in sorted(results.items()):
        item = out.results.add(
            partition=controller_pb2.TopicPartition(topic=topic, partition=partition)
        )
        if err is not None:
            item.error.CopyFrom(error_pb(err))
    return out


def _add_entry(entries: Any, e: ConfigEntry) -> None:
    """One DescribeConfigsResponse.Entry appended to the repeated field `entries`."""
    entry = entries.add(
        name=e.name, source=str(e.source), read_only=e.read_only, is_sensitive=e.is_sensitive
    )
    if e.value is not None:
        entry.value = e.value
    for syn in e.synonyms:
        synonym = entry.synonyms.add(name=syn.name, source=str(syn.source))
        if syn.value is not None:
            synonym.value = syn.value


def _acl(b: Any) -> StandardAcl:
    """A wire AclBinding; a code Kafka does not define reads as UNKNOWN (refused later)."""
    return StandardAcl(
        from_code(ResourceType, b.resource_type),
        b.resource_name,
        from_code(PatternType, b.pattern_type),
        b.principal,
        b.host,
        from_code(AclOperation, b.operation),
        from_code(AclPermissionType, b.permission_type),
    )


def _acl_filter(f: Any) -> AclBindingFilter:
    return AclBindingFilter(
        from_code(ResourceType, f.resource_type),
        f.resource_name if f.HasField("resource_name") else None,
        from_code(PatternType, f.pattern_type),
        f.principal if f.HasField("principal") else None,
        f.host if f.HasField("host") else None,
        from_code(AclOperation, f.operation),
        from_code(AclPermissionType, f.permission_type),
    )


def _binding_pb(acl: StandardAcl) -> controller_pb2.AclBinding:
    return controller_pb2.AclBinding(
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission_type,
    )


class ControllerServicer(controller_pb2_grpc.ControllerServiceServicer):
    def __init__(
        self,
        controller: QuorumController,
        cluster_id: str,
        static_config: Mapping[str, str] | None = None,
        node_id: int | None = None,
    ) -> None:
        self.controller = controller
        self.cluster_id = cluster_id
        self.static_config = dict(static_config or {})  # this node's server.properties
        self.node_id = node_id

    def _excessive(self, items: int) -> controller_pb2.ControllerError | None:
        """Kafka's controller refuses a user operation that would write more than
        MAX_RECORDS_PER_USER_OP records (POLICY_VIOLATION, in its words). Each item these
        requests name is a record at least, so one naming more is refused here, whole,
        before any is converted or looked at: 100,000 config resources once held the active
        controller's loop 3-5 s, long enough for the quorum to elect another."""
        if items <= MAX_RECORDS_PER_USER_OP:
            return None
        return self._controller_error(ApiError(ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH))

    def _controller_error(self, error: ApiError) -> controller_pb2.ControllerError:
        core = self.controller.driver.core
        leader = core.leader_id if core is not None else -1
        return controller_pb2.ControllerError(
            error=error_pb(error),
            active_controller_id=leader,
            active_controller_address=self.controller.driver.voters.get(leader, ""),
        )

    async def RegisterBroker(self, request: Any, context: Any) -> Any:  # noqa: N802
        if request.cluster_id != self.cluster_id:
            error = ApiError(
                ErrorCode.INCONSISTENT_CLUSTER_ID,
                f"The broker's cluster id {request.cluster_id} is not this cluster's "
                f"{self.cluster_id}.",
            )
            return controller_pb2.RegisterBrokerResponse(error=self._controller_error(error))
        try:
            epoch = await self.controller.register_broker(
                BrokerRegistrationRequest(
                    request.broker_id,
                    request.incarnation_id,
                    [Endpoint.from_pb(e) for e in request.endpoints],
                    request.rack or None,
                    request.previous_broker_epoch,
                )
            )
        except ApiError as error:
            return controller_pb2.RegisterBrokerResponse(error=self._controller_error(error))
        return controller_pb2.RegisterBrokerResponse(broker_epoch=epoch)

    async def BrokerHeartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            response = await self.controller.broker_heartbeat(
                HeartbeatRequest(
                    request.broker_id,
                    request.broker_epoch,
                    request.current_metadata_offset,
                    want_fence=request.want_fence,
                    want_shutdown=request.want_shut_down,
                    offline_replicas=_offline_replicas(request.offline_replicas),
                )
            )
        except ApiError as error:
            return controller_pb2.BrokerHeartbeatResponse(error=self._controller_error(error))
        return controller_pb2.BrokerHeartbeatResponse(
            is_caught_up=response.is_caught_up,
            is_fenced=response.is_fenced,
            should_shut_down=response.should_shut_down,
        )

    async def AlterPartition(self, request: Any, context: Any) -> Any:  # noqa: N802
        proposals = [
            IsrProposal(
                p.topic_id,
                p.partition,
                p.leader_epoch,
                p.partition_epoch,
                tuple(p.new_isr),
                p.leader_recovery_state,
            )
            for p in request.partitions
        ]
        try:
            results = await self.controller.alter_partition(
                request.broker_id, request.broker_epoch, proposals
            )
        except ApiError as error:
            return controller_pb2.AlterPartitionResponse(error=self._controller_error(error))
        out = controller_pb2.AlterPartitionResponse()
        for result in results:
            part = out.partitions.add(topic_id=result.topic_id, partition=result.partition_id)
            if result.error is not None:
                part.error.CopyFrom(error_pb(result.error))
            elif result.registration is not None:
                reg = result.registration
                part.leader, part.leader_epoch = reg.leader, reg.leader_epoch
                part.isr.extend(reg.isr)
                part.partition_epoch = reg.partition_epoch
        return out

    async def AllocateProducerIds(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            first, count = await self.controller.allocate_producer_ids(
                request.broker_id, request.broker_epoch
            )
        except ApiError as error:
            return controller_pb2.AllocateProducerIdsResponse(error=self._controller_error(error))
        return controller_pb2.AllocateProducerIdsResponse(first_producer_id=first, count=count)

    async def CreateTopics(self, request: Any, context: Any) -> Any:  # noqa: N802
        excessive = self._excessive(len(request.topics))
        if excessive is not None:
            return controller_pb2.CreateTopicsResponse(error=excessive)
        topics = [
            NewTopic(
                t.name,
                t.num_partitions,
                t.replication_factor,
                {p: list(r.ids) for p, r in t.assignments.items()} or None,
                dict(t.configs),
            )
            for t in request.topics
        ]
        try:
            results = await self.controller.create_topics(topics, request.validate_only)
        except ApiError as error:
            return controller_pb2.CreateTopicsResponse(error=self._controller_error(error))
        out = controller_pb2.CreateTopicsResponse()
        configs = {t.name: t.configs for t in topics}
        local = LocalConfig(self.node_id, self.static_config)
        for r in results:
            item = out.topics.add(
                name=r.name,
                topic_id=r.topic_id,
                num_partitions=r.num_partitions,
                replication_factor=r.replication_factor,
            )
            if r.error is not None:
                item.error.CopyFrom(error_pb(r.error))
                continue
            # As Kafka's controller answers CreateTopics v5+: the new topic's configs as
            # its brokers will apply them (computed from this controller's image).
            for entry in new_topic_configs(self.controller.image, configs[r.name], local):
                _add_entry(item.configs, entry)
        return out

    async def DeleteTopics(self, request: Any, context: Any) -> Any:  # noqa: N802
        excessive = self._excessive(len(request.names))
        if excessive is not None:
            return controller_pb2.DeleteTopicsResponse(error=excessive)
        try:
            results = await self.controller.delete_topics(list(request.names))
        except ApiError as error:
            return controller_pb2.DeleteTopicsResponse(error=self._controller_error(error))
        out = controller_pb2.DeleteTopicsResponse()
        for name, err in results.items():
            item = out.topics.add(name=name)
            if err is not None:
                item.error.CopyFrom(error_pb(err))
        return out

    async def CreatePartitions(self, request: Any, context: Any) -> Any:  # noqa: N802
        assignments = [list(a.ids) for a in request.assignments] or None
        try:
            await self.controller.create_partitions(
                request.name, request.count, assignments, request.validate_only
            )
        except ApiError as error:
            return controller_pb2.CreatePartitionsResponse(error=self._controller_error(error))
        return controller_pb2.CreatePartitionsResponse()

    async def DescribeCluster(self, request: Any, context: Any) -> Any:  # noqa: N802
        image = self.controller.image
        core = self.controller.driver.core
        out = controller_pb2.DescribeClusterResponse(
            cluster_id=self.cluster_id,
            controller_id=core.leader_id if core is not None else -1,
            metadata_offset=image.offset,
        )
        for broker_id in sorted(image.cluster.brokers):
            b = image.cluster.brokers[broker_id]
            out.brokers.add(
                broker_id=b.broker_id,
                endpoints=[e.to_pb() for e in b.endpoints],
                rack=b.rack or "",
                broker_epoch=b.epoch,
                fenced=b.fenced,
                in_controlled_shutdown=b.in_controlled_shutdown,
            )
        return out

    async def DescribeTopics(self, request: Any, context: Any) -> Any:  # noqa: N802
        image = self.controller.image  # immutable: the loop may run others meanwhile
        names = list(dict.fromkeys(request.names)) or sorted(image.topics.by_name)
        out = controller_pb2.DescribeTopicsResponse(metadata_offset=image.offset)
        for count, name in enumerate(names, 1):
            if count % YIELD_EVERY == 0:
                # A request may name hundreds of thousands of topics: Raft and heartbeats
                # share this event loop, so let them run between slices of the answer.
                await asyncio.sleep(0)
            topic = image.topics.by_name.get(name)
            item = out.topics.add(name=name)
            if topic is None:
                item.error.CopyFrom(
                    error_pb(
                        ApiError(
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
                        )
                    )
                )
                continue
            item.topic_id = topic.topic_id
            item.is_internal = name in INTERNAL_TOPICS
            for pid in sorted(topic.partitions):
                p = topic.partitions[pid]
                item.partitions.add(
                    partition=pid,
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    replicas=p.replicas,
                    isr=p.isr,
                    adding_replicas=p.adding_replicas,
                    removing_replicas=p.removing_replicas,
                    eligible_leader_replicas=p.elr,
                )
            for key, value in image.configs.of(mpb.TOPIC, name).items():
                item.configs[key] = value
        return out

    async def DescribeQuorum(self, request: Any, context: Any) -> Any:  # noqa: N802
        quorum = self.controller.driver.describe_quorum()
        if quorum is None:
            error = ApiError(ErrorCode.NOT_CONTROLLER, "Only the Raft leader describes the quorum.")
            return controller_pb2.DescribeQuorumResponse(error=self._controller_error(error))
        out = controller_pb2.DescribeQuorumResponse(
            leader_id=quorum.leader_id,
            leader_epoch=quorum.leader_epoch,
            high_watermark=quorum.high_watermark,
        )
        for target, replicas in ((out.voters, quorum.voters), (out.observers, quorum.observers)):
            for r in replicas:
                target.add(
                    replica_id=r.replica_id,
                    log_end_offset=r.log_end_offset,
                    last_fetch_timestamp=r.last_fetch_timestamp,
                    last_caught_up_timestamp=r.last_caught_up_timestamp,
                )
        return out

    async def ElectLeaders(self, request: Any, context: Any) -> Any:  # noqa: N802
        excessive = self._excessive(len(request.partitions))
        if excessive is not None:
            return controller_pb2.ElectLeadersResponse(error=excessive)
        election = Election.UNCLEAN if request.election_type == 1 else Election.PREFERRED
        partitions = None if request.all_partitions else [_tp(p) for p in request.partitions]
        try:
            results = await self.controller.elect_leaders(partitions, election)
        except ApiError as error:
            return controller_pb2.ElectLeadersResponse(error=self._controller_error(error))
        return _results(controller_pb2.ElectLeadersResponse(), results)

    async def AlterPartitionReassignments(self, request: Any, context: Any) -> Any:  # noqa: N802
        excessive = self._excessive(len(request.reassignments))
        if excessive is not None:
            return controller_pb2.AlterPartitionReassignmentsResponse(error=excessive)
        requests = {
            _tp(r.partition): (list(r.replicas.ids) if r.HasField("replicas") else None)
            for r in request.reassignments
        }
        try:
            results = await self.controller.alter_partition_reassignments(
                requests, request.keep_replication_factor
            )
        except ApiError as error:
            return controller_pb2.AlterPartitionReassignmentsResponse(
                error=self._controller_error(error)
            )
        return _results(controller_pb2.AlterPartitionReassignmentsResponse(), results)

    async def ListPartitionReassignments(self, request: Any, context: Any) -> Any:  # noqa: N802
        partitions = [_tp(p) for p in request.partitions] or None
        try:
            ongoing = self.controller.list_partition_reassignments(partitions)
        except ApiError as error:
            return controller_pb2.ListPartitionReassignmentsResponse(
                error=self._controller_error(error)
            )
        out = controller_pb2.ListPartitionReassignmentsResponse()
        for (topic, partition), r in sorted(ongoing.items()):
            out.reassignments.add(
                partition=controller_pb2.TopicPartition(topic=topic, partition=partition),
                replicas=r.replicas,
                adding_replicas=r.adding,
                removing_replicas=r.removing,
            )
        return out

    async def IncrementalAlterConfigs(self, request: Any, context: Any) -> Any:  # noqa: N802
        excessive = self._excessive(len(request.resources))
        if excessive is not None:
            return controller_pb2.IncrementalAlterConfigsResponse(error=excessive)
        changes = [
            (
                (int(r.resource.type), r.resource.name),
                [(op.name, int(op.op), op.value if op.HasField("value") else None) for op in r.ops],
            )
            for r in request.resources
        ]
        try:
            results = await self.controller.incremental_alter_configs(
                changes, request.validate_only, request.replace
            )
        except ApiError as error:
            return controller_pb2.IncrementalAlterConfigsResponse(
                error=self._controller_error(error)
            )
        out = controller_pb2.IncrementalAlterConfigsResponse()
        for (resource_type, name), err in results.items():
            item = out.results.add(
                resource=controller_pb2.ConfigResource(
                    type=resource_type,  # type: ignore[arg-type]
                    name=name,
                )
            )
            if err is not None:
                item.error.CopyFrom(error_pb(err))
        return out

    async def DescribeConfigs(self, request: Any, context: Any) -> Any:  # noqa: N802
        out = controller_pb2.DescribeConfigsResponse()
        keys = list(request.keys) or None
        async for resource in each(request.resources):  # may be hundreds of thousands
            item = out.results.add(resource=resource)
            # This node's server.properties is the static layer of its own config and of a
            # topic's as it answers; another broker's static configs are that broker's to
            # tell, so its describe shows dynamic values and defaults only.
            is_other_broker = int(resource.type) == mpb.BROKER and resource.name not in (
                "",
                str(self.node_id),
            )
            try:
                entries = describe_configs(
                    self.controller.image,
                    (int(resource.type), resource.name),
                    None if is_other_broker else self.static_config,
                    keys,
                    broker_id=self.node_id,
                )
            except ApiError as error:
                item.error.CopyFrom(error_pb(error))
                continue
            for e in entries:
                _add_entry(item.entries, e)
        return out

    async def CreateAcls(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            check_count(len(request.creations), "ACL creations")
            results = await self.controller.create_acls([_acl(b) for b in request.creations])
        except ApiError as error:
            return controller_pb2.CreateAclsResponse(error=self._controller_error(error))
        out = controller_pb2.CreateAclsResponse()
        for err in results:
            item = out.results.add()
            if err is not None:
                item.error.CopyFrom(error_pb(err))
        return out

    async def DescribeAcls(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            acls = self.controller.describe_acls(_acl_filter(request.filter))
        except ApiError as error:
            return controller_pb2.DescribeAclsResponse(error=self._controller_error(error))
        return controller_pb2.DescribeAclsResponse(acls=[_binding_pb(a) for a in acls])

    async def DeleteAcls(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            check_count(len(request.filters), "ACL deletion filters")
            results = await self.controller.delete_acls([_acl_filter(f) for f in request.filters])
        except ApiError as error:
            return controller_pb2.DeleteAclsResponse(error=self._controller_error(error))
        out = controller_pb2.DeleteAclsResponse()
        for result in results:
            item = out.results.add(deleted=[_binding_pb(a) for a in result.deleted])
            if result.error is not None:
                item.error.CopyFrom(error_pb(result.error))
        return out

    async def AlterUserScramCredentials(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            # Counted before any is converted, as the ACL requests are.
            check_alterations(len(request.deletions) + len(request.upsertions))
            deletions = [ScramDeletion(d.name, d.mechanism) for d in request.deletions]
            upsertions = [
                ScramUpsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
                for u in request.upsertions
            ]
            results = await self.controller.alter_user_scram_credentials(deletions, upsertions)
        except ApiError as error:
            return controller_pb2.AlterUserScramCredentialsResponse(
                error=self._controller_error(error)
            )
        out = controller_pb2.AlterUserScramCredentialsResponse()
        for user, err in results:
            item = out.results.add(user=user)
            if err is not None:
                item.error.CopyFrom(error_pb(err))
        return out

    async def DescribeUserScramCredentials(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            results = self.controller.describe_user_scram_credentials(list(request.users))
        except ApiError as error:
            return controller_pb2.DescribeUserScramCredentialsResponse(
                error=self._controller_error(error)
            )
        out = controller_pb2.DescribeUserScramCredentialsResponse()
        for user, described in results.items():
            item = out.results.add(user=user)
            if isinstance(described, ApiError):
                item.error.CopyFrom(error_pb(described))
                continue
            for info in described:
                item.credential_infos.add(mechanism=info.mechanism, iterations=info.iterations)
        return out


def _offline_replicas(entries: Any) -> frozenset[tuple[bytes, int]]:
    """A heartbeat's offline replicas, each topic id read once (server/request_items.py) and
    checked to be a UUID's 16 bytes, as Kafka's wire format makes every topic id."""
    replicas: set[tuple[bytes, int]] = set()
    for entry in entries:
        topic_id = entry.topic_id
        if len(topic_id) != UUID_BYTES:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"An offline replica names a topic id of {len(topic_id)} bytes; a topic id is "
                f"a UUID of {UUID_BYTES} bytes.",
            )
        replicas.update(zip(repeat(topic_id), entry.partitions))
    return frozenset(replicas)
