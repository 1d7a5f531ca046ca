"""`strom leader-election`: kafka-leader-election.sh with AdminClient.elect_leaders, as
kafka-leader-election.sh uses Kafka's Admin.electLeaders.

`--election-type preferred|unclean` (any case, as Kafka's enum converter) for one partition
(`--topic T --partition P`), the partitions of a JSON file (`--path-to-json-file F`, Kafka's
`{"partitions": [{"topic": "T", "partition": 0}]}`) or every partition
(`--all-topic-partitions`, where the controller leaves out those that needed no election).
Prints Kafka's lines: `Successfully completed leader election (PREFERRED) for partitions
orders-0, orders-1`, `Valid replica already elected for partitions ...`
(ELECTION_NOT_NEEDED) and, per failed partition, `Error completing leader election
(PREFERRED) for partition: orders-2: PREFERRED_LEADER_NOT_AVAILABLE: ...`. As Kafka's tool,
it fails (exit 1) when any partition failed: the error line names the first failure's error
and says how many replicas could not be elected.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from strom.admin import AdminClient
from strom.errors import StromError
from strom_tools.admin_parsing import parse_election_partitions
from strom_tools.formatting import election_lines

ELECTION_TYPES = ("PREFERRED", "UNCLEAN")

Out = Callable[[str], None]


def election_type(text: str) -> str:
    """--election-type's value, case-insensitive as Kafka's EnumConverter."""
    if text.upper() not in ELECTION_TYPES:
        raise argparse.ArgumentTypeError(
            f"invalid election type '{text}' (choose preferred or unclean)"
        )
    return text.upper()


def usage_problem(args: argparse.Namespace) -> str | None:
    """LeaderElectionCommandOptions.validate's checks, as a sentence; None when fine."""
    given = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None]
    if sum(given) != 1:
        return (
            "One and only one of the following options is required: --topic, "
            "--all-topic-partitions, --path-to-json-file"
        )
    if args.topic is not None and args.partition is None:
        return "Missing required option(s): --partition"
    if args.topic is None and args.partition is not None:
        return "Option --partition is only allowed if --topic is used"
    return None


def partitions(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    """The partitions to elect leaders for; None for every partition."""
    if args.all_topic_partitions:
        return None
    if args.path_to_json_file is not None:
        return parse_election_partitions(args.path_to_json_file)
    return [(args.topic, args.partition)]


def run(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    wanted = partitions(args)
    if wanted == []:
        # `{"partitions": []}` elects nothing, as Kafka's tool; AdminClient.elect_leaders
        # reads an empty list as every partition.
        return
    results = admin.elect_leaders(args.election_type, wanted, as_errors=True)
    lines, failed = election_lines(args.election_type, results)
    for line in lines:
        out(line)
    if failed:
        raise StromError(failed[0][1].name, f"{len(failed)} replica(s) could not be elected")
