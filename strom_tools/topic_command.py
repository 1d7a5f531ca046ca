"""`strom topics`: kafka-topics.sh's --create, --list, --describe, --alter and --delete with
AdminClient (create_topics, describe_topics, create_partitions, delete_topics), as
kafka-topics.sh uses Kafka's Admin.

As in Kafka, --create prints `Created topic T.`, --alter and --delete print nothing on
success, --list prints one name a line, and --topic is a regular expression for every action
but --create; an action on a --topic that matches nothing fails (`Topic 'T' does not exist
as expected`) unless --if-exists is given.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from strom.admin import AdminClient, ConfigResource, NewTopic, TopicDescription
from strom.errors import StromError
from strom_api.error_codes import ErrorCode
from strom_tools.admin_parsing import (
    TopicFilter,
    check_new_topic_counts,
    has_collision_chars,
    parse_replica_assignment,
    parse_topic_configs,
)
from strom_tools.formatting import topic_description

USE_DEFAULT = -1  # NewTopic: the cluster's num.partitions / default.replication.factor
ACTIONS = ("create", "list", "describe", "alter", "delete")

Out = Callable[[str], None]


def usage_problem(args: argparse.Namespace) -> str | None:
    """The option combinations kafka-topics.sh refuses (TopicCommandOptions.checkArgs), as
    a sentence; None when the options fit together."""
    action = next(a for a in ACTIONS if getattr(args, a))

    def only_with(option: str, given: object, allowed: Sequence[str]) -> str | None:
        if given and action not in allowed:
            actions = ", ".join(f"--{a}" for a in allowed)
            return f"option --{option} can only be used with {actions}"
        return None

    if action in ("create", "alter", "delete") and not args.topic:
        return f"--{action} needs --topic"
    if action == "alter" and args.partitions is None:
        return "--alter needs --partitions (the new partition count)"
    if (
        action == "create"
        and args.replica_assignment
        and (args.partitions is not None or args.replication_factor is not None)
    ):
        return "option --replica-assignment can't be used with --partitions or --replication-factor"
    checks = [
        only_with("partitions", args.partitions is not None, ["create", "alter"]),
        only_with("replication-factor", args.replication_factor is not None, ["create"]),
        only_with("replica-assignment", args.replica_assignment, ["create", "alter"]),
        only_with("config", args.config, ["create"]),
        only_with("if-not-exists", args.if_not_exists, ["create"]),
        only_with("if-exists", args.if_exists, ["alter", "delete", "describe"]),
        only_with("under-replicated-partitions", args.under_replicated_partitions, ["describe"]),
        only_with("unavailable-partitions", args.unavailable_partitions, ["describe"]),
        only_with("under-min-isr-partitions", args.under_min_isr_partitions, ["describe"]),
        only_with("at-min-isr-partitions", args.at_min_isr_partitions, ["describe"]),
        only_with("exclude-internal", args.exclude_internal, ["list", "describe"]),
    ]
    return next((c for c in checks if c), None)


def _all_topics(admin: AdminClient, exclude_internal: bool = False) -> dict[str, TopicDescription]:
    return {t.name: t for t in admin.describe_topics() if not (exclude_internal and t.is_internal)}


def _selected(
    admin: AdminClient, args: argparse.Namespace
) -> tuple[list[str], dict[str, TopicDescription]]:
    """The topics --topic names (every topic without it), sorted, after Kafka's
    ensureTopicExists check."""
    topics = _all_topics(admin, getattr(args, "exclude_internal", False))
    names = sorted(topics)
    if args.topic:
        names = TopicFilter(args.topic).select(names)
        if not names and not args.if_exists:
            raise StromError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Topic '{args.topic}' does not exist as expected",
            )
    return names, topics


def create(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    name: str = args.topic
    configs = parse_topic_configs(args.config)
    if has_collision_chars(name):
        out(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or "
            "underscore ('_') could collide. To avoid issues it is best to use either, but "
            "not both."
        )
    check_new_topic_counts(args.partitions, args.replication_factor)
    if args.replica_assignment:
        topic = NewTopic(
            name,
            replica_assignments=parse_replica_assignment(args.replica_assignment),
            topic_configs=configs,
        )
    else:
        topic = NewTopic(
            name,
            num_partitions=USE_DEFAULT if args.partitions is None else args.partitions,
            replication_factor=(
                USE_DEFAULT if args.replication_factor is None else args.replication_factor
            ),
            topic_configs=configs,
        )
    try:
        admin.create_topics([topic])
    except StromError as error:
        if error.name == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            return
        raise
    out(f"Created topic {name}.")


def list_topics(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    names = sorted(_all_topics(admin, args.exclude_internal))
    if args.topic:
        names = TopicFilter(args.topic).select(names)
    for name in names:
        out(name)


def describe(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    names, topics = _selected(admin, args)
    live: frozenset[int] = frozenset()
    if args.unavailable_partitions:
        brokers = admin.describe_cluster()["brokers"]
        live = frozenset(b["node_id"] for b in brokers if not b["fenced"])
    min_isr: dict[str, int] = {}
    if args.under_min_isr_partitions or args.at_min_isr_partitions:
        # Each topic's effective min.insync.replicas (its own, else the brokers' default),
        # as Kafka's tool asks DescribeConfigs for it: one request for every topic.
        described = admin.describe_configs_of(
            (ConfigResource("topic", name) for name in names), ["min.insync.replicas"]
        )
        for resource, configs in described.items():
            value = configs.get("min.insync.replicas")
            min_isr[resource.name] = int(value) if value else 1
    for name in names:
        for line in topic_description(
            topics[name],
            live_brokers=live,
            under_replicated=args.under_replicated_partitions,
            unavailable=args.unavailable_partitions,
            min_isr=min_isr.get(name),
            under_min_isr=args.under_min_isr_partitions,
            at_min_isr=args.at_min_isr_partitions,
        ):
            out(line)


def alter(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    names, topics = _selected(admin, args)
    assignment = (
        parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
    )
    for name in names:
        new: dict[str, list[list[int]]] = {}
        if assignment is not None:
            # As Kafka: the assignment lists every partition; the existing ones are skipped.
            current = len(topics[name].partitions)
            new[name] = [list(assignment[p]) for p in sorted(assignment) if p >= current]
        admin.create_partitions({name: args.partitions}, new)


def delete(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    names, _ = _selected(admin, args)
    if names:
        admin.delete_topics(names)


def run(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    action = next(a for a in ACTIONS if getattr(args, a))
    {
        "create": create,
        "list": list_topics,
        "describe": describe,
        "alter": alter,
        "delete": delete,
    }[action](admin, args, out)
