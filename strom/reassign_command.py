"""`strom reassign-partitions`: kafka-reassign-partitions.sh over the controller API
(DescribeTopics, DescribeCluster, AlterPartitionReassignments, ListPartitionReassignments),
with Kafka's JSON files and messages:
- --generate --topics-to-move-json-file F --broker-list 1,2,3: prints the topics' current
  assignment and a proposed one as reassignment JSON (version 1, log dirs "any"). The
  proposal is Kafka's rack-unaware placement (AdminUtils.assignReplicasToBrokersRackUnaware)
  with its random start replaced by broker 0 of the sorted list, so it is a plain
  round-robin that the same input always repeats; brokers of the list that are not
  registered are left out, as Kafka does. Rack-unaware always (--disable-rack-aware is
  accepted and changes nothing);
- --execute --reassignment-json-file F: refuses while another reassignment is in progress
  unless --additional, checks the brokers, prints the current assignment "to save for
  rollback", starts the reassignments;
- --verify: per partition of the file, `is still in progress.`, `is completed.`, or that
  its replicas are neither; Strom has no replication throttles, so there are none to clear;
- --cancel: cancels the file's partitions that are being reassigned (their replicas go back
  to what they were);
- --list: the reassignments in progress.
Strom moves no replica between log directories, so a file's log_dirs must be "any".
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from strom.admin_errors import AdminError, error_name, from_error_pb
from strom.admin_parsing import (
    TopicPartition,
    check_reassignment,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    partition_name,
)
from strom.controller_client import ControllerClient
from strom.formatting import (
    generated_assignment,
    reassignment_cancelled,
    reassignment_started,
    reassignment_status,
    reassignments_list,
    replication_factor,
    rollback_assignment,
)
from strom_api.v1 import common_pb2, controller_pb2

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# Besides the bootstrap options: what each action needs, and what else it may take.
REQUIRED = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
PERMITTED = {
    "generate": ("disable_rack_aware",),
    "execute": ("additional",),
    "verify": ("preserve_throttles",),
    "cancel": ("preserve_throttles",),
    "list": (),
}
OPTIONS = (
    "topics_to_move_json_file",
    "broker_list",
    "reassignment_json_file",
    "additional",
    "preserve_throttles",
    "disable_rack_aware",
)

EXISTING_REASSIGNMENT = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. "
    "The --additional flag can also be used to change the throttle by resubmitting the "
    "current reassignment."
)

Out = Callable[[str], None]


def _option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def usage_problem(args: argparse.Namespace) -> str | None:
    """validateAndParseArgs' checks, as a sentence; None when the options fit together."""
    action = next(a for a in ACTIONS if getattr(args, a))
    for dest in REQUIRED[action]:
        if getattr(args, dest) is None:
            return f"--{action} needs {_option(dest)}"
    for dest in OPTIONS:
        value = getattr(args, dest)
        given = value is not None and value is not False
        if given and dest not in REQUIRED[action] and dest not in PERMITTED[action]:
            allowed = [a for a in ACTIONS if dest in REQUIRED[a] or dest in PERMITTED[a]]
            return f"option {_option(dest)} can only be used with " + ", ".join(
                f"--{a}" for a in allowed
            )
    return None


# --- the proposal ------------------------------------------------------------------------------


def _replica_index(first: int, shift: int, index: int, brokers: int) -> int:
    return (first + 1 + (shift + index) % (brokers - 1)) % brokers


def propose_assignment(
    topics: Mapping[str, tuple[int, int]], brokers: Sequence[int]
) -> dict[TopicPartition, list[int]]:
    """New replicas for every partition of `topics` (name -> (partition count, replication
    factor)) over `brokers`: Kafka's rack-unaware round-robin with a fixed start (broker 0 of
    the sorted list leads partition 0, the followers' shift grows by one each time the
    partitions wrap around the brokers)."""
    ordered = sorted(brokers)
    proposal: dict[TopicPartition, list[int]] = {}
    for topic in sorted(topics):
        partitions, factor = topics[topic]
        if factor > len(ordered):
            raise AdminError(
                "INVALID_REPLICATION_FACTOR",
                f"Replication factor: {factor} larger than available brokers: {len(ordered)}.",
            )
        shift = 0
        for partition in range(partitions):
            if partition > 0 and partition % len(ordered) == 0:
                shift += 1
            first = partition % len(ordered)
            replicas = [ordered[first]]
            replicas += [
                ordered[_replica_index(first, shift, j, len(ordered))] for j in range(factor - 1)
            ]
            proposal[topic, partition] = replicas
    return proposal


# --- what the controller knows -----------------------------------------------------------------


def _error_of(item: Any) -> AdminError | None:
    if item.HasField("error") and item.error.code != common_pb2.NONE:
        return from_error_pb(item.error)
    return None


