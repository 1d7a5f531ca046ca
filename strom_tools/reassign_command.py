"""`strom reassign-partitions`: kafka-reassign-partitions.sh on AdminClient (describe_topics,
describe_cluster, alter/list_partition_reassignments, incremental_alter_configs for the
throttles), as Kafka's tool runs on its Admin client, with Kafka's JSON files and messages:
- --generate --topics-to-move-json-file F --broker-list 1,2,3: prints the topics' current
  assignment and a proposed one as reassignment JSON (version 1, log dirs "any"). The
  proposal is Kafka's placement (AdminUtils.assignReplicasToBrokers): rack-aware when the
  brokers have racks (a partition's replicas on as many racks as there are), rack-unaware
  with --disable-rack-aware or when no broker has a rack, and refused when only some have
  one; Kafka's random start is replaced by broker 0 of the (rack-alternated) list, so the
  same input always gives the same proposal. A broker of the list that is not registered is
  refused (Kafka leaves it out silently, which proposes fewer brokers than asked for);
- --execute --reassignment-json-file F [--throttle BYTES]: refuses while another
  reassignment is in progress unless --additional, checks the brokers, prints the current
  assignment "to save for rollback", sets the throttle if asked, starts the reassignments.
  The throttle is Kafka's: leader.replication.throttled.rate and
  follower.replication.throttled.rate set to BYTES/s on every broker a moving partition
  has or gets, leader.replication.throttled.replicas naming each moving partition's current
  replicas and follower.replication.throttled.replicas its new ones (the reassignments
  already in progress keep theirs); --additional with --throttle changes the rate;
- --verify: per partition of the file, `is still in progress.`, `is completed.`, or that
  its replicas are neither; once all are completed, the throttles are removed (from every
  registered broker and the file's topics) unless --preserve-throttles;
- --cancel: cancels the file's partitions that are being reassigned (their replicas go back
  to what they were) and removes the throttles unless --preserve-throttles;
- --list: the reassignments in progress.
Strom moves no replica between log directories, so a file's log_dirs must be "any" and
--replica-alter-log-dirs-throttle is refused.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence

from strom import TopicPartition as ClientPartition
from strom.admin import AdminClient, AlterConfigOp, ConfigResource, TopicDescription
from strom.errors import ErrorName, StromError
from strom_api.error_codes import ErrorCode
from strom_tools.admin_parsing import (
    TopicPartition,
    check_reassignment,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    partition_name,
)
from strom_tools.formatting import (
    generated_assignment,
    reassignment_cancelled,
    reassignment_started,
    reassignment_status,
    reassignments_list,
    replication_factor,
    rollback_assignment,
)

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
    "execute": ("additional", "throttle"),
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
    "throttle",
)

# Kafka's names (ReassignPartitionsCommand's BROKER_LEVEL_* and TOPIC_LEVEL_* constants).
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
VERIFY_PERIODICALLY = (
    "Warning: You must run --verify periodically, until the reassignment completes, to "
    "ensure the throttle is removed."
)
NO_LOG_DIR_MOVES = (
    "--replica-alter-log-dirs-throttle is not supported: Strom moves no replica between log "
    'directories (a reassignment\'s log_dirs must be "any"), so there is nothing to throttle'
)
NOT_ALL_RACKS = (
    "Not all brokers have rack information. Add --disable-rack-aware in command line to make "
    "replica assignment without rack information."
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
    if getattr(args, "replica_alter_log_dirs_throttle", None) is not None:
        return NO_LOG_DIR_MOVES
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


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: the first broker of each rack (racks sorted),
    then the second of each, and so on."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [
        c[row] for row in range(max(map(len, columns), default=0)) for c in columns if row < len(c)
    ]


def propose_assignment(
    topics: Mapping[str, tuple[int, int]],
    brokers: Sequence[int],
    racks: Mapping[int, str | None] | None = None,
) -> dict[TopicPartition, list[int]]:
    """New replicas for every partition of `topics` (name -> (partition count, replication
    factor)) over `brokers`, Kafka's AdminUtils.assignReplicasToBrokers with a fixed start:
    rack-unaware when `racks` (broker -> rack) is None or no broker has a rack, rack-aware
    when every broker has one; only some having one is refused, as Kafka does."""
    known = {b: rack for b in brokers if (rack := (racks or {}).get(b))}
    if not known:
        return {
            (topic, p): replicas
            for topic in sorted(topics)
            for p, replicas in enumerate(_rack_unaware(*topics[topic], sorted(brokers)))
        }
    if len(known) < len(brokers):
        raise StromError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, NOT_ALL_RACKS)
    return {
        (topic, p): replicas
        for topic in sorted(topics)
        for p, replicas in enumerate(_rack_aware(*topics[topic], known))
    }


def _check_factor(factor: int, brokers: int) -> None:
    if factor > brokers:
        raise StromError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {factor} larger than available brokers: {brokers}.",
        )


def _rack_unaware(partitions: int, factor: int, ordered: Sequence[int]) -> list[list[int]]:
    """Kafka's assignReplicasToBrokersRackUnaware, start index 0: broker 0 of the sorted
    list leads partition 0, the followers' shift grows by one each time the partitions wrap
    around the brokers."""
    _check_factor(factor, len(ordered))
    shift = 0
    out = []
    for partition in range(partitions):
        if partition > 0 and partition % len(ordered) == 0:
            shift += 1
        first = partition % len(ordered)
        replicas = [ordered[first]]
        replicas += [
            ordered[_replica_index(first, shift, j, len(ordered))] for j in range(factor - 1)
        ]
        out.append(replicas)
    return out


def _rack_aware(partitions: int, factor: int, racks: Mapping[int, str]) -> list[list[int]]:
    """Kafka's assignReplicasToBrokersRackAware, start index 0: over the rack-alternated
    brokers, each next replica skips a broker whose rack already has one of the partition's
    replicas while a rack without one remains (and a broker already taken while a free
    one remains)."""
    arranged = rack_alternated(racks)
    n, rack_count = len(arranged), len(set(racks.values()))
    _check_factor(factor, n)
    shift = 0
    out = []
    for partition in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = partition % n
        replicas = [arranged[first]]
        used_racks = {racks[arranged[first]]}
        k = 0
        while len(replicas) < factor:
            broker = arranged[_replica_index(first, shift * rack_count, k, n)]
            k += 1
            rack = racks[broker]
            if (rack not in used_racks or len(used_racks) == rack_count) and (
                broker not in replicas or len(replicas) == n
            ):
                replicas.append(broker)
                used_racks.add(rack)
        out.append(replicas)
    return out


# --- what the controller knows -----------------------------------------------------------------

# A reassignment in progress as AdminClient.list_partition_reassignments answers it: the
# partition's "replicas", and those it is "adding" and "removing".
Ongoing = Mapping[ClientPartition, Mapping[str, Sequence[int]]]


def _describe_topics(admin: AdminClient, names: Iterable[str]) -> dict[str, TopicDescription]:
    """The topics named that exist (none named: none), each one's description."""
    wanted = set(names)
    if not wanted:
        return {}
    # Every topic in one request, the missing ones left out (Kafka's tool reads the
    # describeTopics futures one by one; AdminClient raises the first missing one).
    return {t.name: t for t in admin.describe_topics() if t.name in wanted}


