"""The admin commands of `strom`, after Kafka's tools: `topics` (kafka-topics.sh),
`metadata-quorum` (kafka-metadata-quorum.sh), `cluster` (kafka-cluster.sh), `configs`
(kafka-configs.sh), `leader-election` (kafka-leader-election.sh), `reassign-partitions`
(kafka-reassign-partitions.sh) and `acls` (kafka-acls.sh).

Each runs on AdminClient, as Kafka's tools run on its Admin client, talking to the
controllers named by --bootstrap-controller (Kafka 3.7+'s option), or to the brokers named
by --bootstrap-server, which forward the admin API to the active controller (KIP-590); the
same ControllerService answers on both. Exit codes: 0 on
success, 1 when the operation fails (one line on stderr, `Error while executing <tool>
command : <ERROR_NAME>: <message>`, never a traceback), 2 for a usage error (argparse's, as
for every `strom` command).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

from strom.admin import AdminClient, validate_bootstrap_servers
from strom.client_properties import client_settings
from strom.errors import StromError
from strom_tools import (
    acl_command,
    command_config,
    config_command,
    leader_election_command,
    reassign_command,
    topic_command,
    user_scram_command,
)
from strom_tools.formatting import (
    cluster_description,
    cluster_id_line,
    quorum_replication,
    quorum_status,
)

Out = Callable[[str], None]
AdminAction = Callable[[AdminClient, argparse.Namespace, Out], None]
# How long an admin command waits for an active controller (an election, a controller
# restart fits well inside); the tools have always waited this long.
ADMIN_TIMEOUT_MS = 15_000

_BOOTSTRAP_CONTROLLER_HELP = (
    "comma-separated host:port pairs of controllers (their CONTROLLER listeners), as Kafka's "
    "--bootstrap-controller; id@host:port (as controller.quorum.voters) lets the tool go "
    "straight to the active controller"
)
_BOOTSTRAP_SERVER_HELP = (
    "comma-separated host:port pairs of brokers, which forward admin requests to the active "
    "controller (controllers' addresses work too)"
)


def _addresses(text: str) -> str:
    """The option's text, checked while parsing so that a bad address is a usage error."""
    try:
        validate_bootstrap_servers(text)
    except StromError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    return text


def add_bootstrap_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--bootstrap-controller",
        type=_addresses,
        metavar="HOST:PORT[,...]",
        help=_BOOTSTRAP_CONTROLLER_HELP,
    )
    group.add_argument(
        "--bootstrap-server",
        type=_addresses,
        metavar="HOST:PORT[,...]",
        help=_BOOTSTRAP_SERVER_HELP,
    )
    command_config.add_option(parser)


def run_admin(tool: str, args: argparse.Namespace, action: AdminAction) -> int:
    """Runs `action` with an AdminClient (the client library's one admin stack, as Kafka's
    tools use Admin) on the controllers or brokers given, with --command-config's security;
    any failure becomes Kafka's one line."""
    return _reported(tool, lambda: _with_admin(args, action))


def _with_admin(args: argparse.Namespace, action: AdminAction) -> None:
    with AdminClient(
        bootstrap_servers=args.bootstrap_controller or args.bootstrap_server,
        request_timeout_ms=ADMIN_TIMEOUT_MS,
        **client_settings(args.command_config),
    ) as admin:
        action(admin, args, print)


