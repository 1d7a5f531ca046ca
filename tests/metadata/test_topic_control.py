"""CreateTopics, DeleteTopics and CreatePartitions: the records they return replay to what
was asked, and every refusal is Kafka's error with a sentence."""

from __future__ import annotations

import itertools

import pytest

from metadata.delta import MetadataDelta
from metadata.errors import ApiError
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.topic_configs import validate_topic_configs
from metadata.topic_control import (
    NewTopic,
    PartitionLimits,
    TopicDefaults,
    create_partitions,
    create_topics,
    delete_topics,
)
from strom_api.v1 import metadata_pb2 as pb


def cluster(brokers: dict[int, str], fenced=(), shutting_down=()) -> MetadataImage:
    records = []
    for broker_id, rack in brokers.items():
        records.append(
            pb.RegisterBrokerRecord(
                broker_id=broker_id, broker_epoch=broker_id, rack=rack, fenced=True
            )
        )
        if broker_id not in fenced:
            records.append(pb.UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=broker_id))
        if broker_id in shutting_down:
            records.append(
                pb.BrokerRegistrationChangeRecord(
                    broker_id=broker_id, broker_epoch=broker_id, in_controlled_shutdown=True
                )
            )
    return MetadataDelta(EMPTY_IMAGE).replay_all(records).apply(len(records), 1)


def commit(image: MetadataImage, records) -> MetadataImage:
    return MetadataDelta(image).replay_all(records).apply(image.offset + len(records), 1)


IDS = (bytes([i]) * 16 for i in itertools.count(1))


def ids():
    return next(IDS)


THREE = cluster({1: "", 2: "", 3: ""})


def test_create_places_partitions_and_writes_configs():
    records, results = create_topics(
        THREE,
        [NewTopic("orders", 6, 3, configs={"retention.ms": "1000"})],
        start=1,
        topic_id_factory=ids,
    )
    (result,) = results
    assert result.error is None and (result.num_partitions, result.replication_factor) == (6, 3)
    image = commit(THREE, records)
    topic = image.topics.by_name["orders"]
    assert topic.topic_id == result.topic_id and len(topic.partitions) == 6
    p0 = topic.partitions[0]
    assert p0.replicas == (2, 3, 1) and p0.isr == p0.replicas and p0.leader == 2
    assert image.configs.of(pb.TOPIC, "orders") == {"retention.ms": "1000"}


def test_defaults_apply_when_not_given():
    records, [result] = create_topics(THREE, [NewTopic("t")], defaults=TopicDefaults(3, 2))
    assert (result.num_partitions, result.replication_factor) == (3, 2)


def test_fenced_and_shutting_down_brokers_take_no_new_replicas():
    image = cluster({1: "", 2: "", 3: ""}, fenced=(2,), shutting_down=(3,))
    _, [result] = create_topics(image, [NewTopic("t", 1, 2)])
    assert result.error is not None and result.error.error_name == "INVALID_REPLICATION_FACTOR"
    records, [result] = create_topics(image, [NewTopic("t", 3, 1)])
    assert result.error is None
    assert {r.replicas[0] for r in records if isinstance(r, pb.PartitionRecord)} == {1}


def test_an_explicit_assignment_is_used_as_given():
    records, [result] = create_topics(
        THREE, [NewTopic("t", assignments={0: [3, 1], 1: [1, 2]})], topic_id_factory=ids
    )
    assert result.error is None and (result.num_partitions, result.replication_factor) == (2, 2)
    image = commit(THREE, records)
    assert image.topics.partition("t", 0).replicas == (3, 1)
    assert image.topics.partition("t", 0).leader == 3


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (NewTopic("bad name!", 1, 1), "INVALID_TOPIC_EXCEPTION"),
        (NewTopic("..", 1, 1), "INVALID_TOPIC_EXCEPTION"),
        (NewTopic("x" * 250, 1, 1), "INVALID_TOPIC_EXCEPTION"),
        (NewTopic("exist_ing", 1, 1), "TOPIC_ALREADY_EXISTS"),
        (NewTopic("exist.ing", 1, 1), "INVALID_TOPIC_EXCEPTION"),  # collides with exist_ing
        (NewTopic("t", 0, 1), "INVALID_PARTITIONS"),
        (NewTopic("t", 1, 4), "INVALID_REPLICATION_FACTOR"),
        (NewTopic("t", 1, 0), "INVALID_REPLICATION_FACTOR"),
        (NewTopic("t", 2, assignments={0: [1]}), "INVALID_REQUEST"),
        (NewTopic("t", assignments={0: [1], 2: [2]}), "INVALID_REPLICA_ASSIGNMENT"),
        (NewTopic("t", assignments={0: [1, 1]}), "INVALID_REPLICA_ASSIGNMENT"),
        (NewTopic("t", assignments={0: [9]}), "INVALID_REPLICA_ASSIGNMENT"),
        (NewTopic("t", assignments={0: [1], 1: [1, 2]}), "INVALID_REPLICA_ASSIGNMENT"),
        (NewTopic("t", assignments={0: []}), "INVALID_REPLICA_ASSIGNMENT"),
        (NewTopic("t", 1, 1, configs={"retention.ms": "soon"}), "INVALID_CONFIG"),
        (NewTopic("t", 1, 1, configs={"no.such.config": "1"}), "INVALID_CONFIG"),
        (NewTopic("t", 1, 1, configs={"min.insync.replicas": "0"}), "INVALID_CONFIG"),
    ],
)
def test_refusals_are_kafkas_errors_and_write_nothing(topic, error):
    records, _ = create_topics(THREE, [NewTopic("exist_ing", 1, 1)])
    image = commit(THREE, records)
    records, [result] = create_topics(image, [topic])
    assert records == []
    assert result.error is not None and result.error.error_name == error, result.error
    assert result.error.message