def _replicas(topics: Mapping[str, TopicDescription]) -> dict[TopicPartition, list[int]]:
    return {
        (name, p.partition): list(p.replicas)
        for name, topic in topics.items()
        for p in topic.partitions
    }


def _registered_brokers(admin: AdminClient) -> set[int]:
    return set(_broker_racks(admin))


def _broker_racks(admin: AdminClient) -> dict[int, str | None]:
    """Every registered broker and its rack (None without one)."""
    return {b["node_id"]: b["rack"] for b in admin.describe_cluster()["brokers"]}


def _ongoing(admin: AdminClient, partitions: Iterable[TopicPartition] = ()) -> Ongoing:
    return admin.list_partition_reassignments(list(partitions) or None)


def _alter(
    admin: AdminClient, targets: Mapping[TopicPartition, Sequence[int] | None]
) -> tuple[ErrorName, str, int] | None:
    """alter_partition_reassignments (None: cancel). For the partitions that failed: the
    first one's error name, `orders-0: message; orders-1: message` and how many; None when
    none failed."""
    errors = admin.alter_partition_reassignments(dict(sorted(targets.items())), as_errors=True)
    failed = sorted((tp, e) for tp, e in errors.items() if e is not None)
    if not failed:
        return None
    details = "; ".join(f"{partition_name(tp)}: {e.message}" for tp, e in failed)
    return failed[0][1].name, details, len(failed)


