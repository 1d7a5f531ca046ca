"""Metadata (key 3, v0-v13) on the Kafka listener: the request converted, the answer of
server/metadata_answer.py (the one the gRPC ClientService gives), converted back in the
request's version.

Kafka's fields from Strom's answer: brokers with their endpoint for this listener, the
cluster id, the controller id (a KRaft broker names an alive broker, where admin clients
send controller requests that brokers forward; here this broker's choice among the
brokers listed, as Kafka's random alive broker), per topic its error, name, topic id
(v10+), is_internal and partitions (leader, leader epoch from v7, replicas, ISR, offline
replicas). A topic asked for by id (v10+, name null) is looked up in the image; an id no
topic has is UNKNOWN_TOPIC_ID. Authorized operations are not computed: left at Kafka's
"not requested" value (-2147483648), as are the unrequested ones.
"""

from __future__ import annotations

import datetime
import random
import uuid
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.constants import uuid_zero
from kio.static.primitive import i32

from broker.loop_slices import LoopSlices
from metadata.errors import ApiError
from metadata.image import MetadataImage
from server.kafka.apis import METADATA
from server.kafka.error_codes import kafka_error_code
from server.kafka.versioned import build, nested
from server.metadata_answer import MetadataAnswer, TopicAnswer

# Metadata names topics by id from v12 (KIP-516); v10-11 carry the field, Kafka refuses it.
TOPIC_IDS_VERSION = 12


def requested_names(image: MetadataImage, request: Any) -> tuple[list[str] | None, list[Any]]:
    """The topic names asked for (None: every topic), and the ids of the topics named by an
    id that no topic has (v12+) or by no name at all (v10-11 take no ids). In v0 an empty
    list asks for every topic; from v1 null does, and an empty list for none."""
    if request.topics is None or (request.__version__ == 0 and not request.topics):
        return None, []
    names: list[str] = []
    unknown_ids = []
    by_id = request.__version__ >= TOPIC_IDS_VERSION
    for topic in request.topics:
        if topic.name is not None:
            names.append(str(topic.name))
            continue
        found = image.topics.by_id.get(topic.topic_id.bytes) if by_id and topic.topic_id else None
        if found is None:
            unknown_ids.append(topic.topic_id)
        else:
            names.append(found.name)
    return names, unknown_ids


def controller_id(answer: MetadataAnswer) -> int:
    """A KRaft broker's MetadataResponse names a random alive broker as the controller."""
    return random.choice(answer.brokers).node_id if answer.brokers else -1


async def metadata_response(version: int, answer: MetadataAnswer, unknown_ids: list[Any]) -> Any:
    response_type = load_response_schema(METADATA, version)
    broker_type = nested(response_type, "MetadataResponseBroker")
    topic_type = nested(response_type, "MetadataResponseTopic")
    partition_type = nested(response_type, "MetadataResponsePartition")
    topics = []
    slices = LoopSlices()
    for t in answer.topics:
        topics.append(_topic(topic_type, partition_type, t))
        await slices.step(1 + len(t.partitions))
    # Named by id: from v12 an id no topic has; in v10-11, whose answers cannot carry a null
    # name, Kafka's KafkaApis refuses a null name (INVALID_REQUEST: "Topic name can not be
    # null for version N"), answered here on that topic under an empty name.
    by_id = version >= TOPIC_IDS_VERSION
    topics += [
        build(
            topic_type,
            error_code=KafkaErrorCode.unknown_topic_id if by_id else KafkaErrorCode.invalid_request,
            name=None if by_id else "",
            topic_id=topic_id,
            partitions=(),
        )
        for topic_id in unknown_ids
    ]
    return build(
        response_type,
        throttle_time=datetime.timedelta(0),
        brokers=tuple(
            build(broker_type, node_id=i32(b.node_id), host=b.host, port=i32(b.port), rack=b.rack)
            for b in answer.brokers
        ),
        cluster_id=answer.cluster_id,
        controller_id=i32(controller_id(answer)),
        topics=tuple(topics),
        error_code=KafkaErrorCode.none,
    )


def _code(error: ApiError | None) -> KafkaErrorCode:
    return kafka_error_code(None if error is None else error.error_name)


def _topic(topic_type: type[Any], partition_type: type[Any], topic: TopicAnswer) -> Any:
    return build(
        topic_type,
        error_code=_code(topic.error),
        name=topic.name,
        topic_id=uuid.UUID(bytes=topic.topic_id) if topic.topic_id else uuid_zero,
        is_internal=topic.is_internal,
        partitions=tuple(
            build(
                partition_type,
                error_code=_code(p.error),
                partition_index=i32(p.partition),
                leader_id=i32(p.leader_id),
                leader_epoch=i32(p.leader_epoch),
                replica_nodes=tuple(i32(r) for r in p.replicas),
                isr_nodes=tuple(i32(r) for r in p.isr),
                offline_replicas=tuple(i32(r) for r in p.offline_replicas),
            )
            for p in topic.partitions
        ),
    )