def _reported(tool: str, run: Callable[[], None]) -> int:
    try:
        run()
    except StromError as error:
        print(
            f"Error while executing {tool} command : {error.name}: {error.message}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # a bug of the tool itself: still one line, no traceback
        print(
            f"Error while executing {tool} command : {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return 1
    return 0


# --- strom topics ------------------------------------------------------------------------------


def _topics(args: argparse.Namespace) -> int:
    problem = topic_command.usage_problem(args)
    if problem is not None:
        args.help_parser.error(problem)
    return run_admin("topic", args, topic_command.run)


def _add_topics(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = commands.add_parser(
        "topics",
        help="create, list, describe, alter and delete topics (as kafka-topics.sh)",
        description="Create, list, describe, alter (add partitions to) and delete topics, "
        "as kafka-topics.sh does.",
    )
    add_bootstrap_options(topics)
    actions = topics.add_mutually_exclusive_group(required=True)
    actions.add_argument("--create", action="store_true", help="create a new topic")
    actions.add_argument("--list", action="store_true", help="list the topics")
    actions.add_argument("--describe", action="store_true", help="describe topics")
    actions.add_argument("--alter", action="store_true", help="add partitions to a topic")
    actions.add_argument("--delete", action="store_true", help="delete topics")
    topics.add_argument(
        "--topic",
        metavar="TOPIC",
        help="the topic to create, alter, describe or delete; a regular expression matched "
        "against whole names except with --create (escape '.' as '\\.' to mean a dot)",
    )
    topics.add_argument(
        "--partitions",
        type=int,
        metavar="N",
        help="the partition count of the topic created (default: the cluster's "
        "num.partitions) or its new partition count with --alter",
    )
    topics.add_argument(
        "--replication-factor",
        type=int,
        metavar="R",
        help="each partition's replica count (default: the cluster's default.replication.factor)",
    )
    topics.add_argument(
        "--replica-assignment",
        metavar="0:1,1:2,...",
        help="the replicas of each partition by hand: partitions separated by ',', each "
        "partition's broker ids by ':' (the first is the preferred leader)",
    )
    topics.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config of the topic created (repeat for more)",
    )
    topics.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="with --describe: only partitions whose ISR is smaller than their replicas",
    )
    topics.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="with --describe: only partitions without a live leader",
    )
    topics.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="with --describe: only partitions whose ISR is smaller than min.insync.replicas",
    )
    topics.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="with --describe: only partitions whose ISR is exactly min.insync.replicas",
    )
    topics.add_argument(
        "--exclude-internal",
        action="store_true",
        help="with --list or --describe: leave out internal topics (__consumer_offsets)",
    )
    topics.add_argument(
        "--if-exists",
        action="store_true",
        help="with --alter, --delete or --describe: do nothing when no topic matches",
    )
    topics.add_argument(
        "--if-not-exists",
        action="store_true",
        help="with --create: do nothing when the topic exists already",
    )
    topics.set_defaults(handler=_topics, help_parser=topics)


# --- strom metadata-quorum ---------------------------------------------------------------------