# --- the throttles -----------------------------------------------------------------------------

# A partition's move (Kafka's PartitionMove): the replicas it has (its sources, which serve
# the new ones as leader) and the replicas it gains (its destinations, which follow).
Move = tuple[frozenset[int], frozenset[int]]
ConfigOps = dict[ConfigResource, list[AlterConfigOp]]


def move_map(
    ongoing: Ongoing,
    targets: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
) -> dict[TopicPartition, Move]:
    """Kafka's calculateProposedMoveMap: the moves in progress (from their original
    replicas to the ones being added), with the file's partitions over them (a partition
    being moved keeps its original replicas as sources)."""
    moves: dict[TopicPartition, Move] = {}
    for moving, r in ongoing.items():
        adding = frozenset(r["adding"])
        moves[moving] = (frozenset(r["replicas"]) - adding, adding)
    for tp, replicas in targets.items():
        sources = moves[tp][0] if tp in moves else frozenset(current[tp])
        moves[tp] = (sources, frozenset(replicas) - sources)
    return moves


def throttle_configs(moves: Mapping[TopicPartition, Move], rate: int) -> ConfigOps:
    """Kafka's modifyReassignmentThrottle: per topic, leader.replication.throttled.replicas
    = every partition's sources and follower.replication.throttled.replicas = its
    destinations (partition:broker pairs); the two rates on every broker of a move."""
    ops: ConfigOps = {}
    for topic in sorted({t for t, _ in moves}):
        parts = sorted((p, move) for (t, p), move in moves.items() if t == topic)
        leaders = ",".join(f"{p}:{b}" for p, (sources, _) in parts for b in sorted(sources))
        followers = ",".join(f"{p}:{b}" for p, (_, dests) in parts for b in sorted(dests))
        ops[ConfigResource("topic", topic)] = [
            AlterConfigOp(LEADER_REPLICAS, leaders),
            AlterConfigOp(FOLLOWER_REPLICAS, followers),
        ]
    brokers = {b for sources, dests in moves.values() for b in sources | dests}
    for broker in sorted(brokers):
        ops[ConfigResource("broker", str(broker))] = [
            AlterConfigOp(LEADER_RATE, str(rate)),
            AlterConfigOp(FOLLOWER_RATE, str(rate)),
        ]
    return ops


def clear_throttles(
    admin: AdminClient, topics: Iterable[str], brokers: Iterable[int], out: Out
) -> None:
    """Kafka's clearAllThrottles: the rates off every broker given, the throttled replicas
    off every topic given."""
    ids, names = sorted(set(brokers)), sorted(set(topics))
    out(f"Clearing broker-level throttles on broker{_s(ids)} {','.join(map(str, ids))}")
    if names:  # the file's topics that exist (a deleted one took its configs with it)
        out(f"Clearing topic-level throttles on topic{_s(names)} {','.join(names)}")
    changes: ConfigOps = {
        ConfigResource("broker", str(b)): [
            AlterConfigOp(k, op_type="DELETE") for k in (LEADER_RATE, FOLLOWER_RATE)
        ]
        for b in ids
    }
    for topic in names:
        changes[ConfigResource("topic", topic)] = [
            AlterConfigOp(k, op_type="DELETE") for k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)
        ]
    admin.incremental_alter_configs(changes)


def _s(items: Sequence[object]) -> str:
    return "" if len(items) == 1 else "s"


# --- the actions -------------------------------------------------------------------------------


