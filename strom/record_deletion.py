"""Kafka's Admin.deleteRecords: the records below an offset deleted from each partition, asked
of each partition's leader (DeleteRecords), which moves the partition's log start offset
(its low watermark) there once every in-sync replica has it. An offset of -1 deletes up to
the high watermark, as in Kafka's RecordsToDelete."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from strom.cluster import Cluster
from strom.errors import StromError, from_pb
from strom.fetcher import TopicPartition
from strom_api.error_codes import ErrorCode
from strom_api.v1 import client_pb2

HIGH_WATERMARK = -1  # RecordsToDelete.beforeOffset(-1): everything below the high watermark


@dataclass(frozen=True)
class DeletedRecords:
    """A partition's outcome: its new low watermark, or the error that kept its records
    (`low_watermark` is then -1)."""

    low_watermark: int
    error: StromError | None = None


async def delete_records(
    cluster: Cluster, offsets: Mapping[TopicPartition, int], timeout_s: float
) -> dict[TopicPartition, DeletedRecords]:
    """Each partition's outcome. A leader that moved or is not known yet is asked again
    (the metadata refreshed) until `timeout_s`; a partition that does not exist is
    UNKNOWN_TOPIC_OR_PARTITION at once."""
    out: dict[TopicPartition, DeletedRecords] = {}
    last: dict[TopicPartition, DeletedRecords] = {}  # the latest retriable refusal
    todo = dict(offsets)
    deadline = time.monotonic() + timeout_s
    while todo:
        await cluster.refresh({tp.topic for tp in todo})
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in todo:
            if _does_not_exist(cluster, tp):
                out[tp] = _failed(
                    StromError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "This server does not host this topic-partition: "
                        f"{tp.topic}-{tp.partition}.",
                    )
                )
                continue
            by_leader.setdefault(cluster.leader(*tp), []).append(tp)
        for tp in out:
            todo.pop(tp, None)
        answers = await asyncio.gather(
            *(
                _ask(cluster, leader, {tp: todo[tp] for tp in tps}, deadline)
                for leader, tps in by_leader.items()
                if leader >= 0
            )
        )
        for answer in answers:
            for tp, result in answer.items():
                if result.error is None or not result.error.retriable:
                    out[tp] = result
                    todo.pop(tp, None)
                else:
                    last[tp] = result
        if todo:
            if time.monotonic() >= deadline:
                for tp in todo:
                    out[tp] = last.get(tp) or _failed(
                        StromError(
                            ErrorCode.LEADER_NOT_AVAILABLE,
                            f"{tp.topic}-{tp.partition} had no leader for {timeout_s:g} s.",
                            True,
                        )
                    )
                break
            cluster.mark_stale()
            await asyncio.sleep(cluster.retry_backoff_s)
    return out


def _does_not_exist(cluster: Cluster, tp: TopicPartition) -> bool:
    """The metadata says so: the topic is unknown, or it has no such partition."""
    info = cluster.topics.get(tp.topic)
    if info is None:
        return False  # not learned yet
    if info.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return True
    return info.error == ErrorCode.NONE and tp.partition not in info.partitions


def _failed(error: StromError) -> DeletedRecords:
    return DeletedRecords(-1, error)


async def _ask(
    cluster: Cluster, leader: int, offsets: dict[TopicPartition, int], deadline: float
) -> dict[TopicPartition, DeletedRecords]:
    """The leader's answer for `offsets`; a call that failed is a retriable error each."""
    topics: dict[str, list[Any]] = {}
    for tp, offset in offsets.items():
        topics.setdefault(tp.topic, []).append(
            client_pb2.DeleteRecordsRequest.Partition(partition=tp.partition, offset=offset)
        )
    wait_s = max(deadline - time.monotonic(), 0.001)
    request = client_pb2.DeleteRecordsRequest(
        timeout_ms=int(wait_s * 1000),
        topics=[
            client_pb2.DeleteRecordsRequest.Topic(name=t, partitions=ps) for t, ps in topics.items()
        ],
    )
    try:
        response = await cluster.stub(leader).DeleteRecords(request, timeout=wait_s + 1)
    except (grpc.aio.AioRpcError, StromError) as exc:
        why = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else exc.message
        error = StromError(ErrorCode.NETWORK_EXCEPTION, f"broker {leader}: {why}", True)
        return dict.fromkeys(offsets, _failed(error))
    out = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition)
            if p.error.code == 0:
                out[tp] = DeletedRecords(p.low_watermark)
            else:
                out[tp] = _failed(from_pb(p.error))
    return out
