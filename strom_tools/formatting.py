"""What the admin tools print, in the layout of Kafka's tools: pure functions from
AdminClient's answers (the cluster and the quorum) or the controller's
(strom_api.v1.controller_pb2 messages, for the commands not yet on AdminClient) to lines of
text.

- kafka-metadata-quorum.sh describe --status: `Key:` padded to 24 columns, then the value;
  CurrentVoters/CurrentObservers as Kafka 3.3-3.8 print them, `[1,2,3]` (Strom has no
  directory ids, which 3.9 added), ids in order;
- describe --replication and the broker table: Kafka's ToolsUtils.prettyPrintTable (each
  cell padded to its column's width and followed by a tab);
- kafka-topics.sh --describe: `Topic: T<TAB>TopicId: ...<TAB>PartitionCount: ...` then
  `<TAB>Topic: T<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1,2<TAB>Isr: 1,2` per partition
  (Kafka 3.6's columns: Strom has no ELR), `none` for no leader, and the adding/removing
  replicas of a reassignment in progress;
- kafka-configs.sh --describe: `  name=value sensitive=false synonyms={SOURCE:name=value, ...}`
  under `Dynamic|All configs for topic T are:` / `Default configs for brokers in the cluster
  are:`;
- kafka-leader-election.sh's and kafka-reassign-partitions.sh's sentences, and the latter's
  reassignment JSON (compact, as Jackson writes it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence, Set
from typing import Any

from strom.admin import ConfigEntry, ConfigSynonym, TopicDescription
from strom.consumer import TopicPartition
from strom.errors import StromError
from strom.uuids import kafka_uuid_from_bytes
from strom_api.error_codes import ErrorCode

# AdminClient.describe_metadata_quorum's answer and one replica state in it.
Quorum = Mapping[str, Any]
Replica = Mapping[str, int]

# Kafka's Uuid.ZERO_UUID as a string: a topic without an id shows none.
_ZERO_TOPIC_ID = kafka_uuid_from_bytes(bytes(16))

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


def _leader_of(quorum: Quorum) -> Replica | None:
    return next((v for v in quorum["voters"] if v["id"] == quorum["leader_id"]), None)


def max_follower_lag(quorum: Quorum) -> tuple[int, int]:
    """(MaxFollowerLag, MaxFollowerLagTimeMs) as Kafka computes them: the voter with the
    smallest log end offset against the leader; 0 ms when that is the leader itself, -1 when
    a caught-up time is unknown."""
    leader = _leader_of(quorum)
    if leader is None or not quorum["voters"]:
        return 0, -1
    slowest = min(quorum["voters"], key=lambda v: v["log_end_offset"])
    lag = leader["log_end_offset"] - slowest["log_end_offset"]
    if slowest["id"] == leader["id"]:
        return lag, 0
    leader_caught_up = leader["last_caught_up_timestamp"]
    slowest_caught_up = slowest["last_caught_up_timestamp"]
    if leader_caught_up >= 0 and slowest_caught_up >= 0:
        return lag, leader_caught_up - slowest_caught_up
    return lag, -1


def quorum_status(cluster_id: str, quorum: Quorum) -> list[str]:
    """kafka-metadata-quorum.sh describe --status, from AdminClient.describe_metadata_quorum."""
    lag, lag_ms = max_follower_lag(quorum)
    return [
        key_value("ClusterId", cluster_id),
        key_value("LeaderId", quorum["leader_id"]),
        key_value("LeaderEpoch", quorum["leader_epoch"]),
        key_value("HighWatermark", quorum["high_watermark"]),
        key_value("MaxFollowerLag", lag),
        key_value("MaxFollowerLagTimeMs", lag_ms),
        key_value("CurrentVoters", f"[{id_list(sorted(v['id'] for v in quorum['voters']))}]"),
        key_value("CurrentObservers", f"[{id_list(sorted(o['id'] for o in quorum['observers']))}]"),
    ]


def _timestamp(ms: int, human_readable: bool, now_ms: int) -> str:
    if ms < 0:
        return "-1"
    if human_readable:
        # Kafka fails on a timestamp in the future (clock drift); a tool that reads another
        # host's wall clock shows 0 instead.
        return f"{max(0, now_ms - ms)} ms ago"
    return str(ms)


def quorum_replication(
    quorum: Quorum, *, human_readable: bool = False, now_ms: int = 0
) -> list[str]:
    """kafka-metadata-quorum.sh describe --replication: the leader, the other voters
    (Follower) and the observers, with each one's lag behind the leader's log end."""
    leader = _leader_of(quorum)
    leader_end = leader["log_end_offset"] if leader is not None else 0
    replicas = [(leader, "Leader")] if leader is not None else []
    followers = [v for v in quorum["voters"] if v["id"] != quorum["leader_id"]]
    replicas += [(v, "Follower") for v in sorted(followers, key=lambda v: v["id"])]
    replicas += [(o, "Observer") for o in sorted(quorum["observers"], key=lambda o: o["id"])]
    rows = [
        [
            str(r["id"]),
            str(r["log_end_offset"]),
            str(leader_end - r["log_end_offset"]),
            _timestamp(r["last_fetch_timestamp"], human_readable, now_ms),
            _timestamp(r["last_caught_up_timestamp"], human_readable, now_ms),
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


def broker_state(broker: Mapping[str, Any]) -> str:
    if broker["in_controlled_shutdown"]:
        return "shutting down"
    return "fenced" if broker["fenced"] else "unfenced"


def cluster_description(cluster: Mapping[str, Any]) -> list[str]:
    """strom cluster describe, from AdminClient.describe_cluster: the cluster id, the active
    controller, and every registered broker with its state, rack (`null` for none, as Kafka's
    Node prints it), epoch and listeners."""
    rows = [
        [
            str(b["node_id"]),
            broker_state(b),
            b["rack"] or "null",
            str(b["broker_epoch"]),
            ",".join(b["endpoints"]),
        ]
        for b in sorted(cluster["brokers"], key=lambda b: b["node_id"])
    ]
    return [
        key_value("ClusterId", cluster["cluster_id"]),
        key_value("ControllerId", cluster["controller_id"]),
        key_value("MetadataOffset", cluster["metadata_offset"]),
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


def topic_line(topic: TopicDescription) -> str:
    """The topic's line of kafka-topics.sh --describe; Configs lists its dynamic configs."""
    partitions = sorted(topic.partitions, key=lambda p: p.partition)
    factor = replication_factor(partitions[0]) if partitions else 0
    configs = ",".join(f"{k}={v}" for k, v in sorted(topic.configs.items()))
    line = f"Topic: {topic.name}"
    if topic.topic_id and topic.topic_id != _ZERO_TOPIC_ID:
        line += f"\tTopicId: {topic.topic_id}"
    line += f"\tPartitionCount: {len(partitions)}\tReplicationFactor: {factor}"
    return f"{line}\tConfigs: {configs}"