def generate(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    wanted = parse_topics_to_move(args.topics_to_move_json_file)
    brokers = parse_broker_list(args.broker_list)
    topics = _describe_topics(admin, wanted)
    for name in wanted:
        if name not in topics:
            raise StromError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} not found.")
    current = _replicas(topics)
    racks = _broker_racks(admin)
    unknown = [b for b in brokers if b not in racks]
    if unknown:
        # Kafka leaves them out and proposes fewer brokers than asked for (or a smaller
        # replication factor's worth of them); a typo deserves to be told instead.
        ids = ",".join(map(str, unknown))
        raise StromError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Unknown broker id{'s' if len(unknown) > 1 else ''} {ids} in --broker-list: the "
            f"registered brokers are {','.join(map(str, sorted(racks)))}.",
        )
    shapes = {
        name: (len(t.partitions), replication_factor(min(t.partitions, key=lambda p: p.partition)))
        for name, t in topics.items()
        if t.partitions
    }
    proposal = propose_assignment(shapes, brokers, None if args.disable_rack_aware else racks)
    for line in generated_assignment(current, proposal):
        out(line)


def execute(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    targets = check_reassignment(parse_reassignment(args.reassignment_json_file))
    ongoing = _ongoing(admin)
    if not args.additional and ongoing:
        raise StromError(ErrorCode.REASSIGNMENT_IN_PROGRESS, EXISTING_REASSIGNMENT)
    registered = _registered_brokers(admin)
    unknown = sorted({b for replicas in targets.values() for b in replicas} - registered)
    if unknown:
        raise StromError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker id {unknown[0]}")
    topics = _describe_topics(admin, (topic for topic, _ in targets))
    for topic, _ in sorted(targets):
        if topic not in topics:
            raise StromError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} not found.")
    current = {tp: r for tp, r in _replicas(topics).items() if tp in targets}
    missing = sorted(set(targets) - set(current))
    if missing:
        raise StromError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "Unable to find partition: " + ", ".join(partition_name(tp) for tp in missing),
        )
    for line in rollback_assignment(current):
        out(line)
    if args.throttle is not None and args.throttle >= 0:  # Kafka's default -1: none
        out(VERIFY_PERIODICALLY)
        admin.incremental_alter_configs(
            throttle_configs(move_map(ongoing, targets, current), args.throttle)
        )
        out(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    failure = _alter(admin, targets)
    if failure is not None:
        raise StromError(failure[0], f"Error reassigning partition(s): {failure[1]}")
    out(reassignment_started(targets))


def verify(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    targets = dict(parse_reassignment(args.reassignment_json_file))
    ongoing = set(_ongoing(admin))
    topics = _describe_topics(admin, (topic for topic, _ in targets))
    current = _replicas(topics)
    for line in reassignment_status(targets, ongoing, current):
        out(line)
    done = all(
        tp not in ongoing and list(current.get(tp, ())) == list(targets[tp]) for tp in targets
    )
    if done and not args.preserve_throttles:
        # Kafka clears every registered broker's rates: which brokers an earlier
        # reassignment throttled is not known here.
        clear_throttles(admin, topics, _registered_brokers(admin), out)


def cancel(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    targets = dict(parse_reassignment(args.reassignment_json_file))
    active = sorted(
        tp for tp, r in _ongoing(admin, sorted(targets)).items() if r["adding"] or r["removing"]
    )
    if active:
        failure = _alter(admin, dict.fromkeys(active))
        if failure is not None:
            plural = "" if failure[2] == 1 else "s"
            raise StromError(
                failure[0], f"Error cancelling partition reassignment{plural} for: {failure[1]}"
            )
        out(reassignment_cancelled(active))
    else:
        out("None of the specified partition reassignments are active.")
    out("None of the specified partition moves are active.")
    if not args.preserve_throttles:
        topics = _describe_topics(admin, (topic for topic, _ in targets))
        clear_throttles(admin, topics, _registered_brokers(admin), out)


def list_reassignments(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    for line in reassignments_list(_ongoing(admin)):
        out(line)


def run(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    action = next(a for a in ACTIONS if getattr(args, a))
    {
        "generate": generate,
        "execute": execute,
        "verify": verify,
        "cancel": cancel,
        "list": list_reassignments,
    }[action](admin, args, out)
