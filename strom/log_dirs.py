"""Kafka's Admin.describeLogDirs: each broker's log directories, asked of each broker itself
(DescribeLogDirs is a broker's own answer, not the controller's), with the replicas each
directory holds, their sizes and offset lags, and the volume's total and usable bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from strom.cluster import Cluster
from strom.errors import StromError, from_pb
from strom.fetcher import TopicPartition
from strom_api.error_codes import ErrorCode
from strom_api.v1 import client_pb2


@dataclass(frozen=True)
class ReplicaInfo:
    """Kafka's ReplicaInfo: a replica's bytes on disk and how far its log end trails its
    high watermark (is_future: a copy being moved between directories; never, here)."""

    size: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True)
class LogDirDescription:
    """Kafka's LogDirDescription: `error` set (KAFKA_STORAGE_ERROR) when the directory is
    offline, then no replicas; the volume's bytes are -1 when unknown."""

    error: StromError | None
    replicas: dict[TopicPartition, ReplicaInfo] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1


async def describe_log_dirs(
    cluster: Cluster, broker_ids: Iterable[int], timeout_s: float
) -> dict[int, dict[str, LogDirDescription]]:
    """Each broker's directories by path. A broker the metadata does not list is
    INVALID_REQUEST naming it, before any broker is asked; a refusal of the whole request
    (CLUSTER_AUTHORIZATION_FAILED) or a broker that does not answer raises."""
    if not cluster.brokers:
        await cluster.refresh()
    wanted = list(dict.fromkeys(broker_ids))
    unknown = [b for b in wanted if b not in cluster.brokers]
    if unknown:
        raise StromError(
            ErrorCode.INVALID_REQUEST,
            "The given brokers do not exist from --broker-list: "
            f"{','.join(map(str, unknown))}. Current existent brokers: "
            f"{','.join(map(str, sorted(cluster.brokers)))}",
        )
    request = client_pb2.DescribeLogDirsRequest(all_topics=True)
    answers = await asyncio.gather(
        *(_ask(cluster, broker, request, timeout_s) for broker in wanted)
    )
    return dict(zip(wanted, answers, strict=True))


async def _ask(
    cluster: Cluster, broker: int, request: Any, timeout_s: float
) -> dict[str, LogDirDescription]:
    try:
        response = await cluster.stub(broker).DescribeLogDirs(request, timeout=timeout_s)
    except grpc.aio.AioRpcError as exc:
        retriable = exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        raise StromError(
            ErrorCode.NETWORK_EXCEPTION if retriable else ErrorCode.UNKNOWN_SERVER_ERROR,
            f"broker {broker} did not describe its log directories: {exc.code().name} "
            f"{exc.details()}",
            retriable,
        ) from None
    if response.error.code != 0:
        raise from_pb(response.error)
    out = {}
    for d in response.log_dirs:
        replicas = {
            TopicPartition(topic.name, r.partition): ReplicaInfo(r.size, r.offset_lag, r.is_future)
            for topic in d.topics
            for r in topic.replicas
        }
        error = from_pb(d.error) if d.error.code != 0 else None
        out[d.log_dir] = LogDirDescription(error, replicas, d.total_bytes, d.usable_bytes)
    return out
