"""The broker-local admin paths (server/requests/log_dirs.py, producers.py) without a front
end: each rule is in the handler, so the Kafka listener, which only converts, gets it."""

from __future__ import annotations

from server.requests.log_dirs import describe_log_dirs
from server.requests.producers import describe_producers
from strom_api.error_codes import ErrorCode
from tests.server.loop_turns import others_ran
from tests.server.test_client_requests import (
    ALICE,
    OPEN,
    following,
    leading,
    nobody_allowed,
    only_orders_readable,
    run,
    stopped,
)


def test_describe_log_dirs_needs_describe_on_the_cluster(tmp_path):
    manager, _ = leading(tmp_path, [1])
    refusal, dirs = stopped(manager, describe_log_dirs(manager, nobody_allowed(), None, ALICE))
    assert refusal is not None and refusal.error_name == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert dirs == []


def test_describe_log_dirs_lists_each_directory_with_its_volume(tmp_path):
    manager, _ = leading(tmp_path, [1])
    (tmp_path / "logs").mkdir(exist_ok=True)
    refusal, dirs = stopped(manager, describe_log_dirs(manager, OPEN, None, ALICE))
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
