"""The broker's front-end-neutral request paths (server/requests/) without gRPC: the
handlers a gRPC servicer and the Kafka listener both call, over a real ReplicaManager and
real partition logs. Each rule tested here lives in the handler, so a front end that only
converts gets it (issue 20: a second front end never copies a rule)."""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from broker.memory_pool import MemoryPool
from broker.partition import Partition
from broker.producer_ids import ProducerIdManager
from broker.replica_manager import ReplicaManager
from metadata.authorizer import AuthorizerSettings, StandardAcl, StandardAuthorizer
from server.metadata_answer import MetadataSources, metadata_answer
from server.request_authorization import RequestAuthorizer
from server.request_session import Session
from server.requests.delete_records import (
    DeletePartition,
    DeleteRecordsRequest,
    DeleteTopic,
    delete_records,
)
from server.requests.fetch import FetchPartition, FetchRequest, FetchTopic, fetch, release
from server.requests.leader_epochs import (
    EpochPartition,
    EpochTopic,
    OffsetsForLeaderEpochRequest,
    offsets_for_leader_epoch,
)
from server.requests.list_offsets import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST,
    LATEST_TIERED,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
    PartitionOffset,
    list_offsets,
)
from server.requests.partitions import LeaderHint
from server.requests.produce import ProducePartition, ProduceRequest, ProduceTopic, produce
from server.requests.producer_ids import InitProducerIdRequest, init_producer_id
from storage.log_manager import LogManager
from strom_api.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from strom_api.error_codes import ErrorCode
from tests.broker.test_partition import NOW, batch, elect, log_bytes, registration
from tests.broker.test_replica_manager_waits import KEY
from tests.broker.test_replica_manager_waits import leading as leading_replica
from tests.metadata.image_builder import build
from tests.server.loop_turns import others_ran

T = TypeVar("T")
ALICE = Session("User:alice", "10.0.0.7", "KAFKA")
OPEN = RequestAuthorizer()  # no authorizer configured: everything allowed


def run(manager: ReplicaManager, call: Awaitable[T]) -> T:
    async def scenario() -> T:
        try:
            return await call
        finally:
            await manager.stop()

    return asyncio.run(scenario())


def stopped(manager: ReplicaManager, answer: T) -> T:
    """A synchronous handler's answer, once the manager it used is stopped."""
    asyncio.run(manager.stop())
    return answer


