"""`strom console-producer` and `strom console-consumer`, after Kafka's console tools.

    strom console-producer --bootstrap-server B --topic T [--property parse.key=true
        --property key.separator=:] [--producer-property acks=all]
    strom console-consumer --bootstrap-server B --topic T [--group G] [--from-beginning]
        [--max-messages N] [--timeout-ms MS] [--partition P [--offset O|earliest|latest]]
        [--property print.key=true --property print.offset=true ...]
        [--consumer-property group.id=G --consumer-property max.poll.records=100 ...]

The producer sends one record per line of standard input; the consumer prints one line per
record, formatted as Kafka's DefaultMessageFormatter (CreateTime:ts, Partition:p,
Offset:o, key, value, tab-separated), and "Processed a total of N messages" on stderr.

As Kafka's tools, both log the clients' warnings on stderr while something is wrong (a
broker that cannot be reached, a topic the metadata does not know), each once per cause;
both stop cleanly on SIGINT and SIGTERM alike (Kafka's shutdown hook): the producer sends
what it has read, the consumer leaves its group at once rather than holding its partitions
until its session times out.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from strom import client_properties
from strom.consumer import Consumer, TopicPartition
from strom.errors import StromError
from strom.producer import Producer
from strom_api.error_codes import ErrorCode
from strom_tools import command_config
from strom_tools.line_message_reader import LineMessageReader
from strom_tools.tool_logging import log_warnings_to_stderr

# --producer-property names Kafka users type, to the Producer's keyword arguments.


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    producer = commands.add_parser("console-producer", help="send lines of stdin as records")
    command_config.add_connection_options(producer)
    producer.add_argument("--topic", required=True, help="the topic to send the records to")
    producer.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="how lines are read (repeatable), as Kafka's LineMessageReader: parse.key, "
        "key.separator, parse.headers, headers.delimiter, headers.separator, "
        "headers.key.separator, null.marker, ignore.error",
    )
    producer.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a producer config by its Kafka name (repeatable): "
        + ", ".join(sorted(client_properties.PRODUCER_PROPERTIES)),
    )
    producer.set_defaults(handler=produce)

    consumer = commands.add_parser("console-consumer", help="print records as lines")
    command_config.add_connection_options(consumer)
    consumer.add_argument("--topic", required=True, help="the topic to read")
    consumer.add_argument(
        "--group", help="the consumer group to join (its committed offsets are used)"
    )
    consumer.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset when there is no committed one (else the latest)",
    )
    consumer.add_argument("--max-messages", type=int, help="exit after printing this many records")
    consumer.add_argument(
        "--timeout-ms",
        type=int,
        help="exit after this long without records (a topic not known yet included)",
    )
    consumer.add_argument(
        "--partition", type=int, help="read only this partition (no group assignment)"
    )
    consumer.add_argument(
        "--offset",
        help="with --partition: where to start, a number, earliest or latest (the default)",
    )
    consumer.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="how records are printed (repeatable): print.key, print.offset, print.partition, "
        "print.timestamp, print.headers, print.value (true/false), key.separator, "
        "headers.separator, line.separator, null.literal",
    )
    consumer.add_argument(
        "--consumer.config",
        dest="consumer_config",
        metavar="FILE",
        help="a file of Kafka consumer properties (--consumer-property overrides them)",
    )
    consumer.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a consumer config by its Kafka name (repeatable): "
        + ", ".join(sorted(client_properties.CONSUMER_PROPERTIES)),
    )
    consumer.set_defaults(handler=consume, help_parser=consumer)


def _properties(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise StromError(ErrorCode.INVALID_CONFIG, f"property '{item}' is not KEY=VALUE")
        out[key.strip()] = value
    return out


def _fail(tool: str, exc: StromError) -> int:
    print(f"Error while executing {tool} command : {exc.name}: {exc.message}", file=sys.stderr)
    return 1


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM handled as Ctrl-C is: Kafka's tools close their client in a shutdown hook on
    either."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt()

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def produce(args: argparse.Namespace) -> int:
    log_warnings_to_stderr()
    try:
        props = _properties(args.property)
        config = client_properties.producer_settings(_properties(args.producer_property))
        reader = LineMessageReader(props)
        failures: list[BaseException] = []
        config.update(client_properties.client_settings(args.command_config))
        with _sigterm_as_interrupt(), Producer(args.bootstrap_server, **config) as producer:
            try:
                _send_lines(producer, args.topic, reader, failures)
            except KeyboardInterrupt:
                pass  # Ctrl-C or SIGTERM: what was read is still sent (closing flushes)
            producer.flush()
        if failures:
            first = failures[0]
            if isinstance(first, StromError):
                raise first
            raise StromError(ErrorCode.UNKNOWN_SERVER_ERROR, str(first))
        return 0
    except StromError as exc:
        return _fail("console-producer", exc)
    except KeyboardInterrupt:  # a second Ctrl-C while the last records are sent
        return 0


def _send_lines(
    producer: Producer, topic: str, reader: LineMessageReader, failures: list[BaseException]
) -> None:
    for line in sys.stdin:
        record = reader.read(line.rstrip("\n"))
        future = producer.send(topic, record.value, key=record.key, headers=record.headers)
        future.add_errback(failures.append)


def _usage_problem(args: argparse.Namespace, configured: dict[str, Any]) -> str | None:
    """The option combinations Kafka's ConsoleConsumerOptions refuses, in its words
    (`configured`: the consumer settings of --consumer.config and --consumer-property)."""
    if args.offset is not None and args.from_beginning:
        return "Options from-beginning and offset cannot be specified together."
    if args.offset is not None and args.partition is None:
        return "The partition is required when offset is specified."
    if args.offset is not None and args.offset not in ("earliest", "latest"):
        if not args.offset.isdigit():
            return (
                f"The provided offset value '{args.offset}' is incorrect. Valid values are "
                "'earliest', 'latest', or a non-negative long."
            )
    if args.partition is not None and args.partition < 0:
        return f"The partition must be >= 0, not {args.partition}."
    group = configured.get("group_id")
    if args.group is not None and group is not None and group != args.group:
        return (
            "The group ids provided in different places (directly using '--group', via "
            "'--consumer-property', or via '--consumer.config') do not match. Detected group "
            f"ids: '{args.group}', '{group}'"
        )
    reset = configured.get("auto_offset_reset")
    if args.from_beginning and reset is not None and reset != "earliest":
        return (
            f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
            "as these are mutually exclusive."
        )
    return None


def _partitions_within(
    bootstrap: str, topic: str, timeout_s: float, settings: dict[str, Any]
) -> set[int] | StromError:
    """The topic's partitions, or why they are not known within `timeout_s` (mistyped, or no
    broker reachable): Kafka's console consumer asks its consumer's partitionsFor."""
    try:
        with Consumer(
            bootstrap_servers=bootstrap,
            request_timeout_ms=max(1, int(timeout_s * 1000)),
            **settings,
        ) as consumer:
            return consumer.partitions_for_topic(topic)
    except StromError as exc:
        return exc


def _configured(args: argparse.Namespace) -> dict[str, Any]:
    """The Consumer's settings from --consumer.config, then --consumer-property over them
    (Kafka's order), then --command-config's security ones."""
    settings: dict[str, Any] = {}
    if args.consumer_config is not None:
        settings.update(client_properties.consumer_config_settings(args.consumer_config))
    settings.update(client_properties.consumer_settings(_properties(args.consumer_property)))
    settings.update(client_properties.client_settings(args.command_config))
    return settings


def consume(args: argparse.Namespace) -> int:
    log_warnings_to_stderr()
    try:
        configured = _configured(args)
    except StromError as exc:
        return _fail("console-consumer", exc)
    problem = _usage_problem(args, configured)
    if problem is not None:
        args.help_parser.error(problem)
    printed = [0]
    try:
        with _sigterm_as_interrupt():
            _consume(args, configured, printed)
    except StromError as exc:
        return _fail("console-consumer", exc)
    except KeyboardInterrupt:
        pass  # Ctrl-C or SIGTERM: the consumer was closed (and left its group) on the way
    print(f"Processed a total of {printed[0]} messages", file=sys.stderr)
    return 0


def _consume(args: argparse.Namespace, configured: dict[str, Any], printed: list[int]) -> None:
    """Prints records until --max-messages, --timeout-ms or an interrupt, counting them in
    printed[0]."""
    if args.partition is not None or args.timeout_ms is not None:
        # Kafka's console consumer never waits longer than --timeout-ms, a mistyped topic
        # included; a --partition beyond the topic's count is refused rather than waited on.
        wait_s = args.timeout_ms / 1000 if args.timeout_ms is not None else 30.0
        # how the consumer dials (security_protocol, ssl_*, sasl_*), wherever it was said
        dialing = {k: v for k, v in configured.items() if k.startswith(("security", "ssl", "sasl"))}
        partitions = _partitions_within(args.bootstrap_server, args.topic, wait_s, dialing)
        if isinstance(partitions, StromError):
            if args.timeout_ms is not None:
                return  # Kafka: "Processed a total of 0 messages", the warnings said why
            raise partitions
        if args.partition is not None and args.partition not in partitions:
            raise StromError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {args.partition} of topic '{args.topic}' does not exist "
                f"({len(partitions)} partitions)",
            )
    props = _properties(args.property)
    line_of = _formatter(props)
    line_end = props.get("line.separator", "\n")
    # Kafka's order: the consumer properties, then what the tool's own options say (equal
    # where both are given: _usage_problem refused the rest).
    settings = dict(configured)
    if args.group is not None:
        settings["group_id"] = args.group
    if args.from_beginning:
        settings["auto_offset_reset"] = "earliest"
    settings.setdefault("auto_offset_reset", "latest")
    consumer = Consumer(
        bootstrap_servers=args.bootstrap_server,
        consumer_timeout_ms=args.timeout_ms if args.timeout_ms is not None else float("inf"),
        **settings,
    )
    with consumer:
        if args.partition is not None:
            tp = TopicPartition(args.topic, args.partition)
            consumer.assign([tp])
            if args.offset == "earliest" or args.from_beginning:
                consumer.seek_to_beginning(tp)
            elif args.offset not in (None, "latest"):
                consumer.seek(tp, int(args.offset))
        else:
            consumer.subscribe([args.topic])
        for record in consumer:
            print(line_of(record), end=line_end, flush=True)
            printed[0] += 1
            if args.max_messages is not None and printed[0] >= args.max_messages:
                break


def _formatter(props: dict[str, str]) -> Callable[[Any], str]:
    """A record as Kafka's DefaultMessageFormatter prints it, per the print.* properties:
    key.separator between every two columns, headers joined by headers.separator, and
    null.literal for a null key, value or header value."""

    def flag(name: str, default: str = "false") -> bool:
        return props.get(name, default).lower() == "true"

    separator = props.get("key.separator", "\t")
    headers_separator = props.get("headers.separator", ",")
    null = props.get("null.literal", "null")
    timestamp, partition, offset = (
        flag("print.timestamp"),
        flag("print.partition"),
        flag("print.offset"),
    )
    headers, key, value = flag("print.headers"), flag("print.key"), flag("print.value", "true")

    def text(data: bytes | None) -> str:
        return null if data is None else data.decode(errors="replace")

    def line_of(record: Any) -> str:
        fields = []
        if timestamp:
            kind = "LogAppendTime" if record.timestamp_type else "CreateTime"
            fields.append(f"{kind}:{record.timestamp}")
        if partition:
            fields.append(f"Partition:{record.partition}")
        if offset:
            fields.append(f"Offset:{record.offset}")
        if headers:
            shown = headers_separator.join(f"{k}:{text(v)}" for k, v in record.headers)
            fields.append(shown or "NO_HEADERS")
        if key:
            fields.append(text(record.key))
        if value:
            fields.append(text(record.value))
        return separator.join(fields)

    return line_of
