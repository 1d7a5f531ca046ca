"""What the data-plane tests of the Kafka listener share: topics of their own (created over
gRPC, known with a leader by every broker's Kafka listener), raw Produce frames, partition
leaders as the Kafka listener names them, and records read back through Strom's own
client for comparison."""

from __future__ import annotations

import datetime
import time
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from server.kafka.versioned import build
from strom import Consumer
from strom.fetcher import ConsumerRecord
from strom_api.records import Record, encode_batch
from tests.client.cluster_helpers import bootstrap, create_topic
from tests.kafka_listener.kafka_cluster import (
    KafkaCluster,
    connect,
    decode_response,
    read_frame,
    request_frame,
)
from tests.node_integration.node_cluster import wait_until

PRODUCE, METADATA, INIT_PRODUCER_ID = 0, 3, 22
# Records' timestamps: recent, so that retention.ms (7 days) never deletes them mid-test.
BASE_TS = (int(time.time()) // 60 - 60) * 60_000


def kafka_address(cluster: KafkaCluster, node: int) -> str:
    return f"{cluster.host[node]}:{cluster.kafka_port[node]}"


def leaders(cluster: KafkaCluster, topic: str, node: int = 1) -> dict[int, int] | None:
    """Each partition's leader as node `node`'s Kafka listener answers Metadata v12, or None
    while it does not know the topic or a partition has no leader."""
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    try:
        with connect(kafka_address(cluster, node)) as sock:
            sock.sendall(request_frame(request, 1))
            frame = read_frame(sock)
    except OSError:
        return None
    if frame is None:
        return None
    [answer] = decode_response(frame, METADATA, 12)[1].topics
    if answer.error_code != ErrorCode.none or not answer.partitions:
        return None
    if any(p.error_code != ErrorCode.none or p.leader_id < 0 for p in answer.partitions):
        return None
    return {int(p.partition_index): int(p.leader_id) for p in answer.partitions}


def kafka_topic(cluster: KafkaCluster, name: str, partitions: int = 1, **configs: str) -> None:
    """A topic of RF 3 (min.insync.replicas 2), once every broker's Kafka listener knows
    each of its partitions' leaders."""
    create_topic(cluster, name, partitions, **configs)
    for node in cluster.ids:
        wait_until(
            lambda n=node: (leaders(cluster, name, n) or {}).keys() == set(range(partitions)),
            20,
            f"node {node} to know {name}",
        )


def leader_address(cluster: KafkaCluster, topic: str, partition: int) -> str:
    found = leaders(cluster, topic)
    assert found is not None, topic
    return kafka_address(cluster, found[partition])


def batch(*values: bytes, timestamp: int | None = None) -> bytes:
    """One uncompressed RecordBatch v2 of `values` (keys k0, k1, ...)."""
    now = int(time.time() * 1000) if timestamp is None else timestamp
    return encode_batch([Record(i, now, f"k{i}".encode(), v, []) for i, v in enumerate(values)])


def produce_request(
    version: int,
    partitions: list[tuple[str, int, bytes | None]],
    acks: int = -1,
    timeout_ms: int = 10_000,
) -> Any:
    """A kio Produce request of `version`: one topic entry per (topic, partition, records)."""
    request_type = load_request_schema(PRODUCE, version)
    module = __import__(request_type.__module__, fromlist=["TopicProduceData"])
    return request_type(
        transactional_id=None,
        acks=i16(acks),
        timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
        topic_data=tuple(
            module.TopicProduceData(
                name=topic,
                partition_data=(module.PartitionProduceData(index=i32(p), records=records),),
            )
            for topic, p, records in partitions
        ),
    )


def send(
    address: str, *requests: tuple[Any, int], replies: int | None = None
) -> list[bytes | None]:
    """Sends each (request, correlation id) on one connection, then reads `replies` frames
    (by default one per request; None once the broker closed the connection)."""
    with connect(address) as sock:
        for request, correlation_id in requests:
            sock.sendall(request_frame(request, correlation_id))
        return [read_frame(sock) for _ in range(len(requests) if replies is None else replies)]


def strom_records(
    cluster: KafkaCluster, topic: str, partitions: int, count: int, timeout_s: float = 30
) -> list[ConsumerRecord]:
    """The first `count` records of `topic` read through Strom's own client (gRPC), by
    partition and offset."""
    out: list[ConsumerRecord] = []
    with Consumer(bootstrap_servers=bootstrap(cluster), auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(records)
    assert len(out) == count, (len(out), count)
    return sorted(out, key=lambda r: (r.partition, r.offset))


FETCH = 1


def strom_produced(cluster: KafkaCluster, topic: str, count: int, partition: int = 0) -> list[Any]:
    """`count` records written through Strom's own producer (gRPC) to one partition, with
    keys, headers and timestamps of their own; their RecordMetadata."""
    from strom import Producer

    with Producer(bootstrap(cluster), acks="all") as producer:
        futures = [
            producer.send(
                topic,
                f"value-{i}".encode(),
                key=f"key-{i}".encode(),
                headers=[("n", str(i).encode()), ("none", None)],
                partition=partition,
                timestamp_ms=BASE_TS + i,
            )
            for i in range(count)
        ]
        return [f.get(timeout=30) for f in futures]


def expected_strom_records(count: int) -> list[tuple[int, bytes, bytes, int, list[Any]]]:
    """What strom_produced wrote: (offset, key, value, timestamp, headers) each."""
    return [
        (
            i,
            f"key-{i}".encode(),
            f"value-{i}".encode(),
            BASE_TS + i,
            [("n", str(i).encode()), ("none", None)],
        )
        for i in range(count)
    ]


def fetch_request(
    version: int,
    topics: list[tuple[Any, list[tuple[int, int]]]],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    isolation_level: int = 0,
    session_id: int = 0,
    session_epoch: int = -1,
    replica_id: int = -1,
) -> Any:
    """A kio Fetch request of `version`; `topics` as (name, or topic id from v13, and
    [(partition, fetch offset)])."""
    request_type = load_request_schema(FETCH, version)
    module = __import__(request_type.__module__, fromlist=["FetchTopic"])
    topic_key = "topic_id" if version >= 13 else "topic"
    fields: dict[str, Any] = {}
    if version >= 15:
        fields["replica_state"] = module.ReplicaState(replica_id=i32(replica_id))
    else:
        fields["replica_id"] = i32(replica_id)
    return build(
        request_type,
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(min_bytes),
        max_bytes=i32(50 << 20),
        isolation_level=isolation_level,
        session_id=i32(session_id),
        session_epoch=i32(session_epoch),
        topics=tuple(
            module.FetchTopic(
                **{topic_key: topic},
                partitions=tuple(
                    build(
                        module.FetchPartition,
                        partition=i32(p),
                        current_leader_epoch=i32(-1),
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=i32(1 << 20),
                    )
                    for p, offset in partitions
                ),
            )
            for topic, partitions in topics
        ),
        forgotten_topics_data=(),
        rack_id="",
        **fields,
    )


def topic_id(cluster: KafkaCluster, topic: str) -> Any:
    """The topic's id as the Kafka listener's Metadata v12 answers it."""
    return _metadata_topic(cluster, topic).topic_id


def leader_epoch(cluster: KafkaCluster, topic: str) -> int:
    """Partition 0's leader epoch as the Kafka listener's Metadata v12 answers it."""
    return int(_metadata_topic(cluster, topic).partitions[0].leader_epoch)


def _metadata_topic(cluster: KafkaCluster, topic: str) -> Any:
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    [frame] = send(kafka_address(cluster, 1), (request, 1))
    assert frame is not None
    [answer] = decode_response(frame, METADATA, 12)[1].topics
    return answer


LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, DELETE_RECORDS = 2, 23, 21


def list_offsets_request(version: int, topic: str, partitions: list[tuple[int, int]]) -> Any:
    """A kio ListOffsets request of `version` for (partition, timestamp) pairs."""
    request_type = load_request_schema(LIST_OFFSETS, version)
    module = __import__(request_type.__module__, fromlist=["ListOffsetsTopic"])
    return build(
        request_type,
        replica_id=i32(-1),
        isolation_level=0,
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topics=(
            module.ListOffsetsTopic(
                name=topic,
                partitions=tuple(
                    build(
                        module.ListOffsetsPartition,
                        partition_index=i32(p),
                        timestamp=t,
                        current_leader_epoch=i32(-1),
                    )
                    for p, t in partitions
                ),
            ),
        ),
    )