def only_orders_readable() -> RequestAuthorizer:
    """alice may READ and DESCRIBE "orders" and nothing else (no WRITE, no DELETE)."""
    acls = [
        StandardAcl(
            ResourceType.TOPIC,
            "orders",
            PatternType.LITERAL,
            "User:alice",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for operation in (AclOperation.READ, AclOperation.DESCRIBE)
    ]
    authorizer = StandardAuthorizer(acls, AuthorizerSettings(frozenset(), False))
    return RequestAuthorizer(lambda: authorizer)


def leading(tmp_path: os.PathLike[str], isr: list[int]) -> tuple[ReplicaManager, Partition]:
    """Broker 1 leads orders-0 (leader epoch 1) and holds no other partition."""
    manager, partition = leading_replica(tmp_path, isr)
    manager.log_manager = LogManager([os.path.join(tmp_path, "logs")])
    return manager, partition


def following(tmp_path: os.PathLike[str]) -> tuple[ReplicaManager, Partition]:
    """Broker 1 holds orders-0 as a follower of broker 2, leader epoch 2."""
    manager, partition = leading(tmp_path, [1, 2])
    manager.image = build({KEY: registration(2, 2, isr=[1, 2], replicas=[1, 2])})
    elect([partition], leader=2, epoch=2, isr=[1, 2], replicas=[1, 2])
    return manager, partition


# --- Produce -----------------------------------------------------------------------------------


def produce_to(*partitions: tuple[int, bytes], acks: int = 1, timeout_ms: int = 1_000):
    return ProduceRequest(
        acks, timeout_ms, [ProduceTopic("orders", [ProducePartition(p, r) for p, r in partitions])]
    )


def test_produce_appends_and_answers_each_partition_in_the_request_order(tmp_path):
    manager, partition = leading(tmp_path, [1])
    [topic] = run(manager, produce(manager, OPEN, produce_to((0, batch(3)), (7, batch(1))), None))
    assert topic.name == "orders"
    [written, unknown] = topic.partitions
    assert (written.partition, written.error, written.base_offset) == (0, None, 0)
    assert written.log_start_offset == 0 and partition.log.log_end_offset == 3
    assert unknown.partition == 7 and unknown.error is not None
    assert unknown.error.error_name == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert unknown.base_offset == -1 and unknown.log_start_offset == -1


def test_produce_refuses_a_partition_named_twice_and_writes_neither_copy(tmp_path):
    manager, partition = leading(tmp_path, [1])
    request = produce_to((0, batch(2)), (0, batch(2)))
    [topic] = run(manager, produce(manager, OPEN, request, None))
    assert [p.error.error_name for p in topic.partitions if p.error] == [
        ErrorCode.INVALID_REQUEST
    ] * 2
    assert "orders-0 more than once" in str(topic.partitions[0].error)
    assert partition.log.log_end_offset == 0


def test_produce_waits_for_request_memory_at_most_its_timeout_and_writes_nothing(tmp_path):
    manager, partition = leading(tmp_path, [1])
    manager.memory = MemoryPool(1024)
    assert manager.memory.try_reserve(1024)  # queued.max.request.bytes all held
    [topic] = run(manager, produce(manager, OPEN, produce_to((0, batch(1)), timeout_ms=50), None))
    [answer] = topic.partitions
    assert answer.error is not None and answer.error.error_name == ErrorCode.REQUEST_TIMED_OUT
    assert "queued.max.request.bytes=1024" in answer.error.message
    assert partition.log.log_end_offset == 0


def test_produce_refuses_a_topic_the_principal_may_not_write(tmp_path):
    manager, partition = leading(tmp_path, [1])
    request = produce_to((0, batch(1)))
    [topic] = run(manager, produce(manager, only_orders_readable(), request, ALICE))
    [answer] = topic.partitions
    assert answer.error is not None
    assert answer.error.error_name == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert partition.log.log_end_offset == 0
    # The node's own work (no session) is never refused.
    manager, partition = leading(tmp_path / "again", [1])
    [topic] = run(manager, produce(manager, only_orders_readable(), request, None))
    assert topic.partitions[0].error is None and partition.log.log_end_offset == 1


def test_produce_refuses_acks_other_than_0_1_and_all(tmp_path):
    manager, partition = leading(tmp_path, [1])
    [topic] = run(manager, produce(manager, OPEN, produce_to((0, batch(1)), acks=2), None))
    assert topic.partitions[0].error.error_name == ErrorCode.INVALID_REQUIRED_ACKS
    assert partition.log.log_end_offset == 0


def test_produce_with_acks_0_writes_and_still_tells_the_front_end_each_outcome(tmp_path):
    """The client reads no answer; the front end needs the outcomes anyway: Kafka closes an
    acks=0 producer's connection when a partition failed (the Kafka listener does)."""
    manager, partition = leading(tmp_path, [1])
    request = produce_to((0, batch(2)), (7, batch(1)), acks=0)
    [topic] = run(manager, produce(manager, OPEN, request, None))
    [written, unknown] = topic.partitions
    assert (written.error, written.base_offset) == (None, 0)
    assert unknown.error.error_name == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert partition.log.log_end_offset == 2


def test_produce_to_a_follower_names_the_leader(tmp_path):
    manager, partition = following(tmp_path)
    [topic] = run(manager, produce(manager, OPEN, produce_to((0, batch(1))), None))
    [answer] = topic.partitions
    assert answer.error.error_name == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert answer.current_leader == LeaderHint(2, 2)


# --- Fetch -------------------------------------------------------------------------------------


def nobody_allowed() -> RequestAuthorizer:
    authorizer = StandardAuthorizer([], AuthorizerSettings(frozenset(), False))
    return RequestAuthorizer(lambda: authorizer)


def fetch_from(
    *partitions: tuple[int, int], replica_id: int = -1, max_bytes: int = 1 << 20
) -> FetchRequest:
    return FetchRequest(
        replica_id,
        0,
        1,
        max_bytes,
        [FetchTopic("orders", [FetchPartition(p, offset, 1 << 20) for p, offset in partitions])],
    )


def test_fetch_answers_the_records_and_holds_their_bytes_until_released(tmp_path):
    manager, partition = leading(tmp_path, [1])
    partition.append_as_leader(batch(3), 1, NOW)
    records = log_bytes(partition.log)

    async def scenario() -> None:
        answer = await fetch(manager, OPEN, fetch_from((0, 0)), None)
        [topic] = answer.topics
        [read] = topic.partitions
        assert read.error is None and read.records == records
        assert read.high_watermark == read.last_stable_offset == 3 and read.log_start_offset == 0
        assert answer.held_bytes == len(records) == manager.memory.in_use
        release(manager, answer)
        assert manager.memory.in_use == 0
        await manager.stop()

    asyncio.run(scenario())


def test_fetch_refuses_a_partition_named_twice_and_reads_neither_copy(tmp_path):
    manager, partition = leading(tmp_path, [1])
    partition.append_as_leader(batch(3), 1, NOW)
    answer = run(manager, fetch(manager, OPEN, fetch_from((0, 0), (0, 1)), None))
    [topic] = answer.topics
    assert [p.error.error_name for p in topic.partitions if p.error] == [
        ErrorCode.INVALID_REQUEST
    ] * 2
    assert answer.held_bytes == 0 and manager.memory.in_use == 0


def test_fetch_refuses_a_topic_the_principal_may_not_read(tmp_path):
    manager, partition = leading(tmp_path, [1])
    partition.append_as_leader(batch(3), 1, NOW)
    answer = run(manager, fetch(manager, nobody_allowed(), fetch_from((0, 0)), ALICE))
    [read] = answer.topics[0].partitions
    assert read.error.error_name == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert read.records == b"" and read.high_watermark == -1 and answer.held_bytes == 0
    assert manager.memory.in_use == 0  # not read at all


def test_fetch_from_a_follower_names_the_leader_unless_a_debugging_consumer_asks(tmp_path):
    manager, partition = following(tmp_path)
    answer = run(manager, fetch(manager, OPEN, fetch_from((0, 0)), None))
    [read] = answer.topics[0].partitions
    assert read.error.error_name == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert read.current_leader == LeaderHint(2, 2)
    manager, partition = following(tmp_path / "again")
    answer = run(manager, fetch(manager, OPEN, fetch_from((0, 0), replica_id=-2), None))
    [read] = answer.topics[0].partitions
    assert read.error is None and read.current_leader is None


# --- ListOffsets -------------------------------------------------------------------------------


def offsets_of(*partitions: tuple[int, int], epoch: int = -1) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        [ListOffsetsTopic("orders", [ListOffsetsPartition(p, t, epoch) for p, t in partitions])]
    )


