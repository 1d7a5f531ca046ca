"""python -m tests.kafka_fuzz [--seed S] [--cases N] [--first N] [--case N] [--api X,...]
[--budget S] [--keep DIR]. Prints each finding as it comes, with the command that replays
its case, and a summary; exit status 1 when there is any finding."""

from __future__ import annotations

import argparse
import sys
import tempfile

from tests.kafka_fuzz.run import api_keys, format_result, run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--first", type=int, default=0, help="number of the first case")
    parser.add_argument("--case", type=int, help="replay this one case, showing its bytes")
    parser.add_argument("--api", help="only these APIs, by Kafka's name or key, comma-separated")
    parser.add_argument(
        "--max-recoveries", type=int, default=10, help="stop after restarting nodes this many times"
    )
    parser.add_argument("--budget", type=float, help="stop starting cases after this many s")
    parser.add_argument("--keep", help="run in this directory and leave the node logs there")
    args = parser.parse_args()
    first, cases = (args.case, 1) if args.case is not None else (args.first, args.cases)

    def go(base: str) -> int:
        result = run(
            base,
            args.seed,
            cases,
            api_keys(args.api) if args.api else None,
            first,
            args.max_recoveries,
            args.budget,
            verbose=args.case is not None,
        )
        print(format_result(result))
        return 1 if result.findings else 0

    if args.keep:
        return go(args.keep)
    with tempfile.TemporaryDirectory(prefix="strom-kafka-fuzz-") as base:
        return go(base)


if __name__ == "__main__":
    sys.exit(main())
