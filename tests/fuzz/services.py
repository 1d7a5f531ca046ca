"""Every RPC a Strom node serves, read from the generated descriptors, and how to call one
with raw bytes.

A node has two listeners. The broker listener carries ClientService, ReplicaService, a
ControllerService that forwards to the active controller, and grpc.health.v1; the controller
listener carries RaftService, the controller's own ControllerService, and grpc.health.v1.
The catalogue lists each method once per listener that serves it, so the forwarding path
and the controller's own servicer are both fuzzed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, MethodDescriptor, ServiceDescriptor
from grpc_health.v1 import health_pb2  # type: ignore[import-untyped]

from strom_api.v1 import client_pb2, controller_pb2, raft_pb2, replica_pb2, security_pb2

BROKER, CONTROLLER = "broker", "controller"
SECURITY_SERVICE = security_pb2.DESCRIPTOR.services_by_name["SecurityService"]

# Which listener serves which service.
LISTENERS: dict[str, tuple[ServiceDescriptor, ...]] = {
    BROKER: (
        client_pb2.DESCRIPTOR.services_by_name["ClientService"],
        replica_pb2.DESCRIPTOR.services_by_name["ReplicaService"],
        controller_pb2.DESCRIPTOR.services_by_name["ControllerService"],
        health_pb2.DESCRIPTOR.services_by_name["Health"],
    ),
    CONTROLLER: (
        raft_pb2.DESCRIPTOR.services_by_name["RaftService"],
        controller_pb2.DESCRIPTOR.services_by_name["ControllerService"],
        health_pb2.DESCRIPTOR.services_by_name["Health"],
    ),
}

# RPCs that cannot change a topic, its partitions, configs or offsets: the state check
# skips its snapshots around them. (Group RPCs write only __consumer_offsets, whose offsets
# move on their own as sessions expire, so the snapshot leaves those out anyway.)
READ_ONLY = {
    "Metadata",  # auto.create.topics.enable is off in the fuzzed cluster
    "Fetch",
    "FetchStream",
    "ListOffsets",
    "OffsetsForLeaderEpoch",
    "InitProducerId",
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "DescribeGroups",
    "ListGroups",
    "DeleteGroups",
    "OffsetDelete",
    "DescribeLogDirs",
    "DescribeCluster",
    "DescribeTopics",
    "DescribeQuorum",
    "ListPartitionReassignments",
    "DescribeConfigs",
    "DescribeAcls",
    "CreateAcls",  # ACLs are not enforced yet, and no ACL changes a topic or its data
    "DeleteAcls",
    "BrokerHeartbeat",
    "RegisterBroker",
    "AllocateProducerIds",
    "Check",
    "Watch",
    "SaslAuthenticate",  # a session is no state: nothing of the cluster changes
    "DescribeUserScramCredentials",
    "AlterUserScramCredentials",  # SCRAM credentials are no topic state
}

# Served without a SASL session on a SASL listener (server/admission.py): the handshake
# itself and health. Every other call without one must be refused UNAUTHENTICATED.
SERVED_UNAUTHENTICATED = {"SecurityService", "Health"}

# Group RPCs create __consumer_offsets on first use (after a fuzzed DeleteTopics removed it,
# say): after one, the next state check starts from a new snapshot.
MAY_CREATE_OFFSETS_TOPIC = {
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "DescribeGroups",
    "ListGroups",
    "DeleteGroups",
}

# Services whose every message comes from a sender the fuzzer is not (a non-voter on Raft, a
# non-replica on ReplicaService): nothing they say may change a topic.
NEVER_HEARD = {"RaftService", "ReplicaService"}


@dataclass(frozen=True)
class Rpc:
    listener: str
    service: str  # short name: ClientService
    method: str
    path: str  # /strom_api.v1.ClientService/Produce
    request: Descriptor
    response: Descriptor
    client_streaming: bool
    server_streaming: bool

    @property
    def name(self) -> str:
        return f"{self.listener}:{self.service}.{self.method}"

    @property
    def read_only(self) -> bool:
        return self.method in READ_ONLY

    def request_class(self) -> Any:
        return message_factory.GetMessageClass(self.request)

    def response_class(self) -> Any:
        return message_factory.GetMessageClass(self.response)


def _rpc(listener: str, service: ServiceDescriptor, method: MethodDescriptor) -> Rpc:
    return Rpc(
        listener,
        service.name,
        method.name,
        f"/{service.full_name}/{method.name}",
        method.input_type,
        method.output_type,
        method.client_streaming,
        method.server_streaming,
    )


def catalogue(secured: bool = False) -> list[Rpc]:
    """Every (listener, service, method), in a fixed order (cases index into it); on a
    secured cluster (tests/fuzz/secured.py) each listener also serves SecurityService."""
    extra = (SECURITY_SERVICE,) if secured else ()
    return [
        _rpc(listener, service, method)
        for listener, services in LISTENERS.items()
        for service in (*services, *extra)
        for method in service.methods
    ]


def select(rpcs: list[Rpc], service: str | None) -> list[Rpc]:
    """`--service X`: the RPCs whose service or method name is X (case-insensitive)."""
    if not service:
        return rpcs
    wanted = {s.strip().lower() for s in service.split(",")}
    chosen = [
        r
        for r in rpcs
        if r.service.lower() in wanted or r.method.lower() in wanted or r.name.lower() in wanted
    ]
    if not chosen:
        known = sorted({r.service for r in rpcs} | {r.method for r in rpcs})
        raise ValueError(f"no RPC matches {service!r}; choose from {', '.join(known)}")
    return chosen


@dataclass
class Outcome:
    """What one call answered: a gRPC status and the response messages' bytes."""

    code: grpc.StatusCode
    details: str
    responses: list[bytes]
    seconds: float


def _identity(b: bytes) -> bytes:
    return b


def call(
    channel: grpc.Channel,
    rpc: Rpc,
    requests: list[bytes],
    timeout_s: float,
    metadata: tuple[tuple[str, str], ...] = (),
) -> Outcome:
    """One call of `rpc` with already-serialized request messages (a unary RPC takes the
    first; a stream may have none); the client half-closes a stream after its last
    message. `metadata`: the call's own (a SASL session token, forged or replayed)."""
    import time

    started = time.monotonic()
    responses: list[bytes] = []
    extra = metadata or None
    try:
        if rpc.client_streaming:
            method: Any = channel.stream_stream(
                rpc.path, request_serializer=_identity, response_deserializer=_identity
            )
            stream: Iterator[bytes] = method(iter(requests), timeout=timeout_s, metadata=extra)
            responses.extend(stream)
        elif rpc.server_streaming:
            method = channel.unary_stream(
                rpc.path, request_serializer=_identity, response_deserializer=_identity
            )
            stream = method(requests[0], timeout=timeout_s, metadata=extra)
            responses.extend(stream)
        else:
            method = channel.unary_unary(
                rpc.path, request_serializer=_identity, response_deserializer=_identity
            )
            responses.append(method(requests[0], timeout=timeout_s, metadata=extra))
        code, details = grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        code, details = e.code(), e.details() or ""  # type: ignore[attr-defined]
    return Outcome(code, details, responses, time.monotonic() - started)
