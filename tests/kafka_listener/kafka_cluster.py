"""Three combined nodes (or a split cluster's brokers), each with a Kafka protocol listener
(KAFKA, kafka.listener.names) beside its gRPC PLAINTEXT one, and a raw Kafka-protocol client
for the framing tests."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from tests.node_integration.node_cluster import NodeCluster
from tests.raft_integration.process_cluster import free_ports

# The topics the module's cluster is made with (conftest.py), and their partitions.
TOPICS = {"orders": 3, "payments": 1}

# Small enough that the oversized-frame test need not send much.
MAX_REQUEST_BYTES = 1024 * 1024


class KafkaCluster(NodeCluster):
    def _write_config(self, node: int) -> None:
        if not hasattr(self, "kafka_port"):
            self.kafka_port = dict(zip(self.ids, free_ports(len(self.ids)), strict=True))
        super()._write_config(node)
        if self.split and node in self.controller_ids:
            return  # a controller-only node serves no clients
        host = self.host[node]
        listeners = [
            f"PLAINTEXT://{host}:{self.broker_port[node]}",
            f"KAFKA://{host}:{self.kafka_port[node]}",
        ]
        if node in self.controller_ids:
            listeners.append(f"CONTROLLER://{host}:{self.controller_port[node]}")
        with open(self.config_path(node), "a") as f:  # later lines win
            f.write(
                f"listeners={','.join(listeners)}\n"
                "kafka.listener.names=KAFKA\n"
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT,"
                "CONTROLLER:PLAINTEXT\n"
                f"socket.request.max.bytes={MAX_REQUEST_BYTES}\n"
            )

    def kafka_bootstrap(self) -> str:
        """Every broker's Kafka listener (the broker-only nodes of a split cluster)."""
        brokers = [i for i in self.ids if not self.split or i not in self.controller_ids]
        return ",".join(f"{self.host[i]}:{self.kafka_port[i]}" for i in brokers)


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def request_frame(body: Any, correlation_id: int, client_id: str = "strom-test") -> bytes:
    """A size-prefixed request frame of a kio request, in the header its version takes."""
    header_type = type(body).__header_schema__
    assert header_type in (RequestHeaderV1, RequestHeaderV2)
    header = header_type(
        request_api_key=i16(body.__api_key__),
        request_api_version=i16(body.__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    data = encode(header) + encode(body)
    return struct.pack(">i", len(data)) + data


def raw_frame(api_key: int, version: int, correlation_id: int, rest: bytes = b"") -> bytes:
    """A frame with a v1 header (client id null) and `rest` as its body."""
    data = struct.pack(">hhih", api_key, version, correlation_id, -1) + rest
    return struct.pack(">i", len(data)) + data


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame's bytes, or None when the broker closed the connection."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def decode_response(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, response) of a response frame."""
    response_type = load_response_schema(api_key, version)
    header, size = entity_reader(response_type.__header_schema__)(frame, 0)
    body, body_size = entity_reader(response_type)(frame, size)
    assert size + body_size == len(frame)
    return int(header.correlation_id), body


def connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock
