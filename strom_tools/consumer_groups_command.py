"""`strom consumer-groups`, after kafka-consumer-groups.sh: --list, --describe (offsets and
lag, --members, --state), --reset-offsets (--to-earliest, --to-latest, --to-offset,
--shift-by, --to-datetime, --by-duration, --from-file; --dry-run or --execute; --export),
--delete and --delete-offsets, through
the brokers named by --bootstrap-server. It runs on AdminClient (the groups, their committed
offsets, list_offsets for the log ends and reset targets), as Kafka's tool runs on its Admin
client, and lays its output out as Kafka's tool does.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime

from strom import TopicPartition
from strom.admin import AdminClient, GroupDescription, OffsetSpec
from strom.client_properties import client_settings
from strom.errors import StromError
from strom_api.error_codes import ErrorCode
from strom_tools import command_config
from strom_tools.tool_logging import log_warnings_to_stderr

Out = Callable[[str], None]


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "consumer-groups", help="list, describe, reset and delete consumer groups"
    )
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT[,...]", help="brokers to connect to"
    )
    command_config.add_option(parser)
    parser.add_argument(
        "--timeout",
        type=int,
        metavar="MS",
        default=30_000,
        help="how long each request to the cluster may take, a coordinator's search included "
        "(default: 30000, the client's request.timeout.ms; Kafka's tool: 5000)",
    )
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list all consumer groups")
    actions.add_argument("--describe", action="store_true", help="describe consumer group(s)")
    actions.add_argument("--reset-offsets", action="store_true", help="reset a group's offsets")
    actions.add_argument("--delete", action="store_true", help="delete consumer group(s)")
    actions.add_argument(
        "--delete-offsets",
        action="store_true",
        help="delete a group's committed offsets of --topic (one group, topics no member uses)",
    )
    parser.add_argument("--group", action="append", default=[], help="the group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every group")
    parser.add_argument("--members", action="store_true", help="with --describe: members")
    parser.add_argument(
        "--offsets", action="store_true", help="with --describe: offsets and lag (the default)"
    )
    parser.add_argument("--state", action="store_true", help="with --describe/--list: state")
    parser.add_argument("--verbose", action="store_true", help="with --members: assignments")
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        help="with --reset-offsets or --delete-offsets: topic or topic:0,1,2 (repeatable)",
    )
    parser.add_argument("--all-topics", action="store_true", help="every topic the group has")
    scopes = parser.add_mutually_exclusive_group()
    scopes.add_argument(
        "--to-earliest", action="store_true", help="reset offsets to the earliest offset"
    )
    scopes.add_argument("--to-latest", action="store_true", help="reset offsets to the latest")
    scopes.add_argument(
        "--to-current", action="store_true", help="reset offsets to the current (committed) ones"
    )
    scopes.add_argument("--to-offset", type=int, help="reset offsets to this offset")
    scopes.add_argument(
        "--shift-by", type=int, metavar="N", help="shift the current offsets by N (may be < 0)"
    )
    scopes.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="reset offsets to the first record at or after this time (local time without a zone)",
    )
    scopes.add_argument(
        "--from-file",
        metavar="CSV",
        help="reset offsets to those of a CSV reset plan, as --export prints it",
    )
    scopes.add_argument(
        "--by-duration",
        metavar="PnDTnHnMnS",
        help="reset offsets to the first record at or after this long ago, e.g. PT10M",
    )
    run = parser.add_mutually_exclusive_group()
    run.add_argument(
        "--dry-run", action="store_true", help="only show the offsets the reset would commit"
    )
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument(
        "--export",
        action="store_true",
        help="with --reset-offsets: print the new offsets as a CSV reset plan (for --from-file)",
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    log_warnings_to_stderr()  # a broker not reachable is said while the tool waits
    try:
        _check_args(args)
        with AdminClient(
            bootstrap_servers=args.bootstrap_server,
            request_timeout_ms=args.timeout,
            **client_settings(args.command_config),
        ) as admin:
            return _dispatch(admin, args, print)
    except StromError as exc:
        print(
            f"Error while executing consumer-groups command : {exc.name}: {exc.message}",
            file=sys.stderr,
        )
        return 1


def _check_args(args: argparse.Namespace) -> None:
    """Kafka's ConsumerGroupCommandOptions.checkArgs, before anything is asked of the
    cluster: an option the action would not use is refused, never dropped (a --delete
    naming a --topic deleted the whole group; --group beside --all-groups acted on all)."""

    def refuse(message: str) -> None:
        raise StromError(ErrorCode.INVALID_REQUEST, message)

    actions = ("list", "describe", "reset_offsets", "delete", "delete_offsets")
    action = next(a for a in actions if getattr(args, a))
    flag = "--" + action.replace("_", "-")
    if args.describe and sum((args.members, args.offsets, args.state)) > 1:
        refuse(
            "Option --describe takes at most one of these options: --members, --offsets, --state"
        )
    if args.delete and args.topic:
        refuse(
            "The consumer does not support topic-specific offset deletion from a consumer group."
        )
    if args.timeout <= 0:
        refuse(f"--timeout must be a positive number of milliseconds, not {args.timeout}")
    if args.group and args.all_groups:
        refuse("Option --group can't be used with option --all-groups")
    if args.group and args.list:
        refuse("Option --group can't be used with option --list")
    if args.topic and (args.list or args.describe):
        refuse(f"Option --topic can't be used with option {flag}")
    if args.export and not args.reset_offsets:
        refuse(f"Option --export can't be used with option {flag}")
    if args.from_file and (args.topic or args.all_topics):
        # Kafka's tool takes the plan's partitions and drops --topic unsaid
        refuse("Option --from-file can't be used with option --topic or --all-topics")
    if args.reset_offsets and not (args.from_file or args.topic or args.all_topics):
        refuse("Option --reset-offsets takes one of these options: --topic, --all-topics")
    if args.delete_offsets:
        if len(args.group) != 1 or not args.topic:
            refuse("Option --delete-offsets takes the following options: --group, --topic")
        if args.all_topics:
            refuse("Option --all-topics can't be used with option --delete-offsets")


def _groups(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_consumer_groups()]
    if not args.group:
        raise StromError(ErrorCode.INVALID_REQUEST, "--group or --all-groups is required")
    return list(args.group)


def _dispatch(admin: AdminClient, args: argparse.Namespace, out: Out) -> int:
    if args.list:
        groups = admin.list_consumer_groups()
        if args.state:
            width = max([15, *(len(g.group_id) for g in groups)])
            out(f"{'GROUP':<{width}} STATE")
            for g in groups:
                out(f"{g.group_id:<{width}} {g.state}")
        else:
            for g in groups:
                out(g.group_id)
        return 0
    if args.describe:
        missing = [g for g in _groups(admin, args) if not _describe(admin, g, args, out)]
        for group in missing:
            # Kafka's wording; as Kafka 4's tool (GroupIdNotFoundException) the exit is 1.
            print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
        return 1 if missing else 0
    if args.delete:
        return _delete(admin, _groups(admin, args), out)
    if args.delete_offsets:
        return _delete_offsets(admin, args.group[0], args.topic, out)
    return _reset(admin, args, out)


def _table(rows: list[list[str]], widths: list[int], out: Out) -> None:
    for row in rows:
        cells = [f"{cell:<{w}}" for cell, w in zip(row[:-1], widths, strict=False)]
        out(" ".join([*cells, row[-1]]).rstrip())


def _describe(admin: AdminClient, group_id: str, args: argparse.Namespace, out: Out) -> bool:
    """Prints the group; False when it does not exist."""
    [description] = admin.describe_consumer_groups([group_id])
    if description.state == "Dead":
        return False
    if args.state:
        coordinator = description.coordinator_address or "?"
        width = max(15, len(group_id))
        out("")
        _table(
            [
                ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                [
                    group_id,
                    f"{coordinator} ({description.coordinator})",
                    description.protocol or "",
                    description.state,
                    str(len(description.members)),
                ],
            ],
            [width, 25, 20, 20],
            out,
        )
        return True
    if not description.members:
        out("")
        out(f"Consumer group '{group_id}' has no active members.")
    if args.members:
        _describe_members(description, args.verbose, out)
        return True
    owner = {tp: m for m in description.members for tp in m.assignment}
    committed = admin.list_consumer_group_offsets(group_id)
    partitions = sorted(set(committed) | set(owner))
    log_ends = _log_end_offsets(admin, partitions)
    header = [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    rows = []
    for tp in partitions:
        current, log_end = committed.get(tp), log_ends.get(tp)
        lag = None if current is None or log_end is None else max(log_end - current, 0)
        member = owner.get(tp)
        rows.append(
            [
                group_id,
                tp.topic,
                str(tp.partition),
                _or_dash(current),
                _or_dash(log_end),
                _or_dash(lag),
                member.member_id if member else "-",
                f"/{member.host}" if member else "-",
                member.client_id if member else "-",
            ]
        )
    widths = _widths([header, *rows], {0: 15, 1: 15, 2: 10, 3: 15, 4: 15, 5: 15, 6: 15, 7: 15})
    out("")
    _table([header, *rows], widths, out)
    return True


def _log_end_offsets(
    admin: AdminClient, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """Each partition's log end offset (its high watermark); as in Kafka's tool, a partition
    whose topic is gone (committed offsets outlive their topic) has none and shows "-"."""
    if not partitions:
        return {}
    counts = {t.name: len(t.partitions) for t in admin.describe_topics()}
    known = [tp for tp in partitions if tp.partition < counts.get(tp.topic, 0)]
    found = admin.list_offsets(dict.fromkeys(known, OffsetSpec.latest())) if known else {}
    return {tp: info.offset for tp, info in found.items()}


def _describe_members(description: GroupDescription, verbose: bool, out: Out) -> None:
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        header.append("ASSIGNMENT")
    rows = []
    for m in description.members:
        row = [description.group_id, m.member_id, f"/{m.host}", m.client_id, str(len(m.assignment))]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(m.assignment):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            row.append(
                ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items()) or "-"
            )
        rows.append(row)
    out("")
    _table([header, *rows], _widths([header, *rows], {0: 15, 1: 15, 2: 15, 3: 15, 4: 12}), out)


def _widths(rows: list[list[str]], minimum: dict[int, int]) -> list[int]:
    return [max([minimum.get(i, 0), *(len(r[i]) for r in rows)]) for i in range(len(rows[0]) - 1)]


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def _delete(admin: AdminClient, groups: list[str], out: Out) -> int:
    failed = {}
    for group in groups:
        try:
            admin.delete_consumer_groups([group])
        except StromError as exc:
            failed[group] = f"{exc.name}: {exc.message}"
    done = [g for g in groups if g not in failed]
    if done:
        names = ", ".join(f"'{g}'" for g in done)
        out(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        print("Error: Deletion of some consumer groups failed:", file=sys.stderr)
        for group, why in failed.items():
            print(f"* Group '{group}' could not be deleted due to: {why}", file=sys.stderr)
        return 1
    return 0


def _delete_offsets(admin: AdminClient, group: str, topics: list[str], out: Out) -> int:
    """Kafka's --delete-offsets: a topic named without partitions stands for all of them; a
    topic that cannot be described is listed with its error ("Not Provided" partition), as
    Kafka's tool lists it. The exit is 1 when anything was kept (Kafka's tool exits 0)."""
    errors: dict[TopicPartition, str | None] = {}
    partitions: list[TopicPartition] = []
    for spec in topics:
        topic, numbers = _topic_spec(spec)
        if numbers is not None:
            partitions += [TopicPartition(topic, p) for p in numbers]
            continue
        try:
            partitions += _partitions_of(admin, topic)
        except StromError as exc:
            errors[TopicPartition(topic, -1)] = exc.message
    group_error = None
    if partitions:
        try:
            deleted = admin.delete_consumer_group_offsets(group, partitions)
        except StromError as exc:
            group_error = exc
            deleted = {tp: exc for tp in partitions}
        for tp, kept in deleted.items():
            errors[tp] = None if kept is None else kept.message
    if group_error is None and not any(errors.values()):
        out(f"Request succeed for deleting offsets from group {group}.")
    elif group_error is not None:
        print(f"Error: {group_error.name}: {group_error.message}", file=sys.stderr)
    else:
        print(
            "Error: Encounter some partition level error, see the follow-up details:",
            file=sys.stderr,
        )
    out("")
    rows = [["TOPIC", "PARTITION", "STATUS"]]
    for tp, error in sorted(errors.items()):
        rows.append(
            [
                tp.topic,
                str(tp.partition) if tp.partition >= 0 else "Not Provided",
                "Successful" if error is None else f"Error: {error}",
            ]
        )
    _table(rows, [30, 15], out)
    return 0 if group_error is None and not any(errors.values()) else 1


def _reset(admin: AdminClient, args: argparse.Namespace, out: Out) -> int:
    """Each group's new offsets (--dry-run, or committed with --execute), as one table or
    with --export as Kafka's CSV reset plan; --from-file takes such a plan. A group that
    cannot be reset (active, a --shift-by with nothing committed) is said on stderr and
    the others go on, as in Kafka's tool; the exit is then 1 (Kafka's is 0)."""
    scopes = (
        args.to_earliest,
        args.to_latest,
        args.to_current,
        args.to_offset is not None,
        args.shift_by is not None,
        args.to_datetime,
        args.by_duration,
        args.from_file,
    )
    if not any(scopes):
        raise StromError(
            ErrorCode.INVALID_REQUEST,
            "One of the reset scopes should be defined: --to-datetime, --by-duration, "
            "--to-earliest, --to-latest, --shift-by, --from-file, --to-offset, --to-current.",
        )
    single = len(args.group) == 1  # Kafka's test for the CSV layouts: one --group named
    # Parsed before anything is asked of the cluster.
    plan = _read_plan(args.from_file, args.group[0] if single else None) if args.from_file else None
    when = None
    if args.to_datetime:
        when = _datetime_ms(args.to_datetime)
    elif args.by_duration:
        when = int(time.time() * 1000) - _duration_ms(args.by_duration)
    if not args.execute and not args.dry_run:
        print(
            "WARN: No action will be performed as the --execute option is missing. In a future "
            "major release, the default behavior of this command will be to prompt the user "
            "before executing the reset rather than doing a dry run. You should add the "
            "--dry-run option explicitly if you are scripting this command and want to keep "
            "the current default behavior without prompting.",
            file=sys.stderr,
        )
    targets: dict[str, dict[TopicPartition, int]] = {}
    failed = False
    for group in _groups(admin, args):
        try:
            targets[group] = _reset_group(admin, args, group, plan, when)
        except StromError as exc:
            print(f"Error: {exc.message}", file=sys.stderr)
            failed = True
    rows = [
        (group, tp, offset)
        for group, target in targets.items()
        for tp, offset in sorted(target.items())
    ]
    if args.export:
        for group, tp, offset in rows:
            fields = [tp.topic, str(tp.partition), str(offset)]
            out(",".join(fields if single else [group, *fields]))
    elif rows:
        out("")
        _table(
            [
                ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                *([group, tp.topic, str(tp.partition), str(offset)] for group, tp, offset in rows),
            ],
            [30, 30, 10],
            out,
        )
    return 1 if failed else 0


def _reset_group(
    admin: AdminClient,
    args: argparse.Namespace,
    group: str,
    plan: dict[str, dict[TopicPartition, int]] | None,
    when: int | None,
) -> dict[TopicPartition, int]:
    """One group's new offsets, committed with --execute."""
    [description] = admin.describe_consumer_groups([group])
    if description.state not in ("Empty", "Dead"):
        raise StromError(
            ErrorCode.INVALID_REQUEST,
            f"Assignments can only be reset if the group '{group}' is inactive, but the "
            f"current state is {description.state}.",
        )
    if plan is not None and group not in plan:
        raise StromError(ErrorCode.INVALID_REQUEST, f"No reset plan for group {group} found")
    if description.state == "Dead":
        # Kafka 4 resets a group it does not know as an inactive one: the commit creates it
        # (a way to pre-seed offsets before the first consumer starts). Strom does the same,
        # but says so, because a mistyped --group otherwise creates a phantom group silently.
        print(
            f"Consumer group '{group}' does not exist: "
            + (
                "it is created with these offsets."
                if args.execute
                else "--execute would create it with these offsets."
            ),
            file=sys.stderr,
        )
    committed = admin.list_consumer_group_offsets(group)
    tps = sorted(plan[group]) if plan is not None else _partitions(admin, args, committed)
    earliest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.earliest()))
    latest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.latest()))
    found = {}
    if when is not None:
        found = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.for_timestamp(when)))
    target: dict[TopicPartition, int] = {}
    for tp in tps:
        low, high = earliest[tp].offset, latest[tp].offset
        current = committed.get(tp)
        if plan is not None:
            new = plan[group][tp]
        elif args.to_earliest:
            new = low
        elif args.to_latest:
            new = high
        elif args.to_current:
            new = high if current is None else current  # Kafka: the log end when none
        elif args.to_offset is not None:
            new = args.to_offset
        elif args.shift_by is not None:
            if current is None:
                raise StromError(
                    ErrorCode.INVALID_REQUEST,
                    f"Cannot shift offset for partition {tp.topic}-{tp.partition} since there "
                    "is no current committed offset",
                )
            new = current + args.shift_by
        else:
            offset = found[tp].offset
            new = offset if offset >= 0 else high
        target[tp] = min(max(new, low), high)  # Kafka clamps to the log's range
        if target[tp] != new and (
            plan is not None or args.to_offset is not None or args.shift_by is not None
        ):
            # Kafka's checkOffsetsRange warns of an offset asked for outside the log
            side = "higher than latest" if new > high else "lower than earliest"
            print(
                f"WARN New offset ({new}) is {side} offset for topic partition "
                f"{tp.topic}-{tp.partition}. Value will be set to {target[tp]}",
                file=sys.stderr,
            )
    if args.execute:
        admin.alter_consumer_group_offsets(group, target)
    return target