def each_alone(manager: ReplicaManager, *partitions: tuple[int, int]) -> list[PartitionOffset]:
    """Each (partition, timestamp) asked in a request of its own (a request naming a
    partition twice is refused)."""

    async def asked() -> list[PartitionOffset]:
        answers = await asyncio.gather(
            *(list_offsets(manager, OPEN, offsets_of(p), None) for p in partitions)
        )
        return [topic.partitions[0] for [topic] in answers]

    return run(manager, asked())


def test_list_offsets_answers_earliest_latest_and_a_time(tmp_path):
    manager, partition = leading(tmp_path, [1])
    partition.append_as_leader(batch(2, ts=NOW), 1, NOW)
    partition.append_as_leader(batch(2, ts=NOW + 10), 1, NOW)
    earliest, latest, by_time, too_late = each_alone(
        manager, (0, EARLIEST), (0, LATEST), (0, NOW + 5), (0, NOW + 99)
    )
    assert (earliest.offset, earliest.timestamp, earliest.leader_epoch) == (0, -1, 1)
    assert (latest.offset, latest.timestamp) == (4, -1)
    assert (by_time.offset, by_time.timestamp, by_time.leader_epoch) == (2, NOW + 10, 1)
    assert (too_late.error, too_late.offset, too_late.timestamp) == (None, -1, -1)


