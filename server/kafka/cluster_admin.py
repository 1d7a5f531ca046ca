"""DescribeCluster (key 60), ElectLeaders (43), AlterPartitionReassignments (45),
ListPartitionReassignments (46) and DescribeQuorum (55) on the Kafka listener, on the path
of the gRPC front end's calls of the same names (server/controller_forwarder.py
authorized_forwarding: the cluster's ALTER or DESCRIBE as
server/controller_authorization.py checks it, none for DescribeCluster, then the active
controller); the answers converted to the request's version.

Decided as Kafka 4:
- DescribeCluster lists the brokers with their endpoint on the listener the request came
  in on (a broker without one is left out, as Kafka's metadata cache leaves it out), the
  fenced ones only when include_fenced_brokers asks (v2), and names a random listed broker
  as the controller, as a KRaft broker does (admin clients send it their controller
  requests, which any broker forwards). Asked for the CONTROLLERS endpoint type (KIP-919),
  a broker answers UNSUPPORTED_ENDPOINT_TYPE, as Kafka's does.
- DescribeQuorum describes the one partition of __cluster_metadata; the v2 `nodes` list
  (KIP-853's voter endpoints) is left empty: Strom's controller does not report them.
- ElectLeaders' and the reassignments' `timeout` is not a deadline: the answer comes once
  the controller has committed (REQUEST_TIMED_OUT after the forwarder's 30 s).
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Iterable
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.constants import uuid_zero
from kio.static.primitive import i8, i32, i64

from server.controller_forwarder import ControllerCall
from server.kafka.apis import (
    ALTER_PARTITION_REASSIGNMENTS,
    DESCRIBE_CLUSTER,
    DESCRIBE_QUORUM,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
)
from server.kafka.controller_answers import (
    NO_ERROR,
    Outcome,
    item_outcome,
)
from server.kafka.controller_calls import forward
from server.kafka.frames import Request
from server.kafka.versioned import build, nested
from server.loop_slices import collected, each, each_of_groups, per_group
from server.request_authorization import RequestAuthorizer
from strom_api.acls import CLUSTER_NAME, AclOperation, ResourceType
from strom_api.v1 import controller_pb2

_NO_THROTTLE = datetime.timedelta(0)
BROKERS_ENDPOINT = 1  # DescribeCluster's endpoint_type (KIP-919); 2 is CONTROLLERS
METADATA_TOPIC = "__cluster_metadata"
# Kafka's AclEntry.supportedOperations(CLUSTER), in authorized-operations bit order.
_CLUSTER_OPERATIONS = (
    AclOperation.CREATE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
)
_NOT_ASKED = -(2**31)  # Kafka's authorized operations when not asked for (Integer.MIN_VALUE)


class ClusterAdmin:
    def __init__(self, call: ControllerCall, listener_name: str, authz: RequestAuthorizer) -> None:
        self.call = call
        self.listener_name = listener_name
        self.authz = authz

    # --- DescribeCluster ----------------------------------------------------------------

    async def describe_cluster(self, request: Request) -> Any:
        body = request.body
        response_type = load_response_schema(DESCRIBE_CLUSTER, request.api_version)
        broker_type = nested(response_type, "DescribeClusterBroker")
        endpoint_type = int(getattr(body, "endpoint_type", BROKERS_ENDPOINT))
        if endpoint_type != BROKERS_ENDPOINT:
            return build(
                response_type,
                throttle_time=_NO_THROTTLE,
                error_code=KafkaErrorCode.unsupported_endpoint_type,
                error_message="The request was sent to an endpoint of type BROKER, but we "
                f"wanted an endpoint of type {_endpoint_name(endpoint_type)}",
                endpoint_type=i8(endpoint_type),
                cluster_id="",
                controller_id=i32(-1),
                brokers=(),
                cluster_authorized_operations=i32(_NOT_ASKED),
            )
        response, failed = await forward(
            self.call, "DescribeCluster", controller_pb2.DescribeClusterRequest()
        )
        include_fenced = getattr(body, "include_fenced_brokers", False)
        brokers = []
        if response is not None:
            for b in response.brokers:
                endpoint = next((e for e in b.endpoints if e.name == self.listener_name), None)
                if endpoint is None or (b.fenced and not include_fenced):
                    continue
                brokers.append(
                    build(
                        broker_type,
                        broker_id=i32(b.broker_id),
                        host=endpoint.host,
                        port=i32(endpoint.port),
                        rack=b.rack or None,
                        is_fenced=b.fenced,
                    )
                )
        code, message = failed or NO_ERROR
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            error_code=code,
            error_message=message,
            endpoint_type=i8(endpoint_type),
            cluster_id=response.cluster_id if response is not None else "",
            controller_id=i32(random.choice(brokers).broker_id if brokers else -1),
            brokers=tuple(brokers),
            cluster_authorized_operations=i32(
                self._cluster_operations()
                if body.include_cluster_authorized_operations
                else _NOT_ASKED
            ),
        )

    def _cluster_operations(self) -> int:
        """Kafka's bit field of the operations the caller may do on the cluster."""
        bits = 0
        for operation in _CLUSTER_OPERATIONS:
            if self.authz.allowed(
                "DescribeCluster", operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
            ):
                bits |= 1 << operation
        return bits

    # --- ElectLeaders -------------------------------------------------------------------

    async def elect_leaders(self, request: Request) -> Any:
        body = request.body
        pb_request = controller_pb2.ElectLeadersRequest(
            election_type=int(body.election_type),  # type: ignore[arg-type]
            all_partitions=body.topic_partitions is None,
        )
        async for name, p in each_of_groups(
            (str(t.topic), t.partitions) for t in body.topic_partitions or ()
        ):
            pb_request.partitions.add(topic=name, partition=int(p))
        response, failed = await forward(self.call, "ElectLeaders", pb_request)
        response_type = load_response_schema(ELECT_LEADERS, request.api_version)
        topic_type = nested(response_type, "ReplicaElectionResult")
        partition_type = nested(response_type, "PartitionResult")
        results = await per_group(
            (await _by_topic(response, failed)).items(),
            lambda _, outcome: build(
                partition_type,
                partition_id=i32(outcome[0]),
                error_code=outcome[1][0],
                error_message=outcome[1][1],
            ),
            lambda topic, partitions: build(
                topic_type, topic=topic, partition_result=tuple(partitions)
            ),
        )
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            error_code=(failed or NO_ERROR)[0],
            replica_election_results=tuple(results),
        )

    # --- AlterPartitionReassignments ----------------------------------------------------

    async def alter_partition_reassignments(self, request: Request) -> Any:
        body = request.body
        pb_request = controller_pb2.AlterPartitionReassignmentsRequest(
            # v1 (KIP-860); v0 allows the change, as Kafka's default does
            keep_replication_factor=not getattr(body, "allow_replication_factor_change", True)
        )
        async for name, p in each_of_groups((str(t.name), t.partitions) for t in body.topics):
            item = pb_request.reassignments.add(
                partition=controller_pb2.TopicPartition(
                    topic=name, partition=int(p.partition_index)
                )
            )
            if p.replicas is not None:  # null cancels the reassignment in progress
                item.replicas.ids.extend(int(b) for b in p.replicas)
        response, failed = await forward(self.call, "AlterPartitionReassignments", pb_request)
        response_type = load_response_schema(ALTER_PARTITION_REASSIGNMENTS, request.api_version)
        topic_type = nested(response_type, "ReassignableTopicResponse")
        partition_type = nested(response_type, "ReassignablePartitionResponse")
        results = await per_group(
            (await _by_topic(response, failed)).items(),
            lambda _, outcome: build(
                partition_type,
                partition_index=i32(outcome[0]),
                error_code=outcome[1][0],
                error_message=outcome[1][1],
            ),
            lambda topic, partitions: build(topic_type, name=topic, partitions=tuple(partitions)),
        )
        code, message = failed or NO_ERROR
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            allow_replication_factor_change=getattr(body, "allow_replication_factor_change", True),
            error_code=code,
            error_message=message,
            responses=tuple(results),
        )

    # --- ListPartitionReassignments -----------------------------------------------------

    async def list_partition_reassignments(self, request: Request) -> Any:
        body = request.body
        pb_request = controller_pb2.ListPartitionReassignmentsRequest()
        async for name, p in each_of_groups(
            (str(t.name), t.partition_indexes) for t in body.topics or ()
        ):
            pb_request.partitions.add(topic=name, partition=int(p))
        asked_none = body.topics is not None and not pb_request.partitions
        response, failed = (
            (None, None)
            if asked_none
            else await forward(self.call, "ListPartitionReassignments", pb_request)
        )
        response_type = load_response_schema(LIST_PARTITION_REASSIGNMENTS, request.api_version)
        topic_type = nested(response_type, "OngoingTopicReassignment")
        partition_type = nested(response_type, "OngoingPartitionReassignment")
        topics: dict[str, list[Any]] = {}
        async for r in each(
            response.reassignments if response is not None and failed is None else ()
        ):
            topics.setdefault(r.partition.topic, []).append(
                build(
                    partition_type,
                    partition_index=i32(r.partition.partition),
                    replicas=tuple(i32(b) for b in r.replicas),
                    adding_replicas=tuple(i32(b) for b in r.adding_replicas),
                    removing_replicas=tuple(i32(b) for b in r.removing_replicas),
                )
            )
        code, message = failed or NO_ERROR
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            error_code=code,
            error_message=message,
            topics=tuple(
                await collected(
                    build(topic_type, name=name, partitions=tuple(partitions))
                    for name, partitions in topics.items()
                )
            ),
        )

    # --- DescribeQuorum -----------------------------------------------------------------

    async def describe_quorum(self, request: Request) -> Any:
        response_type = load_response_schema(DESCRIBE_QUORUM, request.api_version)
        topic_type = nested(response_type, "TopicData")
        partition_type = nested(response_type, "PartitionData")
        replica_type = nested(response_type, "ReplicaState")
        topics = request.body.topics
        asked_alone = len(topics) == 1 and len(topics[0].partitions) == 1
        if not (
            asked_alone
            and str(topics[0].topic_name) == METADATA_TOPIC
            and int(topics[0].partitions[0].partition_index) == 0
        ):
            # Kafka's KafkaRaftClient: only the metadata partition, asked alone; otherwise
            # every partition asked is answered UNKNOWN_TOPIC_OR_PARTITION (in loop slices of
            # partitions and topics: a request of 180,000 partitions held the loop 1 s, the
            # Kafka-protocol fuzzer's seed 8 case 303, and one of 34,615 topics 0.3 s while
            # each topic's partitions were a slice of their own, seed 26 case 412).
            answered = await per_group(
                ((t.topic_name, t.partitions) for t in topics),
                lambda _, p: build(
                    partition_type,
                    partition_index=p.partition_index,
                    error_code=KafkaErrorCode.unknown_topic_or_partition,
                    error_message=None,
                    leader_id=i32(-1),
                    leader_epoch=i32(-1),
                    high_watermark=i64(-1),
                    current_voters=(),
                    observers=(),
                ),
                lambda name, partitions: build(
                    topic_type, topic_name=name, partitions=tuple(partitions)
                ),
            )
            return build(
                response_type,
                error_code=KafkaErrorCode.none,
                error_message=None,
                topics=tuple(answered),
                nodes=(),
            )
        response, failed = await forward(
            self.call, "DescribeQuorum", controller_pb2.DescribeQuorumRequest()
        )
        if response is None or failed is not None:
            code, message = failed or NO_ERROR
            return build(response_type, error_code=code, error_message=message, topics=(), nodes=())

        def replicas(items: Iterable[Any]) -> tuple[Any, ...]:
            return tuple(
                build(
                    replica_type,
                    replica_id=i32(r.replica_id),
                    replica_directory_id=uuid_zero,
                    log_end_offset=i64(r.log_end_offset),
                    last_fetch_timestamp=i64(r.last_fetch_timestamp),
                    last_caught_up_timestamp=i64(r.last_caught_up_timestamp),
                )
                for r in items
            )

        partition = build(
            partition_type,
            partition_index=i32(0),
            error_code=KafkaErrorCode.none,
            error_message=None,
            leader_id=i32(response.leader_id),
            leader_epoch=i32(response.leader_epoch),
            high_watermark=i64(response.high_watermark),
            current_voters=replicas(response.voters),
            observers=replicas(response.observers),
        )
        return build(
            response_type,
            error_code=KafkaErrorCode.none,
            error_message=None,
            topics=(build(topic_type, topic_name=METADATA_TOPIC, partitions=(partition,)),),
            nodes=(),
        )


async def _by_topic(
    response: Any | None, failed: Outcome | None
) -> dict[str, list[tuple[int, Outcome]]]:
    """Each partition's outcome in the controller's answer (none when the call failed), by
    topic, in loop slices: an answer may carry 250,000 partitions."""
    out: dict[str, list[tuple[int, Outcome]]] = {}
    async for r in each(response.results if response is not None and failed is None else ()):
        out.setdefault(r.partition.topic, []).append((r.partition.partition, item_outcome(r)))
    return out


def _endpoint_name(endpoint_type: int) -> str:
    return {1: "BROKER", 2: "CONTROLLER"}.get(endpoint_type, f"UNKNOWN({endpoint_type})")
