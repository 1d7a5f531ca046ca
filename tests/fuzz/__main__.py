"""python -m tests.fuzz [--seed S] [--cases N] [--first N] [--case N] [--service X,...]
[--secured] [--no-isolate] [--keep DIR]. Prints each finding as it comes and a summary;
exit status 1 when there is any finding."""

from __future__ import annotations

import argparse
import sys

from tests.fuzz.cli import case_arguments, case_range, in_directory
from tests.fuzz.run import format_result, run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    case_arguments(parser, "replay this one case (then the checks)", recoveries=20)
    parser.add_argument("--service", help="only these services or methods, comma-separated")
    parser.add_argument(
        "--no-isolate", action="store_true", help="do not replay a failing stretch case by case"
    )
    parser.add_argument(
        "--secured",
        action="store_true",
        help="against a SASL_SSL cluster (tests/fuzz/secured.py), as the SCRAM user and "
        "without a session, and fuzz SecurityService.SaslAuthenticate too",
    )
    args = parser.parse_args()
    first, cases = case_range(args)

    def go(base: str) -> int:
        result = run(
            base,
            args.seed,
            cases,
            args.service,
            first,
            not args.no_isolate,
            args.max_recoveries,
            args.budget,
            verbose=args.case is not None,
            secured=args.secured,
        )
        print(format_result(result))
        return 1 if result.findings else 0

    return in_directory(args.keep, "strom-fuzz-", go)


if __name__ == "__main__":
    sys.exit(main())