def _describe_quorum(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    quorum = admin.describe_metadata_quorum()
    if args.status:
        lines = quorum_status(admin.describe_cluster()["cluster_id"], quorum)
    else:
        now_ms = time.time_ns() // 1_000_000
        lines = quorum_replication(quorum, human_readable=args.human_readable, now_ms=now_ms)
    for line in lines:
        out(line)


def _metadata_quorum_describe(args: argparse.Namespace) -> int:
    if args.human_readable and not args.replication:
        args.help_parser.error(
            "The option --human-readable is only supported along with --replication"
        )
    return run_admin("metadata-quorum", args, _describe_quorum)


def _add_metadata_quorum(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    quorum = commands.add_parser(
        "metadata-quorum",
        help="describe the KRaft metadata quorum (as kafka-metadata-quorum.sh)",
        description="Describes the KRaft metadata quorum, as kafka-metadata-quorum.sh does.",
    )
    add_bootstrap_options(quorum)
    quorum_commands = quorum.add_subparsers(dest="quorum_command", metavar="COMMAND")
    describe = quorum_commands.add_parser("describe", help="describe the metadata quorum")
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--status", action="store_true", help="a summary: leader, epoch, high watermark, lag"
    )
    what.add_argument(
        "--replication", action="store_true", help="each voter's and observer's replication"
    )
    describe.add_argument(
        "--human-readable",
        action="store_true",
        help="with --replication: times as 'N ms ago'",
    )
    describe.set_defaults(handler=_metadata_quorum_describe, help_parser=describe)
    quorum.set_defaults(help_parser=quorum)


# --- strom cluster -----------------------------------------------------------------------------


def _cluster_id(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    out(cluster_id_line(admin.describe_cluster()["cluster_id"]))


def _cluster_describe(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    for line in cluster_description(admin.describe_cluster()):
        out(line)


def _add_cluster(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = commands.add_parser(
        "cluster",
        help="the cluster's id, controller and brokers (as kafka-cluster.sh)",
        description="The cluster's id, its active controller and its brokers.",
    )
    cluster_commands = cluster.add_subparsers(dest="cluster_command", metavar="COMMAND")
    for name, action, text in (
        ("cluster-id", _cluster_id, "print the cluster id"),
        ("describe", _cluster_describe, "the cluster id, active controller and brokers"),
    ):
        sub = cluster_commands.add_parser(name, help=text)
        add_bootstrap_options(sub)
        sub.set_defaults(
            handler=lambda args, action=action: run_admin("cluster", args, action),
            help_parser=sub,
        )
    cluster.set_defaults(help_parser=cluster)


# --- strom configs -----------------------------------------------------------------------------


def file_text(path: str) -> str:
    """An option naming a file takes the file's text (read while parsing, so that a file that
    cannot be read is a usage error before anything is asked of the controllers)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise argparse.ArgumentTypeError(f"can't read '{path}': {reason}") from None


def _configs(args: argparse.Namespace) -> int:
    problem = config_command.usage_problem(args)
    if problem is not None:
        args.help_parser.error(problem)
    if config_command.entity(args)[0] == "users":
        return run_admin("config", args, user_scram_command.run)
    return run_admin("config", args, config_command.run)


def _add_configs(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    configs = commands.add_parser(
        "configs",
        help="describe and alter topic and broker configs and users' SCRAM credentials (as "
        "kafka-configs.sh)",
        description="Describe and alter the dynamic configs of topics and brokers, and users' "
        "SCRAM credentials, as kafka-configs.sh does.",
    )
    add_bootstrap_options(configs)
    actions = configs.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list the entity's configs")
    actions.add_argument("--alter", action="store_true", help="change the entity's configs")
    configs.add_argument(
        "--all",
        action="store_true",
        help="with --describe: every config of the entity, static and default ones too",
    )
    configs.add_argument(
        "--entity-type", choices=config_command.ENTITY_TYPES, help="the type of the entity"
    )
    names = configs.add_mutually_exclusive_group()
    names.add_argument(
        "--entity-name", metavar="NAME", help="the entity: a topic name, a broker id or a user"
    )
    names.add_argument(
        "--entity-default",
        action="store_true",
        help="the cluster-wide default of brokers (with --entity-type brokers)",
    )
    configs.add_argument(
        "--topic", metavar="TOPIC", help="--entity-type topics --entity-name TOPIC"
    )
    configs.add_argument("--broker", metavar="ID", help="--entity-type brokers --entity-name ID")
    configs.add_argument(
        "--broker-defaults",
        action="store_true",
        help="--entity-type brokers --entity-default",
    )
    configs.add_argument(
        "--add-config",
        metavar="K=V,...",
        help="configs to set: 'k1=v1,k2=[v1,v2],k3=v3' (square brackets group a value that "
        "holds commas)",
    )
    configs.add_argument(
        "--add-config-file",
        type=file_text,
        metavar="FILE",
        help="a properties file of configs to set",
    )
    configs.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K1,K2",
        help="configs to remove (back to their default)",
    )
    configs.set_defaults(handler=_configs, help_parser=configs)


# --- strom leader-election ---------------------------------------------------------------------


def _leader_election(args: argparse.Namespace) -> int:
    problem = leader_election_command.usage_problem(args)
    if problem is not None:
        args.help_parser.error(problem)
    return run_admin("leader-election", args, leader_election_command.run)


def _add_leader_election(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    election = commands.add_parser(
        "leader-election",
        help="elect partition leaders (as kafka-leader-election.sh)",
        description="Elects new leaders for partitions: their preferred replica, or any "
        "replica for a partition without a leader, as kafka-leader-election.sh does.",
    )
    add_bootstrap_options(election)
    election.add_argument(
        "--election-type",
        required=True,
        type=leader_election_command.election_type,
        metavar="preferred|unclean",
        help="preferred: move leadership to the preferred (first) replica when it is in the "
        "ISR; unclean: give a partition without a leader one, from outside the ISR if need be",
    )
    election.add_argument("--topic", metavar="TOPIC", help="the topic of the partition")
    election.add_argument("--partition", type=int, metavar="P", help="the partition (with --topic)")
    election.add_argument(
        "--all-topic-partitions",
        action="store_true",
        help="every partition of every topic",
    )
    election.add_argument(
        "--path-to-json-file",
        type=file_text,
        metavar="FILE",
        help='the partitions as JSON: {"partitions": [{"topic": "foo", "partition": 1}]}',
    )
    election.set_defaults(handler=_leader_election, help_parser=election)


# --- strom reassign-partitions -----------------------------------------------------------------


def _reassign_partitions(args: argparse.Namespace) -> int:
    problem = reassign_command.usage_problem(args)
    if problem is not None:
        args.help_parser.error(problem)
    return run_admin("reassign-partitions", args, reassign_command.run)


def _add_reassign_partitions(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    reassign = commands.add_parser(
        "reassign-partitions",
        help="move partitions between brokers (as kafka-reassign-partitions.sh)",
        description="Generates, starts, verifies, cancels and lists partition "
        "reassignments, with the JSON files of kafka-reassign-partitions.sh.",
    )
    add_bootstrap_options(reassign)
    actions = reassign.add_mutually_exclusive_group(required=True)
    actions.add_argument(
        "--generate",
        action="store_true",
        help="propose an assignment of the topics to move over the broker list",
    )
    actions.add_argument(
        "--execute", action="store_true", help="start the reassignment of the JSON file"
    )
    actions.add_argument(
        "--verify", action="store_true", help="how the reassignment of the JSON file stands"
    )
    actions.add_argument(
        "--cancel", action="store_true", help="cancel the reassignment of the JSON file"
    )
    actions.add_argument("--list", action="store_true", help="the reassignments in progress")
    reassign.add_argument(
        "--topics-to-move-json-file",
        type=file_text,
        metavar="FILE",
        help='with --generate: {"topics": [{"topic": "foo"}], "version": 1}',
    )
    reassign.add_argument(
        "--broker-list",
        metavar="1,2,3",
        help="with --generate: the brokers to spread the partitions over",
    )
    reassign.add_argument(
        "--reassignment-json-file",
        type=file_text,
        metavar="FILE",
        help='{"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": '
        "[1, 2]}]}, as --generate proposes it",
    )
    reassign.add_argument(
        "--additional",
        action="store_true",
        help="with --execute: go ahead although other reassignments are in progress",
    )
    reassign.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES",
        help="with --execute: limit the replication of the moving partitions to BYTES/s "
        "(leader.replication.throttled.rate and follower.replication.throttled.rate on "
        "the brokers involved, the *.replication.throttled.replicas of their topics); "
        "--verify removes the throttle once the reassignment is done",
    )
    reassign.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=int,
        metavar="BYTES",
        help="refused: Strom moves no replica between log directories",
    )
    reassign.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="with --verify or --cancel: keep the replication throttles",
    )
    reassign.add_argument(
        "--disable-rack-aware",
        action="store_true",
        help="with --generate: ignore the brokers' racks",
    )
    reassign.set_defaults(handler=_reassign_partitions, help_parser=reassign)


# --- strom acls --------------------------------------------------------------------------------


def _acls(args: argparse.Namespace) -> int:
    problem = acl_command.usage_problem(args)
    if problem is not None:
        # kafka-acls.sh prints its sentence and exits 1 (CommandLineUtils.printUsageAndExit).
        print(problem, file=sys.stderr)
        return 1
    return run_admin("ACL", args, acl_command.run)


def _add_acls(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    acls = commands.add_parser(
        "acls",
        help="add, remove and list ACLs (as kafka-acls.sh)",
        description="Adds, removes and lists ACLs in the cluster's metadata, as kafka-acls.sh "
        "does.",
    )
    add_bootstrap_options(acls)
    acls.add_argument("--add", action="store_true", help="add the ACLs")
    acls.add_argument("--remove", action="store_true", help="remove the ACLs")
    acls.add_argument("--list", action="store_true", help="list ACLs (of the resources given)")
    acls.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="a topic (repeatable); with PREFIXED a prefix, * for every topic",
    )
    acls.add_argument(
        "--group",
        action="append",
        metavar="GROUP",
        help="a consumer group (repeatable); * for every group",
    )
    acls.add_argument(
        "--transactional-id",
        action="append",
        metavar="ID",
        help="a transactional id (repeatable); * for every one",
    )
    acls.add_argument("--cluster", action="store_true", help="the cluster resource")
    acls.add_argument(
        "--resource-pattern-type",
        metavar="TYPE",
        help="LITERAL (default) or PREFIXED; to list or remove also ANY or MATCH",
    )
    acls.add_argument(
        "--allow-principal",
        action="append",
        metavar="VALUE",
        help="a principal to allow, Type:name, e.g. User:alice (repeatable)",
    )
    acls.add_argument(
        "--deny-principal",
        action="append",
        metavar="VALUE",
        help="a principal to deny, Type:name (repeatable)",
    )
    acls.add_argument(
        "--allow-host",
        action="append",
        metavar="VALUE",
        help="a host the allowed principals may connect from (default *)",
    )
    acls.add_argument(
        "--deny-host",
        action="append",
        metavar="VALUE",
        help="a host the denied principals are denied from (default *)",
    )
    acls.add_argument(
        "--principal",
        action="append",
        metavar="VALUE",
        help="with --list: only this principal's ACLs (repeatable)",
    )
    acls.add_argument(
        "--operation",
        action="append",
        metavar="OP",
        help="an operation (repeatable; default All): Read, Write, Create, Delete, Alter, "
        "Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All",
    )
    acls.add_argument(
        "--producer",
        action="store_true",
        help="Write, Describe, Create on the topics (Write, Describe on transactional ids)",
    )
    acls.add_argument(
        "--idempotent",
        action="store_true",
        help="with --producer: IdempotentWrite on the cluster",
    )
    acls.add_argument(
        "--consumer",
        action="store_true",
        help="Read, Describe on the topics and Read on the groups (needs --group)",
    )
    acls.add_argument("--force", action="store_true", help="remove without asking")
    acls.set_defaults(handler=_acls, help_parser=acls)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _add_topics(commands)
    _add_metadata_quorum(commands)
    _add_cluster(commands)
    _add_configs(commands)
    _add_leader_election(commands)
    _add_reassign_partitions(commands)
    _add_acls(commands)
