"""The leader's side of one follower fetch, read once (Kafka's ReplicaManager.readFromLog for
a follower): each partition the fetch names read from its replica within the request's byte
budget (KIP-74: the first batch may pass it), records of a throttled replica left out while
the leader's replication quota is exceeded (Kafka's shouldLeaderThrottle), the ISR looked at
after each read; then what the purgatory needs of the read (`read_summary`) and the answer
as the follower's core takes it (`fetch_response`). ReplicaManager runs it for every read of
a follower fetch, on its event loop; tests/replication_sim's leaders run the same functions
(docs/architecture.md §6, §8).

It reads the replicas' files (Partition.read_for_follower) and keeps no state of its own."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from broker.follower_fetch import FetchRequest, FetchResponse, PartitionAnswer, PartitionFetch
from broker.partition import FollowerRead, Partition
from broker.purgatory import FetchReadSummary
from broker.replication_quota import ReplicationQuota
from broker.request_checks import named_twice
from metadata.errors import ApiError, kept
from strom_api.error_codes import ErrorCode

# One partition of a follower fetch served: the request's partition, the replica (None when
# this broker holds none), and what was read or why not.
FollowerAnswer = tuple[PartitionFetch, Partition | None, FollowerRead | ApiError]


def read_follower_fetch(
    request: FetchRequest,
    replica_of: Callable[[bytes, int], Partition | None],
    budget: int,
    quota: ReplicationQuota,
    now_ms: int,
    broker_id: int,
    after_read: Callable[[Partition], None],
) -> tuple[list[FollowerAnswer], bool]:
    """Each partition's answer, and whether a partition's records were held back by the
    leader's replication quota (a throttled replica not in the ISR while the quota is
    exceeded). `budget`: the bytes the whole answer may carry; `replica_of(topic_id,
    partition)`: this broker's replica; `after_read`: called with each partition read (the
    ISR check). The bytes of throttled partitions are recorded against the quota as they are
    read."""
    answers: list[FollowerAnswer] = []
    held_back = False
    twice = named_twice((item.topic_id, item.partition) for item in request.partitions)
    for item in request.partitions:
        if (item.topic_id, item.partition) in twice:
            message = f"The fetch names partition {item.partition} of a topic twice."
            answers.append((item, None, ApiError(ErrorCode.INVALID_REQUEST, message)))
            continue
        partition = replica_of(item.topic_id, item.partition)
        if partition is None:
            message = (
                f"Broker {broker_id} holds no replica of partition {item.partition} of that "
                "topic id."
            )
            answers.append((item, None, ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message)))
            continue
        throttle = quota.should_throttle(
            partition.topic, partition.index, request.replica_id in partition.isr
        )
        held_back = held_back or throttle
        try:
            answer = partition.read_for_follower(
                request.replica_id,
                item.fetch_offset,
                item.last_fetched_epoch,
                item.current_leader_epoch,
                max(min(item.partition_max_bytes, budget), 0),
                now_ms,
                throttled=throttle,
            )
        except ApiError as exc:
            answers.append((item, partition, kept(exc)))
            continue
        if answer.records and quota.is_throttled(partition.topic, partition.index):
            quota.record(len(answer.records))
        budget -= len(answer.records)
        answers.append((item, partition, answer))
        after_read(partition)
    return answers, held_back


def read_summary(
    answers: list[FollowerAnswer], quota: ReplicationQuota, held_back: bool
) -> FetchReadSummary:
    """What the purgatory needs of a read: its bytes, whether a partition erred or diverged
    (the follower must hear of it now), the partitions to wait on (those this broker holds),
    and, when the quota held records back, how long until it may let them go."""
    total = 0
    stopped = False
    for _, _, answer in answers:
        if isinstance(answer, ApiError) or answer.diverging is not None:
            stopped = True
        else:
            total += len(answer.records)
    keys = tuple((p.topic, p.index) for _, p, _ in answers if p is not None)
    delay_ms = math.ceil(quota.delay_s() * 1000) if held_back else None
    return FetchReadSummary(total, stopped, keys, delay_ms)


def fetch_response(answers: list[FollowerAnswer]) -> FetchResponse:
    """The answer as the follower's core takes it (broker/replica_wire.py carries it over
    gRPC). A partition's offsets are filled on errors too: after OFFSET_OUT_OF_RANGE the
    follower needs them."""
    out: list[PartitionAnswer] = []
    for item, partition, answer in answers:
        if isinstance(answer, ApiError):
            if partition is None:
                error = PartitionAnswer(item.topic_id, item.partition, answer.error_name)
            else:
                log = partition.log
                error = PartitionAnswer(
                    item.topic_id,
                    item.partition,
                    answer.error_name,
                    high_watermark=log.high_watermark,
                    log_start_offset=log.log_start_offset,
                    log_end_offset=log.log_end_offset,
                )
            out.append(dataclasses.replace(error, message=answer.message))
            continue
        out.append(
            PartitionAnswer(
                item.topic_id,
                item.partition,
                records=answer.records,
                high_watermark=answer.high_watermark,
                log_start_offset=answer.log_start_offset,
                log_end_offset=answer.log_end_offset,
                diverging=answer.diverging,
            )
        )
    return FetchResponse(tuple(out))
