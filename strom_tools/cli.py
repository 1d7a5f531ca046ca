"""The `strom` command line, shaped after Kafka's tools (`kafka-storage.sh random-uuid` is
`strom storage random-uuid`, `kafka-topics.sh` is `strom topics`). Only commands that really
work are registered: anything else is an invalid choice for argparse (exit code 2).

The admin commands (`topics`, `metadata-quorum`, `cluster`, `configs`, `leader-election`,
`reassign-partitions`, `acls`) live in strom_tools/admin_tools.py; `server` and `storage format`
hand over to the server side (server.main), imported only when they run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from strom.uuids import kafka_uuid_string, random_uuid
from strom_tools import (
    console_commands,
    consumer_groups_command,
    delete_records_command,
    get_offsets_command,
    log_dirs_command,
    perf_commands,
    replica_verification,
)
from strom_tools.admin_tools import add_commands as add_admin_commands

__all__ = ["build_parser", "kafka_uuid_string", "main", "random_uuid"]


def _package_version() -> str:
    try:
        return version("strom")
    except PackageNotFoundError:  # running from a tree that was never pip-installed
        return "unknown (not installed)"


def _storage_random_uuid(args: argparse.Namespace) -> int:
    print(random_uuid())
    return 0


def _storage_format(args: argparse.Namespace) -> int:
    from server.main import format_storage  # the server side, loaded only when asked for

    return format_storage(
        args.config, args.cluster_id, args.override, args.ignore_formatted, args.add_scram
    )


def _storage_info(args: argparse.Namespace) -> int:
    from server.main import storage_info

    return storage_info(args.config, args.override)


def _server(args: argparse.Namespace) -> int:
    from server.main import run_server

    return run_server(args.config, args.override)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strom", description="Strom: a Kafka-style commit log.")
    parser.add_argument("--version", action="version", version=_package_version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    storage = commands.add_parser("storage", help="manage node storage (as kafka-storage.sh)")
    storage_commands = storage.add_subparsers(dest="storage_command", metavar="COMMAND")
    random_uuid_cmd = storage_commands.add_parser(
        "random-uuid", help="print a new random cluster id"
    )
    random_uuid_cmd.set_defaults(handler=_storage_random_uuid)
    format_cmd = storage_commands.add_parser(
        "format", help="format the log directories of a node (writes meta.properties)"
    )
    format_cmd.add_argument("--config", "-c", required=True, help="the server.properties file")
    format_cmd.add_argument("--cluster-id", "-t", required=True, help="the cluster id")
    format_cmd.add_argument(
        "--ignore-formatted", "-g", action="store_true", help="skip formatted directories"
    )
    format_cmd.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="a config value"
    )
    format_cmd.add_argument(
        "--add-scram",
        "-S",
        action="append",
        default=[],
        metavar="SCRAM_CREDENTIAL",
        help="a SCRAM user the new cluster starts with (repeatable), e.g. "
        "'SCRAM-SHA-512=[name=admin,password=admin-secret]'; also iterations=, salt= "
        "(base64) and saltedpassword= (base64, with salt=)",
    )
    format_cmd.set_defaults(handler=_storage_format)
    info_cmd = storage_commands.add_parser(
        "info", help="show what the node's directories hold (meta.properties, problems)"
    )
    info_cmd.add_argument("--config", "-c", required=True, help="the server.properties file")
    info_cmd.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="a config value"
    )
    info_cmd.set_defaults(handler=_storage_info)

    server = commands.add_parser("server", help="run a node (as kafka-server-start.sh)")
    server.add_argument("config", help="the server.properties file")
    server.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="a config value"
    )
    server.set_defaults(handler=_server)
    add_admin_commands(commands)
    consumer_groups_command.add_command(commands)
    console_commands.add_commands(commands)
    replica_verification.add_command(commands)
    log_dirs_command.add_command(commands)
    delete_records_command.add_command(commands)
    get_offsets_command.add_command(commands)
    perf_commands.add_commands(commands)
    # A command group given without its subcommand prints that group's help.
    storage.set_defaults(help_parser=storage)
    parser.set_defaults(help_parser=parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits for --help, --version and usage errors
        return exit_.code if isinstance(exit_.code, int) else 1
    handler = getattr(args, "handler", None)
    if handler is None:
        args.help_parser.print_help(sys.stderr)
        return 2
    try:
        result: int = handler(args)
    except SystemExit as exit_:  # a usage error found after parsing (parser.error)
        return exit_.code if isinstance(exit_.code, int) else 1
    return result


if __name__ == "__main__":
    sys.exit(main())
