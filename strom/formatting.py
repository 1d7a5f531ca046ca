"""What the admin tools print, in the layout of Kafka's tools: pure functions from the
controller's answers (strom_api.v1.controller_pb2 messages) to lines of text.

- kafka-metadata-quorum.sh describe --status: `Key:` padded to 24 columns, then the value;
  CurrentVoters/CurrentObservers as Kafka 3.3-3.8 print them, `[1,2,3]` (Strom has no
  directory ids, which 3.9 added), ids in order;
- describe --replication and the broker table: Kafka's ToolsUtils.prettyPrintTable (each
  cell padded to its column's width and followed by a tab);
- kafka-topics.sh --describe: `Topic: T<TAB>TopicId: ...<TAB>PartitionCount: ...` then
  `<TAB>Topic: T<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1,2<TAB>Isr: 1,2` per partition
  (Kafka 3.6's columns: Strom has no ELR), `none` for no leader, and the adding/removing
  replicas of a reassignment in progress.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from typing import Any

from strom.uuids import is_zero_uuid, kafka_uuid_from_bytes

_KEY_WIDTH = 24  # "MaxFollowerLagTimeMs:   " is 24 wide in Kafka's status output


def key_value(key: str, value: object) -> str:
    return f"{key + ':':<{_KEY_WIDTH}}{value}"


def pretty_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Kafka's ToolsUtils.prettyPrintTable: left-aligned columns, each cell followed by a tab."""
    rows = [list(r) for r in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    return ["".join(f"{cell:<{widths[i]}}\t" for i, cell in enumerate(r)) for r in [headers, *rows]]


def id_list(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


# --- kafka-metadata-quorum.sh ------------------------------------------------------------------


def _leader_of(quorum: Any) -> Any | None:
    return next((v for v in quorum.voters if v.replica_id == quorum.leader_id), None)


def max_follower_lag(quorum: Any) -> tuple[int, int]:
    """(MaxFollowerLag, MaxFollowerLagTimeMs) as Kafka computes them: the voter with the
    smallest log end offset against the leader; 0 ms when that is the leader itself, -1 when
    a caught-up time is unknown."""
    leader = _leader_of(quorum)
    if leader is None or not quorum.voters:
        return 0, -1
    slowest = min(quorum.voters, key=lambda v: v.log_end_offset)
    lag = leader.log_end_offset - slowest.log_end_offset
    if slowest.replica_id == leader.replica_id:
        return lag, 0
    if leader.last_caught_up_timestamp >= 0 and slowest.last_caught_up_timestamp >= 0:
        return lag, leader.last_caught_up_timestamp - slowest.last_caught_up_timestamp
    return lag, -1


def quorum_status(cluster_id: str, quorum: Any) -> list[str]:
    """kafka-metadata-quorum.sh describe --status."""
    lag, lag_ms = max_follower_lag(quorum)
    return [
        key_value("ClusterId", cluster_id),
        key_value("LeaderId", quorum.leader_id),
        key_value("LeaderEpoch", quorum.leader_epoch),
        key_value("HighWatermark", quorum.high_watermark),
        key_value("MaxFollowerLag", lag),
        key_value("MaxFollowerLagTimeMs", lag_ms),
        key_value("CurrentVoters", f"[{id_list(sorted(v.replica_id for v in quorum.voters))}]"),
        key_value(
            "CurrentObservers", f"[{id_list(sorted(o.replica_id for o in quorum.observers))}]"
        ),
    ]


def _timestamp(ms: int, human_readable: bool, now_ms: int) -> str:
    if ms < 0:
        return "-1"
    if human_readable:
        # Kafka fails on a timestamp in the future (clock drift); a tool that reads another
        # host's wall clock shows 0 instead.
        return f"{max(0, now_ms - ms)} ms ago"
    return str(ms)


def quorum_replication(quorum: Any, *, human_readable: bool = False, now_ms: int = 0) -> list[str]:
    """kafka-metadata-quorum.sh describe --replication: the leader, the other voters
    (Follower) and the observers, with each one's lag behind the leader's log end."""
    leader = _leader_of(quorum)
    leader_end = leader.log_end_offset if leader is not None else 0
    replicas = [(leader, "Leader")] if leader is not None else []
    followers = [v for v in quorum.voters if v.replica_id != quorum.leader_id]
    replicas += [(v, "Follower") for v in sorted(followers, key=lambda v: v.replica_id)]
    replicas += [(o, "Observer") for o in sorted(quorum.observers, key=lambda o: o.replica_id)]
    rows = [
        [
            str(r.replica_id),
            str(r.log_end_offset),
            str(leader_end - r.log_end_offset),
            _timestamp(r.last_fetch_timestamp, human_readable, now_ms),
            _timestamp(r.last_caught_up_timestamp, human_readable, now_ms),
            status,
        ]
        for r, status in replicas
    ]
    headers = [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    return pretty_table(headers, rows)


# --- strom cluster (kafka-cluster.sh) ----------------------------------------------------------


def cluster_id_line(cluster_id: str) -> str:
    """kafka-cluster.sh cluster-id."""
    return f"Cluster ID: {cluster_id}"


def broker_state(broker: Any) -> str:
    if broker.in_controlled_shutdown:
        return "shutting down"
    return "fenced" if broker.fenced else "unfenced"


def endpoint_string(endpoint: Any) -> str:
    """Kafka's Endpoint form, LISTENER://host:port."""
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{endpoint.name}://{host}:{endpoint.port}"


def cluster_description(cluster: Any) -> list[str]:
    """strom cluster describe: the cluster id, the active controller, and every registered
    broker with its state, rack (`null` for none, as Kafka's Node prints it), epoch and
    listeners."""
    rows = [
        [
            str(b.broker_id),
            broker_state(b),
            b.rack or "null",
            str(b.broker_epoch),
            ",".join(endpoint_string(e) for e in b.endpoints),
        ]
        for b in sorted(cluster.brokers, key=lambda b: b.broker_id)
    ]
    return [
        key_value("ClusterId", cluster.cluster_id),
        key_value("ControllerId", cluster.controller_id),
        key_value("MetadataOffset", cluster.metadata_offset),
        key_value("Brokers", len(rows)),
        *pretty_table(["BrokerId", "State", "Rack", "BrokerEpoch", "Endpoints"], rows),
    ]


# --- kafka-topics.sh ---------------------------------------------------------------------------


def _reassigning(partition: Any) -> bool:
    return bool(partition.adding_replicas or partition.removing_replicas)


def replication_factor(partition: Any) -> int:
    """Kafka's: the replicas, less those being added by a reassignment in progress."""
    return len(partition.replicas) - len(partition.adding_replicas)


def is_under_replicated(partition: Any) -> bool:
    return replication_factor(partition) - len(partition.isr) > 0


def is_unavailable(partition: Any, live_brokers: Set[int]) -> bool:
    return partition.leader < 0 or partition.leader not in live_brokers


def topic_line(topic: Any) -> str:
    """The topic's line of kafka-topics.sh --describe; Configs lists its dynamic configs."""
    partitions = sorted(topic.partitions, key=lambda p: p.partition)
    factor = replication_factor(partitions[0]) if partitions else 0
    configs = ",".join(f"{k}={v}" for k, v in sorted(topic.configs.items()))
    line = f"Topic: {topic.name}"
    if len(topic.topic_id) == 16 and not is_zero_uuid(topic.topic_id):
        line += f"\tTopicId: {kafka_uuid_from_bytes(topic.topic_id)}"
    line += f"\tPartitionCount: {len(partitions)}\tReplicationFactor: {factor}"
    return f"{line}\tConfigs: {configs}"


def partition_line(topic_name: str, partition: Any) -> str:
    leader = str(partition.leader) if partition.leader >= 0 else "none"
    line = (
        f"\tTopic: {topic_name}\tPartition: {partition.partition}\tLeader: {leader}"
        f"\tReplicas: {id_list(partition.replicas)}\tIsr: {id_list(partition.isr)}"
    )
    if _reassigning(partition):
        line += (
            f"\tAdding Replicas: {id_list(partition.adding_replicas)}"
            f"\tRemoving Replicas: {id_list(partition.removing_replicas)}"
        )
    return line


def topic_description(
    topic: Any,
    *,
    live_brokers: Set[int] = frozenset(),
    under_replicated: bool = False,
    unavailable: bool = False,
) -> list[str]:
    """kafka-topics.sh --describe for one topic. With --under-replicated-partitions or
    --unavailable-partitions only the partitions that are so, without the topic line."""
    partitions = sorted(topic.partitions, key=lambda p: p.partition)
    if not (under_replicated or unavailable):
        return [topic_line(topic), *(partition_line(topic.name, p) for p in partitions)]
    return [
        partition_line(topic.name, p)
        for p in partitions
        if (under_replicated and is_under_replicated(p))
        or (unavailable and is_unavailable(p, live_brokers))
    ]