def partition_line(topic_name: str, partition: Any) -> str:
    leader = str(partition.leader) if partition.leader >= 0 else "none"
    line = (
        f"\tTopic: {topic_name}\tPartition: {partition.partition}\tLeader: {leader}"
        f"\tReplicas: {id_list(partition.replicas)}\tIsr: {id_list(partition.isr)}"
    )
    elr = getattr(partition, "eligible_leader_replicas", ())
    if elr:  # Kafka 4's Elr column, shown here only when a partition has one
        line += f"\tElr: {id_list(elr)}"
    if _reassigning(partition):
        line += (
            f"\tAdding Replicas: {id_list(partition.adding_replicas)}"
            f"\tRemoving Replicas: {id_list(partition.removing_replicas)}"
        )
    return line


def topic_description(
    topic: TopicDescription,
    *,
    live_brokers: Set[int] = frozenset(),
    under_replicated: bool = False,
    unavailable: bool = False,
    min_isr: int | None = None,
    under_min_isr: bool = False,
    at_min_isr: bool = False,
) -> list[str]:
    """kafka-topics.sh --describe for one topic. With --under-replicated-partitions,
    --unavailable-partitions, --under-min-isr-partitions or --at-min-isr-partitions only the
    partitions that are so (any of those asked), without the topic line; `min_isr` is the
    topic's min.insync.replicas for the last two."""
    partitions = sorted(topic.partitions, key=lambda p: p.partition)
    if not (under_replicated or unavailable or under_min_isr or at_min_isr):
        return [topic_line(topic), *(partition_line(topic.name, p) for p in partitions)]
    floor = 1 if min_isr is None else min_isr
    return [
        partition_line(topic.name, p)
        for p in partitions
        if (under_replicated and is_under_replicated(p))
        or (unavailable and is_unavailable(p, live_brokers))
        or (under_min_isr and (p.leader < 0 or len(p.isr) < floor))  # Kafka's isUnderMinIsr
        or (at_min_isr and len(p.isr) == floor)
    ]


# --- kafka-configs.sh --------------------------------------------------------------------------


def _config_value(holder: ConfigEntry | ConfigSynonym) -> str:
    """A config or synonym value as Kafka's ConfigEntry prints it: `null` when unset."""
    return holder.value if holder.value is not None else "null"


def config_entry_line(entry: ConfigEntry) -> str:
    """One config of kafka-configs.sh --describe: `  name=value sensitive=false
    synonyms={SOURCE:name=value, ...}`; a sensitive value shows as null, as Kafka's brokers
    never return it."""
    value = "null" if entry.is_sensitive else _config_value(entry)
    synonyms = ", ".join(
        f"{s.source}:{s.name}={'null' if entry.is_sensitive else _config_value(s)}"
        for s in entry.synonyms
    )
    sensitive = "true" if entry.is_sensitive else "false"
    return f"  {entry.name}={value} sensitive={sensitive} synonyms={{{synonyms}}}"


def configs_header(entity_type: str, name: str, describe_all: bool) -> str:
    """The line before an entity's configs: `Dynamic configs for topic orders are:` (`All`
    with --all), `Default configs for brokers in the cluster are:` for the default."""
    if name == "":
        return f"Default configs for {entity_type} in the cluster are:"
    which = "All" if describe_all else "Dynamic"
    return f"{which} configs for {entity_type[:-1]} {name} are:"


