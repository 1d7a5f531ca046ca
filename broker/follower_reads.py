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

# The purgatory key of "a replica appeared on this broker": no topic (names have at least one
# character) and no session (ids start at 1, broker/replica_sessions.session_wait_key).
# ReplicaManager wakes it for every Partition it creates.
NEW_REPLICA_KEY = ("", 0)

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


def follower_ahead(item: PartitionFetch, partition: Partition | None, error: ApiError) -> bool:
    """The follower's metadata is ahead of this broker's for the partition: it names a
    replica this broker does not hold yet (a topic just created, a replica just moved here),
    or a leader epoch newer than the one this broker knows (a leader just elected). The
    follower would rest the partition for replica.fetch.backoff.ms on the error; this
    broker's metadata usually catches up within milliseconds, so the fetch waits for it
    instead (up to its max_wait_ms: the error is the answer after that). Without this, the
    first acks=all produce to a new topic waited a second for its followers."""
    if partition is None:
        return error.error_name == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if error.error_name in (ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
        return item.current_leader_epoch > partition.leader_epoch
    return False


def read_summary(
    answers: list[FollowerAnswer], quota: ReplicationQuota, held_back: bool
) -> FetchReadSummary:
    """What the purgatory needs of a read: its bytes, whether a partition erred or diverged
    (the follower must hear of it now; not for an error `follower_ahead`), the keys to wait
    on (the partitions this broker holds, NEW_REPLICA_KEY when one named is not held yet),
    and, when the quota held records back, how long until it may let them go."""
    total = 0
    stopped = False
    awaits_replica = False
    for item, partition, answer in answers:
        if isinstance(answer, ApiError):
            if follower_ahead(item, partition, answer):
                awaits_replica = awaits_replica or partition is None
            else:
                stopped = True
        elif answer.diverging is not None:
            stopped = True
        else:
            total += len(answer.records)
    keys = tuple((p.topic, p.index) for _, p, _ in answers if p is not None)
    if awaits_replica:
        keys += (NEW_REPLICA_KEY,)
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
