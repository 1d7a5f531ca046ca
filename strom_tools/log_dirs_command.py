"""`strom log-dirs --describe`, after kafka-log-dirs.sh: each broker's log directories with
the replicas they hold (size, offset lag), asked of every broker (or those of
--broker-list) through AdminClient.describe_log_dirs, printed as Kafka's tool prints them:
two lines of progress, then one line of JSON.

    strom log-dirs --bootstrap-server B --describe [--broker-list 1,2] [--topic-list a,b]
"""

from __future__ import annotations

import argparse
import json
import sys

from strom.admin import AdminClient
from strom.client_properties import client_settings
from strom.errors import StromError
from strom.log_dirs import LogDirDescription
from strom_api.error_codes import ErrorCode
from strom_tools import command_config

# What Kafka's tool prints for a directory's error: the exception class of its error code.
_EXCEPTION_CLASSES = {
    str(ErrorCode.KAFKA_STORAGE_ERROR): "org.apache.kafka.common.errors.KafkaStorageException",
}


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("log-dirs", help="describe the brokers' log directories")
    command_config.add_connection_options(parser)
    parser.add_argument(
        "--describe",
        action="store_true",
        required=True,
        help="describe the log directories of the brokers",
    )
    parser.add_argument(
        "--broker-list",
        metavar="0,1,2",
        help="the brokers to ask (default: every broker of the cluster)",
    )
    parser.add_argument(
        "--topic-list",
        metavar="t1,t2",
        default="",
        help="only the replicas of these topics (default: all)",
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    try:
        brokers = _broker_ids(args.broker_list)
        topics = {t.strip() for t in args.topic_list.split(",") if t.strip()}
        with AdminClient(args.bootstrap_server, **client_settings(args.command_config)) as admin:
            # Kafka's tool refuses unknown brokers before this line; describe_log_dirs
            # checks them first too, so the line is printed once they were asked.
            described = admin.describe_log_dirs(brokers)
    except StromError as exc:
        print(
            f"Error while executing log-dirs command : {exc.name}: {exc.message}", file=sys.stderr
        )
        return 1
    print("Querying brokers for log directories information")
    print(f"Received log directory information from brokers {','.join(map(str, described))}")
    print(json.dumps(_as_json(described, topics), separators=(",", ":")))
    return 0


def _broker_ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"--broker-list {text}: expected broker ids, as 0,1,2"
        ) from None


def _as_json(described: dict[int, dict[str, LogDirDescription]], topics: set[str]) -> object:
    """Kafka's LogDirsCommand JSON (version 1): partitions as "topic-partition"."""
    return {
        "version": 1,
        "brokers": [
            {
                "broker": broker,
                "logDirs": [
                    {
                        "logDir": path,
                        "error": None
                        if d.error is None
                        else _EXCEPTION_CLASSES.get(str(d.error.name), str(d.error.name)),
                        "partitions": [
                            {
                                "partition": f"{tp.topic}-{tp.partition}",
                                "size": info.size,
                                "offsetLag": info.offset_lag,
                                "isFuture": info.is_future,
                            }
                            for tp, info in sorted(d.replicas.items())
                            if not topics or tp.topic in topics
                        ],
                    }
                    for path, d in dirs.items()
                ],
            }
            for broker, dirs in described.items()
        ],
    }