def test_list_offsets_answers_the_tiered_storage_timestamps_as_kafka_without_remote_storage(
    tmp_path,
):
    """KIP-405's -4 (earliest local) is the log start, KIP-1005's -5 (latest tiered) -1 with
    epoch -1: UnifiedLog's answers for a topic with no remote storage (ListOffsets v8, v9)."""
    manager, partition = leading(tmp_path, [1])
    partition.append_as_leader(batch(3, ts=NOW), 1, NOW)
    partition.log.high_watermark = 3
    partition.delete_records_before(2)
    local, tiered = each_alone(manager, (0, EARLIEST_LOCAL), (0, LATEST_TIERED))
    assert (local.error, local.offset, local.timestamp, local.leader_epoch) == (None, 2, -1, 1)
    assert (tiered.error, tiered.offset, tiered.timestamp, tiered.leader_epoch) == (
        None,
        -1,
        -1,
        -1,
    )


def test_list_offsets_refuses_a_partition_named_twice_and_looks_up_neither(tmp_path):
    """Kafka's INVALID_REQUEST for each copy (ListOffsets v1+); other partitions are
    answered."""
    manager, partition = leading(tmp_path, [1])
    partition.append_as_leader(batch(2, ts=NOW), 1, NOW)
    partition.log.high_watermark = 2
    request = offsets_of((0, LATEST), (5, LATEST), (0, EARLIEST))
    [topic] = run(manager, list_offsets(manager, OPEN, request, None))
    first, other, second = topic.partitions
    for copy in (first, second):
        assert copy.error.error_name == ErrorCode.INVALID_REQUEST and copy.offset == -1
        assert "more than once" in copy.error.message
    assert other.error.error_name == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_list_offsets_refuses_a_negative_timestamp_that_names_nothing(tmp_path):
    manager, _ = leading(tmp_path, [1])
    [topic] = run(manager, list_offsets(manager, OPEN, offsets_of((0, -7)), None))
    [answer] = topic.partitions
    assert answer.error.error_name == ErrorCode.INVALID_REQUEST and answer.offset == -1


def test_list_offsets_checks_the_leader_epoch_and_the_principal(tmp_path):
    manager, _ = leading(tmp_path, [1])
    request = offsets_of((0, LATEST), epoch=0)
    [topic] = run(manager, list_offsets(manager, OPEN, request, None))
    assert topic.partitions[0].error.error_name == ErrorCode.FENCED_LEADER_EPOCH
    # the leader as the metadata has it: none here (the test's image is empty)
    assert topic.partitions[0].current_leader == LeaderHint(-1, -1)
    manager, _ = leading(tmp_path / "again", [1])
    answer = list_offsets(manager, nobody_allowed(), offsets_of((0, LATEST)), ALICE)
    [topic] = run(manager, answer)
    assert topic.partitions[0].error.error_name == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_list_offsets_on_a_follower_names_the_leader(tmp_path):
    manager, _ = following(tmp_path)
    [topic] = run(manager, list_offsets(manager, OPEN, offsets_of((0, LATEST)), None))
    assert topic.partitions[0].error.error_name == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert topic.partitions[0].current_leader == LeaderHint(2, 2)


# --- OffsetsForLeaderEpoch ---------------------------------------------------------------------


def epochs_of(*partitions: tuple[int, int], current: int = -1) -> OffsetsForLeaderEpochRequest:
    return OffsetsForLeaderEpochRequest(
        [EpochTopic("orders", [EpochPartition(p, epoch, current) for p, epoch in partitions])]
    )


