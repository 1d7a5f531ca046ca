"""`strom get-offsets`, after kafka-get-offsets.sh (GetOffsetShell): each matching partition's
offset at --time (latest, earliest, max-timestamp or a time in ms), one `topic:partition:offset`
line each, sorted, through AdminClient.list_offsets.

    strom get-offsets --bootstrap-server B [--topic REGEX] [--partitions 0,1] [--time -2]
    strom get-offsets --bootstrap-server B --topic-partitions 'orders:0-3,audit,logs.*:5-'

Topic patterns are Kafka's IncludeList regular expressions (admin_parsing.TopicFilter).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable

from strom import TopicPartition
from strom.admin import AdminClient, OffsetSpec
from strom.client_properties import client_settings
from strom.errors import StromError
from strom_api.error_codes import ErrorCode
from strom_tools import command_config
from strom_tools.admin_parsing import TopicFilter

TIMES = (
    "-1 or latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local / "
    "-5 or latest-tiered"
)
# Kafka's topic-partition pattern: an optional topic regex, then a partition, a range
# (lower inclusive, upper exclusive), an open lower or upper bound, or nothing (all).
_PATTERN = re.compile(r"^([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?$")

Selects = Callable[[str, int], bool]


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "get-offsets", help="print partitions' offsets at a time (as kafka-get-offsets.sh)"
    )
    command_config.add_connection_options(parser)
    parser.add_argument(
        "--topic-partitions",
        metavar="topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3",
        help="topic-partition patterns: a topic regex (empty: any), then a partition, a range "
        "(upper exclusive) or an open bound; not with --topic or --partitions",
    )
    parser.add_argument("--topic", help="the topic, a regular expression (default: all topics)")
    parser.add_argument("--partitions", metavar="0,1,2", help="the partitions (default: all)")
    parser.add_argument(
        "--time", default="latest", help=f"<timestamp in ms> / {TIMES} (default: latest)"
    )
    parser.add_argument(
        "--exclude-internal-topics", action="store_true", help="leave out __consumer_offsets"
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    try:
        selects = _filter(args)
        spec = _spec(args.time)
        with AdminClient(args.bootstrap_server, **client_settings(args.command_config)) as admin:
            chosen = sorted(
                TopicPartition(t.name, p.partition)
                for t in admin.describe_topics()
                if not (args.exclude_internal_topics and t.is_internal)
                for p in t.partitions
                if selects(t.name, p.partition)
            )
            if not chosen:
                raise StromError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "Could not match any topic-partitions with the specified filters",
                )
            found = {} if spec is None else admin.list_offsets(dict.fromkeys(chosen, spec))
    except StromError as exc:
        print(
            f"Error while executing get-offsets command : {exc.name}: {exc.message}",
            file=sys.stderr,
        )
        return 1
    for tp in chosen:
        info = found.get(tp)
        if info is not None and info.offset >= 0:  # Kafka prints nothing for no offset
            print(f"{tp.topic}:{tp.partition}:{info.offset}")
    return 0


def _spec(text: str) -> OffsetSpec | None:
    """--time as an OffsetSpec; None for latest-tiered, which no partition has (Strom keeps
    no tiered storage, so Kafka's broker would answer no offset for each)."""
    named = {
        "latest": OffsetSpec.latest,
        "-1": OffsetSpec.latest,
        "earliest": OffsetSpec.earliest,
        "-2": OffsetSpec.earliest,
        "max-timestamp": OffsetSpec.max_timestamp,
        "-3": OffsetSpec.max_timestamp,
        # without tiered storage the local log start is the log start
        "earliest-local": OffsetSpec.earliest,
        "-4": OffsetSpec.earliest,
    }
    key = text.strip().lower()
    if key in named:
        return named[key]()
    if key in ("latest-tiered", "-5"):
        return None
    try:
        return OffsetSpec.for_timestamp(int(key))
    except (ValueError, StromError):
        raise StromError(
            ErrorCode.INVALID_REQUEST,
            f"Malformed time argument {text}. Please use {TIMES}, or a specified long format "
            "timestamp",
        ) from None


def _filter(args: argparse.Namespace) -> Selects:
    if args.topic_partitions is not None:
        if args.topic is not None or args.partitions is not None:
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                "--topic-partitions cannot be used with --topic or --partitions",
            )
        patterns = [_pattern(p) for p in args.topic_partitions.split(",")]
        return lambda topic, partition: any(p(topic, partition) for p in patterns)
    topic = TopicFilter(args.topic or ".*")
    wanted = None if args.partitions is None else _partition_ids(args.partitions)
    return lambda name, partition: topic.matches(name) and (wanted is None or partition in wanted)


def _pattern(text: str) -> Selects:
    match = _PATTERN.match(text.strip())
    if match is None:
        raise StromError(ErrorCode.INVALID_REQUEST, f"Invalid topic-partition pattern: {text}")
    topic = TopicFilter(match.group(1) or ".*")
    single, lower, upper = match.group(2), match.group(3), match.group(4)
    if single:
        number = int(single)
        return lambda name, p: topic.matches(name) and p == number
    low = int(lower) if lower else 0
    high = int(upper) if upper else None
    return lambda name, p: topic.matches(name) and p >= low and (high is None or p < high)


def _partition_ids(text: str) -> set[int]:
    try:
        return {int(p) for p in text.split(",") if p.strip()}
    except ValueError:
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"--partitions {text}: expected partition ids, as 0,1,2"
        ) from None
