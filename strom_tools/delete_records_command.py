"""`strom delete-records`, after kafka-delete-records.sh: the records below an offset deleted
from each partition a JSON file names, through AdminClient.delete_records, with Kafka's
output (each partition's new low watermark or its error).

    strom delete-records --bootstrap-server B --offset-json-file offsets.json

    {"partitions": [{"topic": "orders", "partition": 0, "offset": 42}], "version": 1}

An offset of -1 deletes everything below the partition's high watermark.
"""

from __future__ import annotations

import argparse
import sys

from strom import TopicPartition
from strom.admin import AdminClient
from strom.client_properties import client_settings
from strom.errors import StromError
from strom_api.error_codes import ErrorCode
from strom_tools import command_config
from strom_tools.admin_parsing import RECORDS_TO_DELETE_FORMAT, parse_records_to_delete


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "delete-records", help="delete the records below an offset of partitions"
    )
    command_config.add_connection_options(parser)
    parser.add_argument(
        "--offset-json-file",
        required=True,
        metavar="FILE",
        help=f"the offset per partition, as {RECORDS_TO_DELETE_FORMAT}",
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Exit 1 when a partition kept its records (Kafka's tool exits 0 and only prints it)."""
    try:
        offsets = read_offsets(args.offset_json_file)
        with AdminClient(args.bootstrap_server, **client_settings(args.command_config)) as admin:
            print("Executing records delete operation")
            results = admin.delete_records(offsets)
    except StromError as exc:
        print(
            f"Error while executing delete-records command : {exc.name}: {exc.message}",
            file=sys.stderr,
        )
        return 1
    print("Records delete operation completed:")
    for tp in offsets:
        result = results[tp]
        if result.error is None:
            print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {result.low_watermark}")
        else:
            error = f"{result.error.name}: {result.error.message}"
            print(f"partition: {tp.topic}-{tp.partition}\terror: {error}")
    return 1 if any(r.error is not None for r in results.values()) else 0


def read_offsets(path: str) -> dict[TopicPartition, int]:
    """The file's partitions and offsets, in its order (admin_parsing reads Kafka's
    format)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"cannot read --offset-json-file {path}: {exc.strerror}"
        ) from None
    parsed = parse_records_to_delete(text, f"--offset-json-file {path}")
    return {TopicPartition(*tp): offset for tp, offset in parsed.items()}
