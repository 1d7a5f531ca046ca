"""What the two fuzzers' command lines share (python -m tests.fuzz, python -m
tests.kafka_fuzz): the options that pick the cases and bound the run, and running in a
kept directory or a temporary one."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable


def case_arguments(parser: argparse.ArgumentParser, replay_help: str, recoveries: int) -> None:
    """--seed, --cases, --first, --case, --max-recoveries, --budget and --keep."""
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--first", type=int, default=0, help="number of the first case")
    parser.add_argument("--case", type=int, help=replay_help)
    parser.add_argument(
        "--max-recoveries",
        type=int,
        default=recoveries,
        help="stop after restarting nodes this many times",
    )
    parser.add_argument("--budget", type=float, help="stop starting cases after this many s")
    parser.add_argument("--keep", help="run in this directory and leave the node logs there")


def case_range(args: argparse.Namespace) -> tuple[int, int]:
    """(first case, number of cases): --case replays just that one."""
    return (args.case, 1) if args.case is not None else (args.first, args.cases)


def in_directory(keep: str | None, prefix: str, go: Callable[[str], int]) -> int:
    """go(base) in --keep's directory, else in a temporary one removed afterwards."""
    if keep:
        return go(keep)
    with tempfile.TemporaryDirectory(prefix=prefix) as base:
        return go(base)