def test_offsets_for_leader_epoch_answers_where_each_epoch_ends(tmp_path):
    manager, partition = leading(tmp_path, [1])
    partition.append_as_leader(batch(3), 1, NOW)
    answer = offsets_for_leader_epoch(manager, OPEN, epochs_of((0, 1), (0, 0), (3, 1)), None)
    [topic] = run(manager, answer)
    current, older, unknown = topic.partitions
    assert (current.error, current.leader_epoch, current.end_offset) == (None, 1, 3)
    # An epoch before the first ends where the first begins (Kafka's answer).
    assert (older.error, older.leader_epoch, older.end_offset) == (None, 0, 0)
    assert unknown.error.error_name == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_offsets_for_leader_epoch_checks_the_leader_epoch_and_the_principal(tmp_path):
    manager, _ = leading(tmp_path, [1])
    answer = offsets_for_leader_epoch(manager, OPEN, epochs_of((0, 1), current=5), None)
    [topic] = run(manager, answer)
    assert topic.partitions[0].error.error_name == ErrorCode.UNKNOWN_LEADER_EPOCH
    manager, _ = leading(tmp_path / "again", [1])
    answer = offsets_for_leader_epoch(manager, nobody_allowed(), epochs_of((0, 1)), ALICE)
    [topic] = run(manager, answer)
    assert topic.partitions[0].error.error_name == ErrorCode.TOPIC_AUTHORIZATION_FAILED


# --- InitProducerId ----------------------------------------------------------------------------


async def no_controller(method: str, request: object) -> None:
    raise AssertionError(f"{method} must not reach the controller")


def test_init_producer_id_needs_idempotent_write_and_refuses_a_transactional_id():
    ids = ProducerIdManager(1, lambda: 1, no_controller)
    refused = asyncio.run(init_producer_id(ids, nobody_allowed(), InitProducerIdRequest(""), ALICE))
    assert refused.error.error_name == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert (refused.producer_id, refused.producer_epoch) == (-1, -1)
    transactional = asyncio.run(init_producer_id(ids, OPEN, InitProducerIdRequest("tx"), None))
    assert transactional.error.error_name == ErrorCode.INVALID_REQUEST
    assert "Transactions are not supported" in transactional.error.message


# --- DeleteRecords -----------------------------------------------------------------------------


def deletion(*partitions: tuple[int, int]) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(
        [DeleteTopic("orders", [DeletePartition(p, offset) for p, offset in partitions])]
    )


