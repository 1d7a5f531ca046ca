"""`strom console-producer` and `strom console-consumer`, after Kafka's console tools.

    strom console-producer --bootstrap-server B --topic T [--property parse.key=true
        --property key.separator=:] [--producer-property acks=all]
    strom console-consumer --bootstrap-server B --topic T [--group G] [--from-beginning]
        [--max-messages N] [--timeout-ms MS] [--partition P [--offset O|earliest|latest]]
        [--property print.key=true --property print.offset=true ...]

The producer sends one record per line of standard input; the consumer prints one line per
record, formatted as Kafka's DefaultMessageFormatter (CreateTime:ts, Partition:p,
Offset:o, key, value, tab-separated), and "Processed a total of N messages" on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from strom.consumer import Consumer, TopicPartition
from strom.errors import StromError
from strom.producer import Producer

# --producer-property names Kafka users type, to the Producer's keyword arguments.
_PRODUCER_KEYS: dict[str, Callable[[str], Any]] = {
    "acks": str,
    "linger.ms": int,
    "batch.size": int,
    "compression.type": str,
    "retries": int,
    "delivery.timeout.ms": int,
    "request.timeout.ms": int,
    "enable.idempotence": lambda v: v.lower() == "true",
    "max.request.size": int,
    "max.block.ms": int,
    "buffer.memory": int,
    "max.in.flight.requests.per.connection": int,
    "retry.backoff.ms": int,
    "reconnect.backoff.ms": int,
    "reconnect.backoff.max.ms": int,
    "client.id": str,
}


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    producer = commands.add_parser("console-producer", help="send lines of stdin as records")
    producer.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    producer.add_argument("--topic", required=True)
    producer.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="parse.key, key.separator, ignore.error",
    )
    producer.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE")
    producer.set_defaults(handler=produce)

    consumer = commands.add_parser("console-consumer", help="print records as lines")
    consumer.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    consumer.add_argument("--topic", required=True)
    consumer.add_argument("--group")
    consumer.add_argument("--from-beginning", action="store_true")
    consumer.add_argument("--max-messages", type=int)
    consumer.add_argument("--timeout-ms", type=int, help="exit after this long without records")
    consumer.add_argument("--partition", type=int)
    consumer.add_argument("--offset", default="latest", help="a number, earliest or latest")
    consumer.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="print.key, print.offset, print.partition, print.timestamp, "
        "print.headers, print.value, key.separator",
    )
    consumer.set_defaults(handler=consume)


def _properties(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise StromError("INVALID_CONFIG", f"property '{item}' is not KEY=VALUE")
        out[key.strip()] = value
    return out


def _fail(tool: str, exc: StromError) -> int:
    print(f"Error while executing {tool} command : {exc.name}: {exc.message}", file=sys.stderr)
    return 1


def produce(args: argparse.Namespace) -> int:
    try:
        props = _properties(args.property)
        config: dict[str, Any] = {}
        for name, value in _properties(args.producer_property).items():
            if name not in _PRODUCER_KEYS:
                raise StromError("INVALID_CONFIG", f"unknown producer property '{name}'")
            config[name.replace(".", "_")] = _PRODUCER_KEYS[name](value)
        parse_key = props.get("parse.key", "false").lower() == "true"
        separator = props.get("key.separator", "\t")
        failures: list[BaseException] = []
        with Producer(args.bootstrap_server, **config) as producer:
            for line in sys.stdin:
                text = line.rstrip("\n")
                key: bytes | None = None
                if parse_key:
                    if separator not in text:
                        raise StromError(
                            "INVALID_RECORD",
                            f"No key separator found on line: {text}",
                        )
                    key_text, text = text.split(separator, 1)
                    key = key_text.encode()
                future = producer.send(args.topic, text.encode(), key=key)
                future.add_errback(failures.append)
            producer.flush()
        if failures:
            first = failures[0]
            if isinstance(first, StromError):
                raise first
            raise StromError("UNKNOWN_SERVER_ERROR", str(first))
        return 0
    except StromError as exc:
        return _fail("console-producer", exc)


def consume(args: argparse.Namespace) -> int:
    count = 0
    try:
        props = _properties(args.property)

        def flag(name: str, default: str = "false") -> bool:
            return props.get(name, default).lower() == "true"

        separator = props.get("key.separator", "\t")
        timeout_ms = args.timeout_ms if args.timeout_ms is not None else float("inf")
        consumer = Consumer(
            bootstrap_servers=args.bootstrap_server,
            group_id=args.group,
            auto_offset_reset="earliest" if args.from_beginning else "latest",
            consumer_timeout_ms=timeout_ms,
        )
        with consumer:
            if args.partition is not None:
                tp = TopicPartition(args.topic, args.partition)
                consumer.assign([tp])
                if args.offset == "earliest" or args.from_beginning:
                    consumer.seek_to_beginning(tp)
                elif args.offset != "latest":
                    consumer.seek(tp, int(args.offset))
            else:
                consumer.subscribe([args.topic])
            for record in consumer:
                fields = []
                if flag("print.timestamp"):
                    kind = "LogAppendTime" if record.timestamp_type else "CreateTime"
                    fields.append(f"{kind}:{record.timestamp}")
                if flag("print.partition"):
                    fields.append(f"Partition:{record.partition}")
                if flag("print.offset"):
                    fields.append(f"Offset:{record.offset}")
                if flag("print.headers"):
                    headers = ",".join(
                        f"{k}:{(v or b'').decode(errors='replace')}" for k, v in record.headers
                    )
                    fields.append(headers or "NO_HEADERS")
                line = "\t".join(fields)
                if flag("print.key"):
                    key = "null" if record.key is None else record.key.decode(errors="replace")
                    line = f"{line}\t{key}" if line else key
                if flag("print.value", "true"):
                    value = (
                        "null" if record.value is None else record.value.decode(errors="replace")
                    )
                    # key.separator goes between key and value; a tab between other fields.
                    joint = separator if flag("print.key") else ("\t" if line else "")
                    line = f"{line}{joint}{value}"
                print(line, flush=True)
                count += 1
                if args.max_messages is not None and count >= args.max_messages:
                    break
    except StromError as exc:
        return _fail("console-consumer", exc)
    except KeyboardInterrupt:
        pass
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