def _read_plan(path: str, group: str | None) -> dict[str, dict[TopicPartition, int]]:
    """Kafka's reset plan (what --export printed): `topic,partition,offset` lines when one
    --group is named and the first line has three fields, else `group,topic,partition,offset`."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f.read().splitlines() if line.strip()]
    except OSError as exc:
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"cannot read --from-file {path}: {exc.strerror}"
        ) from None
    no_group = group is not None and bool(lines) and len(lines[0].split(",")) == 3
    plan: dict[str, dict[TopicPartition, int]] = {}
    for number, line in enumerate(lines, 1):
        fields = [field.strip() for field in line.split(",")]
        try:
            if no_group and len(fields) == 3:
                owner, (topic, partition, offset) = group, fields
            elif not no_group and len(fields) == 4:
                owner, topic, partition, offset = fields
            else:
                raise ValueError(line)
            tp = TopicPartition(topic, int(partition))
            plan.setdefault(str(owner), {})[tp] = int(offset)
        except ValueError:
            layout = "topic,partition,offset" if no_group else "group,topic,partition,offset"
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                f"--from-file {path} line {number}: expected {layout}, not '{line}'",
            ) from None
    return plan


def _partitions(
    admin: AdminClient, args: argparse.Namespace, committed: dict[TopicPartition, int]
) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)  # the partitions it committed, as Kafka's tool takes them
    if not args.topic:
        raise StromError(
            ErrorCode.INVALID_REQUEST, "--topic or --all-topics is required with --reset-offsets"
        )
    out: list[TopicPartition] = []
    for spec in args.topic:
        topic, numbers = _topic_spec(spec)
        if numbers is not None:
            out += [TopicPartition(topic, p) for p in numbers]
        else:
            out += _partitions_of(admin, topic)
    return out


def _topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """--topic's `topic` (None: all its partitions) or `topic:0,1,2`."""
    topic, _, parts = spec.partition(":")
    if not parts:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",")]
    except ValueError:
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"--topic {spec}: partitions must be numbers"
        ) from None


def _partitions_of(admin: AdminClient, topic: str) -> list[TopicPartition]:
    """The topic's partitions (UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist)."""
    [described] = admin.describe_topics([topic])
    return [
        TopicPartition(topic, p.partition)
        for p in sorted(described.partitions, key=lambda p: p.partition)
    ]


def _datetime_ms(text: str) -> int:
    for fmt in (
        "%Y-%m-%dT%H:%M:%S.%f%z",
        "%Y-%m-%dT%H:%M:%S.%f",
        "%Y-%m-%dT%H:%M:%S%z",
        "%Y-%m-%dT%H:%M:%S",
    ):
        try:
            value = datetime.strptime(text, fmt)
        except ValueError:
            continue
        if value.tzinfo is None:
            value = value.astimezone()  # Kafka reads a time without a zone as local time
        return int(value.timestamp() * 1000)
    raise StromError(
        ErrorCode.INVALID_REQUEST, f"--to-datetime {text}: expected YYYY-MM-DDTHH:mm:SS.sss"
    )


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def _duration_ms(text: str) -> int:
    match = _DURATION.match(text)
    if match is None or text in ("P", "PT"):
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"--by-duration {text}: expected PnDTnHnMnS, e.g. PT10M"
        )
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)