def test_one_bad_topic_does_not_stop_the_others():
    records, results = create_topics(
        THREE, [NewTopic("a", 1, 1), NewTopic("b", 1, 9), NewTopic("a", 2, 1), NewTopic("c")]
    )
    assert [r.error.error_name if r.error else None for r in results] == [
        "INVALID_REQUEST",
        "INVALID_REPLICATION_FACTOR",
        "INVALID_REQUEST",
        None,
    ]
    image = commit(THREE, records)
    assert sorted(image.topics.by_name) == ["c"]


def test_topics_in_one_request_may_not_collide_with_each_other():
    _, results = create_topics(THREE, [NewTopic("a.b", 1, 1), NewTopic("a_b", 1, 1)])
    assert results[0].error is None
    assert results[1].error is not None
    assert results[1].error.error_name == "INVALID_TOPIC_EXCEPTION"


def test_delete_topics():
    records, _ = create_topics(THREE, [NewTopic("a", 1, 1, configs={"retention.ms": "5"})])
    image = commit(THREE, records)
    records, results = delete_topics(image, ["a", "nope"])
    assert results["a"] is None and results["nope"].error_name == "UNKNOWN_TOPIC_OR_PARTITION"
    image = commit(image, records)
    assert image.topics.by_name == {} and image.configs.of(pb.TOPIC, "a") == {}


def test_create_partitions_grows_with_the_topics_replication_factor():
    records, _ = create_topics(THREE, [NewTopic("a", 2, 2)])
    image = commit(THREE, records)
    image = commit(image, create_partitions(image, "a", 5, start=1))
    topic = image.topics.by_name["a"]
    assert sorted(topic.partitions) == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in topic.partitions.values())
    image = commit(image, create_partitions(image, "a", 6, [[3, 1]]))
    assert image.topics.partition("a", 5).replicas == (3, 1)


@pytest.mark.parametrize(
    ("name", "count", "assignments", "error"),
    [
        ("nope", 3, None, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("a", 1, None, "INVALID_PARTITIONS"),
        ("a", 2, None, "INVALID_PARTITIONS"),
        ("a", 4, [[1, 2]], "INVALID_REPLICA_ASSIGNMENT"),
        ("a", 3, [[1]], "INVALID_REPLICA_ASSIGNMENT"),
    ],
)
def test_create_partitions_refusals(name, count, assignments, error):
    records, _ = create_topics(THREE, [NewTopic("a", 2, 2)])
    image = commit(THREE, records)
    with pytest.raises(ApiError) as caught:
        create_partitions(image, name, count, assignments)
    assert caught.value.error_name == error


def test_the_replication_throttle_configs_take_kafkas_formats():
    validate_topic_configs({"leader.replication.throttled.replicas": "0:1,1:2"})
    validate_topic_configs({"follower.replication.throttled.replicas": "*"})
    with pytest.raises(ApiError, match="leader.replication.throttled.replicas"):
        validate_topic_configs({"leader.replication.throttled.replicas": "0-1"})


def test_topic_config_values_are_checked_with_their_names():
    validate_topic_configs({"cleanup.policy": "compact", "unclean.leader.election.enable": "true"})
    with pytest.raises(ApiError, match="compression.type"):
        validate_topic_configs({"compression.type": "brotli"})


def test_more_than_10000_partitions_in_one_request_is_refused_before_placement():
    """CreateTopics(num_partitions=10^9) once built the whole assignment on the controller's
    event loop until it died; Kafka refuses over 10,000 per request, every topic of it."""
    topics = [NewTopic("huge", 10**9, 1), NewTopic("small", 1, 1)]
    records, results = create_topics(THREE, topics)
    assert records == []
    assert [r.error.error_name for r in results] == ["POLICY_VIOLATION", "POLICY_VIOLATION"]
    assert "Excessively large number of partitions" in str(results[0].error)
    split = [NewTopic("a", 6000, 1), NewTopic("b", 4001, 1)]
    assert all(r.error is not None for r in create_topics(THREE, split)[1])
    assert all(r.error is None for r in create_topics(THREE, split[:1])[1])
    image = commit(THREE, create_topics(THREE, [NewTopic("a", 1, 1)])[0])
    with pytest.raises(ApiError) as caught:
        create_partitions(image, "a", 10**9)
    assert caught.value.error_name == "POLICY_VIOLATION"


def test_max_partitions_and_max_broker_partitions_bound_the_cluster():
    limits = PartitionLimits(max_partitions=10, max_broker_partitions=7)
    records, results = create_topics(THREE, [NewTopic("a", 6, 1)], limits=limits)
    assert results[0].error is None
    image = commit(THREE, records)
    # 6 + 5 partitions > max.partitions=10; the topic before it in the request counts too.
    records, results = create_topics(
        image, [NewTopic("b", 3, 1), NewTopic("c", 2, 1)], limits=limits
    )
    assert results[0].error is None
    assert results[1].error.error_name == "POLICY_VIOLATION"
    assert "max.partitions=10" in str(results[1].error)
    # 3 brokers x 7 replicas: RF 3 with 6 partitions puts 6 on each broker, +2 passes 7.
    image = commit(THREE, create_topics(THREE, [NewTopic("r", 6, 3)], limits=PartitionLimits())[0])
    records, results = create_topics(image, [NewTopic("s", 2, 3)], limits=limits)
    assert "max.broker.partitions=7" in str(results[0].error)
    with pytest.raises(ApiError) as caught:
        create_partitions(image, "r", 8, limits=limits)
    assert caught.value.error_name == "POLICY_VIOLATION"
    assert create_partitions(image, "r", 7, limits=limits)