def _describe_topics(client: ControllerClient, names: Iterable[str]) -> dict[str, Any]:
    """The topics named (none: none), each existing one's description."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    response = client.describe("DescribeTopics", controller_pb2.DescribeTopicsRequest(names=wanted))
    return {t.name: t for t in response.topics if _error_of(t) is None}


def _replicas(topics: Mapping[str, Any]) -> dict[TopicPartition, list[int]]:
    return {
        (name, p.partition): list(p.replicas)
        for name, topic in topics.items()
        for p in topic.partitions
    }


def _registered_brokers(client: ControllerClient) -> set[int]:
    cluster = client.describe("DescribeCluster", controller_pb2.DescribeClusterRequest())
    return {b.broker_id for b in cluster.brokers}


def _ongoing(client: ControllerClient, partitions: Iterable[TopicPartition] = ()) -> list[Any]:
    request = controller_pb2.ListPartitionReassignmentsRequest()
    for topic, partition in partitions:
        request.partitions.add(topic=topic, partition=partition)
    return list(client.call("ListPartitionReassignments", request).reassignments)


def _key(item: Any) -> TopicPartition:
    return (item.partition.topic, item.partition.partition)


def _alter(
    client: ControllerClient, targets: Mapping[TopicPartition, Sequence[int] | None]
) -> tuple[str, str, int] | None:
    """AlterPartitionReassignments (None: cancel). For the partitions that failed: the first
    one's error name, `orders-0: message; orders-1: message` and how many; None when none
    failed."""
    request = controller_pb2.AlterPartitionReassignmentsRequest()
    for (topic, partition), replicas in sorted(targets.items()):
        item = request.reassignments.add()
        item.partition.topic, item.partition.partition = topic, partition
        if replicas is not None:
            item.replicas.ids.extend(replicas)
    response = client.call("AlterPartitionReassignments", request)
    failed = sorted((r for r in response.results if r.error.code != common_pb2.NONE), key=_key)
    if not failed:
        return None
    details = "; ".join(f"{partition_name(_key(r))}: {r.error.message}" for r in failed)
    return error_name(failed[0].error.code), details, len(failed)


# --- the actions -------------------------------------------------------------------------------


def generate(client: ControllerClient, args: argparse.Namespace, out: Out) -> None:
    wanted = parse_topics_to_move(args.topics_to_move_json_file)
    brokers = parse_broker_list(args.broker_list)
    topics = _describe_topics(client, wanted)
    for name in wanted:
        if name not in topics:
            raise AdminError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic {name} not found.")
    current = _replicas(topics)
    registered = _registered_brokers(client)
    shapes = {
        name: (len(t.partitions), replication_factor(min(t.partitions, key=lambda p: p.partition)))
        for name, t in topics.items()
        if t.partitions
    }
    proposal = propose_assignment(shapes, [b for b in brokers if b in registered])
    for line in generated_assignment(current, proposal):
        out(line)


def execute(client: ControllerClient, args: argparse.Namespace, out: Out) -> None:
    targets = check_reassignment(parse_reassignment(args.reassignment_json_file))
    if not args.additional and _ongoing(client):
        raise AdminError("REASSIGNMENT_IN_PROGRESS", EXISTING_REASSIGNMENT)
    registered = _registered_brokers(client)
    unknown = sorted({b for replicas in targets.values() for b in replicas} - registered)
    if unknown:
        raise AdminError("INVALID_REPLICA_ASSIGNMENT", f"Unknown broker id {unknown[0]}")
    topics = _describe_topics(client, (topic for topic, _ in targets))
    for topic, _ in sorted(targets):
        if topic not in topics:
            raise AdminError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic {topic} not found.")
    current = {tp: r for tp, r in _replicas(topics).items() if tp in targets}
    missing = sorted(set(targets) - set(current))
    if missing:
        raise AdminError(
            "UNKNOWN_TOPIC_OR_PARTITION",
            "Unable to find partition: " + ", ".join(partition_name(tp) for tp in missing),
        )
    for line in rollback_assignment(current):
        out(line)
    failure = _alter(client, targets)
    if failure is not None:
        raise AdminError(failure[0], f"Error reassigning partition(s): {failure[1]}")
    out(reassignment_started(targets))


def verify(client: ControllerClient, args: argparse.Namespace, out: Out) -> None:
    targets = dict(parse_reassignment(args.reassignment_json_file))
    ongoing = {_key(r) for r in _ongoing(client)}
    settled = [tp for tp in targets if tp not in ongoing]
    current = _replicas(_describe_topics(client, (topic for topic, _ in settled)))
    for line in reassignment_status(targets, ongoing, current):
        out(line)


def cancel(client: ControllerClient, args: argparse.Namespace, out: Out) -> None:
    targets = dict(parse_reassignment(args.reassignment_json_file))
    active = sorted(
        _key(r)
        for r in _ongoing(client, sorted(targets))
        if r.adding_replicas or r.removing_replicas
    )
    if active:
        failure = _alter(client, dict.fromkeys(active))
        if failure is not None:
            plural = "" if failure[2] == 1 else "s"
            raise AdminError(
                failure[0], f"Error cancelling partition reassignment{plural} for: {failure[1]}"
            )
        out(reassignment_cancelled(active))
    else:
        out("None of the specified partition reassignments are active.")
    out("None of the specified partition moves are active.")


def list_reassignments(client: ControllerClient, args: argparse.Namespace, out: Out) -> None:
    for line in reassignments_list(_ongoing(client)):
        out(line)


def run(client: ControllerClient, args: argparse.Namespace, out: Out) -> None:
    action = next(a for a in ACTIONS if getattr(args, a))
    {
        "generate": generate,
        "execute": execute,
        "verify": verify,
        "cancel": cancel,
        "list": list_reassignments,
    }[action](client, args, out)
