"""python -m tests.kafka_fuzz [--seed S] [--cases N] [--first N] [--case N] [--api X,...]
[--budget S] [--keep DIR]. Prints each finding as it comes, with the command that replays
its case, and a summary; exit status 1 when there is any finding."""

from __future__ import annotations

import argparse
import sys

from tests.fuzz.cli import case_arguments, case_range, in_directory
from tests.kafka_fuzz.run import api_keys, format_result, run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    case_arguments(parser, "replay this one case, showing its bytes", recoveries=10)
    parser.add_argument("--api", help="only these APIs, by Kafka's name or key, comma-separated")
    args = parser.parse_args()
    first, cases = case_range(args)

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

    return in_directory(args.keep, "strom-kafka-fuzz-", go)


if __name__ == "__main__":
    sys.exit(main())
