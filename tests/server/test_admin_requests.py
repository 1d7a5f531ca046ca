"""The broker-local admin paths (server/requests/log_dirs.py, producers.py) without a front
end: each rule is in the handler, so the Kafka listener, which only converts, gets it."""

from __future__ import annotations

import dataclasses

from kio.index import load_request_schema
from kio.static.primitive import i32

from server.kafka.apis import DESCRIBE_LOG_DIRS, DESCRIBE_PRODUCERS, SERVED
from server.kafka.broker_admin import BrokerAdmin
from server.kafka.frames import Request
from server.requests.log_dirs import describe_log_dirs
from server.requests.producers import describe_producers
from strom_api.error_codes import ErrorCode
from tests.server.loop_turns import others_ran, others_ran_as
from tests.server.test_client_requests import (
    ALICE,
    OPEN,
    following,
    leading,
    nobody_allowed,
    only_orders_readable,
    run,
)
from tests.server.test_kafka_group_apis import _element, sample


def test_describe_log_dirs_needs_describe_on_the_cluster(tmp_path):
    manager, _ = leading(tmp_path, [1])
    refusal, dirs = run(manager, describe_log_dirs(manager, nobody_allowed(), None, ALICE))
    assert refusal is not None and refusal.error_name == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert dirs == []


def test_describe_log_dirs_lists_each_directory_with_its_volume(tmp_path):
    manager, _ = leading(tmp_path, [1])
    (tmp_path / "logs").mkdir(exist_ok=True)
    refusal, dirs = run(manager, describe_log_dirs(manager, OPEN, None, ALICE))
    assert refusal is None
    (log_dir,) = dirs
    assert log_dir.log_dir == str(tmp_path / "logs") and log_dir.error is None
    assert log_dir.total_bytes >= log_dir.usable_bytes > 0


def test_describe_producers_needs_read_and_the_leader(tmp_path):
    manager, _ = leading(tmp_path, [1])
    answers = run(
        manager,
        describe_producers(
            manager, only_orders_readable(), [("orders", [0, 5]), ("payments", [0])], ALICE
        ),
    )
    (orders, (led, missing)), (payments, (refused,)) = [(n, tuple(p)) for n, p in answers]
    assert (orders, led.error, led.producers) == ("orders", None, [])
    assert missing.error is not None
    assert missing.error.error_name == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert refused.error is not None
    assert refused.error.error_name == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_describe_producers_on_a_follower_is_not_leader(tmp_path):
    manager, _ = following(tmp_path)
    ((_, (answer,)),) = run(manager, describe_producers(manager, OPEN, [("orders", [0])], ALICE))
    assert answer.error is not None
    assert answer.error.error_name == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_describe_producers_of_many_partitions_lets_the_loop_run_between_slices(tmp_path):
    """A 900 KB DescribeProducers named 69,230 partitions and held the loop 2 s (the
    Kafka-protocol fuzzer, seed 3 case 821)."""
    manager, _ = leading(tmp_path, [1])
    topics = [(f"t{i}", [0, 1]) for i in range(5_000)]
    answers, turns = run(manager, others_ran(describe_producers(manager, OPEN, topics, ALICE)))
    assert turns >= 4, "the loop ran nothing else meanwhile"
    assert len(answers) == 5_000 and all(len(partitions) == 2 for _, partitions in answers)


def test_describe_producers_of_one_topic_of_many_partitions_runs_in_slices_of_partitions(
    tmp_path,
):
    """The Kafka-protocol fuzzer's seed 15, case 39: one topic of 112,500 partitions held the
    loop 1.5 s while slices were of topics. Each refusal is kept without its traceback,
    whose frames would hold it again in a cycle for the collector (full collections of
    300 ms among them)."""
    manager, _ = leading(tmp_path, [1])
    topics = [("unknown", list(range(5_000)))]
    answers, turns = run(manager, others_ran(describe_producers(manager, OPEN, topics, ALICE)))
    assert turns >= 4, "the loop ran nothing else meanwhile"
    ((_, partitions),) = answers
    assert len(partitions) == 5_000
    assert all(p.error is not None and p.error.__traceback__ is None for p in partitions)


def _one_topic_of_many_partitions(key: int, **name: str) -> Request:
    """A Kafka request of API `key` naming one topic (its name field and value in `name`)
    with 5,000 partitions, in the last field of the topic: DescribeProducers'
    partition_indexes, DescribeLogDirs' partitions."""
    version = SERVED[key].max_version
    body_type = load_request_schema(key, version)
    topic_type = _element(body_type, "topics")
    partitions_field = dataclasses.fields(topic_type)[-1].name
    topic = dataclasses.replace(
        sample(topic_type), **name, **{partitions_field: tuple(i32(i) for i in range(5_000))}
    )
    body = dataclasses.replace(sample(body_type), topics=(topic,))
    return Request(key, version, 7, "c", body)


def test_the_kafka_listeners_describe_producers_converts_in_slices_of_partitions(tmp_path):
    """The listener's side of the same request: reading its partition indexes and building
    their answers are per-partition work too."""
    manager, _ = leading(tmp_path, [1])
    request = _one_topic_of_many_partitions(DESCRIBE_PRODUCERS, name="unknown")
    admin = BrokerAdmin(lambda: manager, OPEN)

    response, turns = run(manager, others_ran_as(ALICE, admin.describe_producers(request)))
    # Three passes over the partitions (the request's, the answers', the response's), each
    # in slices: more turns than the one pass of describe_producers alone.
    assert turns >= 12, "the loop ran nothing else meanwhile"
    (answered,) = response.topics
    assert len(answered.partitions) == 5_000


def test_the_kafka_listeners_describe_log_dirs_of_many_partitions_runs_in_slices(tmp_path):
    """The partitions a DescribeLogDirs names (250,000 fit in 1 MB) are read and matched
    against the replicas held in loop slices (this log directory holds none)."""
    manager, _ = leading(tmp_path, [1])
    (tmp_path / "logs").mkdir(exist_ok=True)
    request = _one_topic_of_many_partitions(DESCRIBE_LOG_DIRS, topic="orders")
    admin = BrokerAdmin(lambda: manager, OPEN)

    response, turns = run(manager, others_ran_as(ALICE, admin.describe_log_dirs(request)))
    assert turns >= 8, "the loop ran nothing else meanwhile"
    (result,) = response.results
    assert result.log_dir == str(tmp_path / "logs") and result.topics == ()
