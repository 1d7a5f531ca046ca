"""The Kafka listener's cluster admin APIs (server/kafka/cluster_admin.py) on a dispatcher
without a cluster: what they answer without asking the controller."""

from __future__ import annotations

import asyncio
import dataclasses

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from server.kafka.apis import DESCRIBE_QUORUM, SERVED
from server.kafka.frames import Request
from server.request_session import enter, leave
from tests.server.group_paths import no_groups
from tests.server.loop_turns import others_ran
from tests.server.test_kafka_group_apis import ALICE, MANY, _element, dispatcher, sample


def test_describe_quorum_of_partitions_other_than_the_metadata_log_is_answered_in_slices():
    """Every partition but __cluster_metadata-0 asked alone is UNKNOWN_TOPIC_OR_PARTITION, as
    Kafka's KafkaRaftClient answers; a request of 180,000 partitions held the loop 1 s (the
    Kafka-protocol fuzzer, seed 8 case 303)."""
    version = SERVED[DESCRIBE_QUORUM].max_version
    body_type = load_request_schema(DESCRIBE_QUORUM, version)
    topic_type = _element(body_type, "topics")
    partition = sample(_element(topic_type, "partitions"))
    partitions = tuple(dataclasses.replace(partition, partition_index=i32(i)) for i in range(MANY))
    topic = dataclasses.replace(sample(topic_type), topic_name="t", partitions=partitions)
    request = Request(DESCRIBE_QUORUM, version, 7, "client", sample(body_type))
    request = dataclasses.replace(request, body=dataclasses.replace(request.body, topics=(topic,)))
    apis = dispatcher(no_groups())
    token = enter(ALICE)
    try:
        response, turns = asyncio.run(others_ran(apis.handle(request)))
    finally:
        leave(token)
    assert turns >= 4, "the loop ran nothing else meanwhile"
    [answered] = response.topics
    assert len(answered.partitions) == MANY
    assert {p.error_code for p in answered.partitions} == {ErrorCode.unknown_topic_or_partition}
