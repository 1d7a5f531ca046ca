"""DescribeLogDirs from a client (kafka-log-dirs.sh, Admin.describeLogDirs): this broker's
log directories, each with its replicas' sizes and how far each trails the high watermark,
and the volume's total and usable bytes (KIP-827).

Rules (Kafka's KafkaApis.handleDescribeLogDirsRequest and ReplicaManager.describeLogDirs):
DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED and no directories; a
directory that has failed is listed with KAFKA_STORAGE_ERROR, no replicas and -1 bytes;
`wanted` None lists every replica, otherwise only those named (a named one this broker does
not hold is left out). The offset lag is Kafka's for a current replica: how far its log end
is below its high watermark, never negative (so 0: Kafka's lag tells of a future replica,
one being moved between directories, which Strom does not make).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from broker.loop_slices import LoopSlices
from broker.replica_manager import ReplicaManager
from metadata.errors import ApiError
from server.request_authorization import RequestAuthorizer
from server.request_session import Session
from strom_api.error_codes import ErrorCode

UNKNOWN_VOLUME_BYTES = -1  # Kafka's DescribeLogDirsResponse.UNKNOWN_VOLUME_BYTES


@dataclass(frozen=True, slots=True)
class ReplicaOnDisk:
    partition: int
    size: int
    offset_lag: int


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    log_dir: str
    error: ApiError | None = None
    topics: dict[str, list[ReplicaOnDisk]] = field(default_factory=dict)
    total_bytes: int = UNKNOWN_VOLUME_BYTES
    usable_bytes: int = UNKNOWN_VOLUME_BYTES


async def describe_log_dirs(
    replicas: ReplicaManager,
    authz: RequestAuthorizer,
    wanted: Mapping[str, Sequence[int]] | None,
    session: Session | None,
) -> tuple[ApiError | None, list[LogDirDescription]]:
    """(the refusal of the whole request, or None; each log directory, in config order).
    The partitions asked and the replicas held are gone over in loop slices: a request may
    name 250,000 partitions, and a broker hold 10,000 replicas."""
    refusal = authz.cluster("DescribeLogDirs", session)
    if refusal is not None:
        return refusal, []
    manager = replicas.log_manager
    online = set(manager.online_dirs())
    slices = LoopSlices()
    chosen: set[tuple[str, int]] | None = None
    if wanted is not None:
        chosen = set()
        for t, parts in wanted.items():
            for p in parts:
                chosen.add((t, p))
                await slices.step()
    out = []
    for log_dir in manager.log_dirs:
        if log_dir not in online:
            out.append(
                LogDirDescription(
                    log_dir,
                    ApiError(
                        ErrorCode.KAFKA_STORAGE_ERROR,
                        f"The log directory {log_dir} is offline.",
                    ),
                )
            )
            continue
        topics: dict[str, list[ReplicaOnDisk]] = {}
        for topic, partition in sorted(manager.logs_in(log_dir)):
            await slices.step()
            log = manager.logs.get((topic, partition))
            if log is None or (chosen is not None and (topic, partition) not in chosen):
                continue
            lag = max(log.high_watermark - log.log_end_offset, 0)
            topics.setdefault(topic, []).append(ReplicaOnDisk(partition, log.size, lag))
        try:
            usage = shutil.disk_usage(log_dir)
        except OSError:  # the volume went away after the directory was last used
            out.append(LogDirDescription(log_dir, None, topics))
            continue
        out.append(LogDirDescription(log_dir, None, topics, usage.total, usage.free))
    return None, out