def configs_altered(entity_type: str, name: str) -> str:
    if name == "":
        return f"Completed updating default config for {entity_type} in the cluster."
    return f"Completed updating config for {entity_type[:-1]} {name}."


# --- kafka-leader-election.sh ------------------------------------------------------------------


def _partition_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def election_lines(
    election_type: str, results: Mapping[TopicPartition, StromError | None]
) -> tuple[list[str], list[tuple[TopicPartition, StromError]]]:
    """kafka-leader-election.sh's report of AdminClient.elect_leaders(as_errors=True): the
    partitions elected, those that needed no election (ELECTION_NOT_NEEDED), then a line per
    failure; and the failures. Partitions in (topic, partition) order."""
    ordered = sorted(results.items(), key=lambda item: (item[0].topic, item[0].partition))
    succeeded = [tp for tp, e in ordered if e is None]
    not_needed = ErrorCode.ELECTION_NOT_NEEDED
    noop = [tp for tp, e in ordered if e is not None and e.name == not_needed]
    failed = [(tp, e) for tp, e in ordered if e is not None and e.name != not_needed]

    def names(items: list[TopicPartition]) -> str:
        return ", ".join(_partition_name(tp.topic, tp.partition) for tp in items)

    lines = []
    if succeeded:
        lines.append(
            f"Successfully completed leader election ({election_type}) for partitions "
            f"{names(succeeded)}"
        )
    if noop:
        lines.append(f"Valid replica already elected for partitions {names(noop)}")
    for tp, error in failed:
        name = _partition_name(tp.topic, tp.partition)
        lines.append(
            f"Error completing leader election ({election_type}) for partition: {name}: "
            f"{error.name}: {error.message}"
        )
    return lines, failed


# --- kafka-reassign-partitions.sh --------------------------------------------------------------

Assignment = Mapping[tuple[str, int], Sequence[int]]


def reassignment_json(assignment: Assignment) -> str:
    """Kafka's formatAsReassignmentJson, compact as Jackson writes it: version 1, the
    partitions in (topic, partition) order, each replica's log dir "any"."""
    partitions = [
        {
            "topic": topic,
            "partition": partition,
            "replicas": list(assignment[topic, partition]),
            "log_dirs": ["any"] * len(assignment[topic, partition]),
        }
        for topic, partition in sorted(assignment)
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def generated_assignment(current: Assignment, proposed: Assignment) -> list[str]:
    """kafka-reassign-partitions.sh --generate's output."""
    return [
        "Current partition replica assignment",
        reassignment_json(current),
        "",
        "Proposed partition reassignment configuration",
        reassignment_json(proposed),
    ]


def rollback_assignment(current: Assignment) -> list[str]:
    """What --execute prints first: the replicas the partitions have now, to go back to."""
    return [
        "Current partition replica assignment",
        "",
        reassignment_json(current),
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
    ]


def partition_list(partitions: Iterable[tuple[str, int]]) -> str:
    return ",".join(_partition_name(t, p) for t, p in sorted(partitions))


def reassignment_started(partitions: Iterable[tuple[str, int]]) -> str:
    names = sorted(partitions)
    plural = "" if len(names) == 1 else "s"
    return f"Successfully started partition reassignment{plural} for {partition_list(names)}"


def reassignment_cancelled(partitions: Iterable[tuple[str, int]]) -> str:
    names = sorted(partitions)
    plural = "" if len(names) == 1 else "s"
    return f"Successfully cancelled partition reassignment{plural} for: {partition_list(names)}"


def reassignment_status(
    targets: Assignment,
    ongoing: Set[tuple[str, int]],
    current: Assignment,
) -> list[str]:
    """kafka-reassign-partitions.sh --verify: per partition of the file, still in progress
    (a reassignment of it is ongoing), completed (its replicas are the target), or neither
    (its replicas are something else; none for a partition that does not exist)."""
    lines = ["Status of partition reassignment:"]
    for tp in sorted(targets):
        name = _partition_name(*tp)
        if tp in ongoing:
            lines.append(f"Reassignment of partition {name} is still in progress.")
            continue
        replicas = list(current.get(tp, ()))
        target = list(targets[tp])
        if replicas == target:
            lines.append(f"Reassignment of partition {name} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{id_list(replicas)} rather than {id_list(target)}."
            )
    return lines


def reassignments_list(ongoing: Mapping[TopicPartition, Mapping[str, Sequence[int]]]) -> list[str]:
    """kafka-reassign-partitions.sh --list from AdminClient.list_partition_reassignments'
    answer."""
    lines = []
    for (topic, partition), r in sorted(ongoing.items()):
        line = f"{_partition_name(topic, partition)}: replicas: {id_list(r['replicas'])}."
        if r["adding"]:
            line += f" adding: {id_list(r['adding'])}."
        if r["removing"]:
            line += f" removing: {id_list(r['removing'])}."
        lines.append(line)
    if not lines:
        return ["No partition reassignments found."]
    return ["Current partition reassignments:", *lines]