class Checkpoints:
    """The node's offsets checkpoint writer, counting its writes; `fail` as a full disk."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.writes = 0

    async def __call__(self) -> None:
        self.writes += 1
        if self.fail:
            raise OSError(28, "No space left on device")


def test_delete_records_moves_the_log_start_and_makes_it_durable_before_answering(tmp_path):
    manager, partition = leading(tmp_path, [1])
    partition.append_as_leader(batch(3), 1, NOW)
    checkpoints = Checkpoints()
    answer = delete_records(manager, OPEN, checkpoints, deletion((0, 2), (0, 9)), None)
    [topic] = run(manager, answer)
    moved, past = topic.partitions
    assert (moved.error, moved.low_watermark) == (None, 2) and partition.log.log_start_offset == 2
    assert past.error.error_name == ErrorCode.OFFSET_OUT_OF_RANGE and past.low_watermark == -1
    assert checkpoints.writes == 1


def test_delete_records_answers_a_storage_error_when_the_log_start_is_not_durable(tmp_path):
    manager, partition = leading(tmp_path, [1])
    partition.append_as_leader(batch(3), 1, NOW)
    request = deletion((0, 1), (5, 1))
    [topic] = run(manager, delete_records(manager, OPEN, Checkpoints(fail=True), request, None))
    moved, unknown = topic.partitions
    assert moved.error.error_name == ErrorCode.KAFKA_STORAGE_ERROR
    assert "not durable" in moved.error.message
    assert unknown.error.error_name == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_records_refused_or_moving_nothing_writes_no_checkpoint(tmp_path):
    manager, partition = leading(tmp_path, [1])
    partition.append_as_leader(batch(3), 1, NOW)
    checkpoints = Checkpoints()
    answer = delete_records(manager, nobody_allowed(), checkpoints, deletion((0, 2)), ALICE)
    [topic] = run(manager, answer)
    assert topic.partitions[0].error.error_name == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert partition.log.log_start_offset == 0 and checkpoints.writes == 0


MANY = 5_000  # partitions: the fuzzer's DeleteRecords named 248,300, about 2 s of work


MANY_PARTITION_CALLS = [
    lambda m: delete_records(
        m,
        OPEN,
        Checkpoints(),
        DeleteRecordsRequest([DeleteTopic("gone", [DeletePartition(p, 1) for p in range(MANY)])]),
        None,
    ),
    lambda m: list_offsets(
        m,
        OPEN,
        ListOffsetsRequest(
            [ListOffsetsTopic("gone", [ListOffsetsPartition(p, LATEST) for p in range(MANY)])]
        ),
        None,
    ),
    lambda m: offsets_for_leader_epoch(
        m,
        OPEN,
        OffsetsForLeaderEpochRequest(
            [EpochTopic("gone", [EpochPartition(p, 1) for p in range(MANY)])]
        ),
        None,
    ),
    lambda m: produce(
        m,
        OPEN,
        ProduceRequest(
            1, 1000, [ProduceTopic("gone", [ProducePartition(p, b"") for p in range(MANY)])]
        ),
        None,
    ),
    lambda m: _topics_of(
        fetch(
            m,
            OPEN,
            FetchRequest(
                -1,
                0,
                1,
                1 << 20,
                [FetchTopic("gone", [FetchPartition(p, 0, 1 << 20) for p in range(MANY)])],
            ),
            None,
        )
    ),
]
MANY_IDS = ["DeleteRecords", "ListOffsets", "OffsetsForLeaderEpoch", "Produce", "Fetch"]


async def _topics_of(answer: Awaitable[Any]) -> list[Any]:
    return (await answer).topics


@pytest.mark.parametrize("call", MANY_PARTITION_CALLS, ids=MANY_IDS)
def test_a_request_naming_many_partitions_lets_the_loop_run_between_slices(tmp_path, call):
    """Answered in slices (server/loop_slices.py): a task waiting on the same loop runs
    before the answer is done, and every partition is answered."""
    manager, _ = leading(tmp_path, [1])
    answer, turns = run(manager, others_ran(call(manager)))
    assert turns >= 4, "the loop ran nothing else meanwhile"
    [topic] = answer
    assert len(topic.partitions) == MANY
    assert {p.error.error_name for p in topic.partitions} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


@pytest.mark.parametrize("call", MANY_PARTITION_CALLS, ids=MANY_IDS)
def test_refusals_of_many_partitions_leave_no_garbage_cycles(tmp_path, call):
    """Each partition refused (UNKNOWN_TOPIC_OR_PARTITION) is answered with its error kept
    without a traceback (metadata.errors.kept): with it, each left 10-12 objects in
    cycles, and their collections took two thirds of a 100,000-partition request."""
    manager, _ = leading(tmp_path, [1])
    gc.collect()
    gc.disable()
    try:
        [topic] = run(manager, call(manager))
        del topic
        garbage = gc.collect()
    finally:
        gc.enable()
    assert garbage < MANY, f"{garbage} objects in cycles after {MANY} refused partitions"


def test_a_metadata_answer_naming_many_topics_lets_the_loop_run_between_slices(tmp_path):
    """Every topic of a large cluster, or 100,000 names, answered in slices: Metadata is
    the request every client repeats."""
    manager, _ = leading(tmp_path, [1])
    sources = MetadataSources("cluster", lambda: 1, OPEN, None, False)
    names = [f"t{i}" for i in range(MANY)]
    work = metadata_answer(manager.image, names, False, "PLAINTEXT", sources)
    answer, turns = run(manager, others_ran(work))
    assert turns >= 4, "the loop ran nothing else meanwhile"
    assert len(answer.topics) == MANY
    assert {t.error.error_name for t in answer.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_a_metadata_request_naming_a_topic_many_times_is_answered_once_for_it(tmp_path):
    """As Kafka's KafkaApis takes the names as a set: one topic named 112,500 times (the
    Kafka-protocol fuzzer) made an answer of 112,500 copies that held the loop seconds."""
    manager, _ = leading(tmp_path, [1])
    sources = MetadataSources("cluster", lambda: 1, OPEN, None, False)
    names = ["b", "a", "b", *["a"] * 1000]
    answer, _ = run(manager, others_ran(metadata_answer(manager.image, names, False, "P", sources)))
    assert [t.name for t in answer.topics] == ["b", "a"]
