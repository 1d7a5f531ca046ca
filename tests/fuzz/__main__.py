"""python -m tests.fuzz [--seed S] [--cases N] [--first N] [--case N] [--service X,...]
[--secured] [--no-isolate] [--keep DIR]. Prints each finding as it comes and a summary;
exit status 1 when there is any finding."""

from __future__ import annotations

import argparse
import sys
import tempfile

from tests.fuzz.run import format_result, run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--first", type=int, default=0, help="number of the first case")
    parser.add_argument("--case", type=int, help="replay this one case (then the checks)")
    parser.add_argument("--service", help="only these services or methods, comma-separated")
    parser.add_argument(
        "--no-isolate", action="store_true", help="do not replay a failing stretch case by case"
    )
    parser.add_argument(
        "--max-recoveries", type=int, default=20, help="stop after restarting nodes this many times"
    )
    parser.add_argument("--budget", type=float, help="stop starting cases after this many s")
    parser.add_argument("--keep", help="run in this directory and leave the node logs there")
    parser.add_argument(
        "--secured",
        action="store_true",
        help="against a SASL_SSL cluster (tests/fuzz/secured.py), as the SCRAM user and "
        "without a session, and fuzz SecurityService.SaslAuthenticate too",
    )
    args = parser.parse_args()
    first, cases = (args.case, 1) if args.case is not None else (args.first, args.cases)

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

    if args.keep:
        return go(args.keep)
    with tempfile.TemporaryDirectory(prefix="strom-fuzz-") as base:
        return go(base)


if __name__ == "__main__":
    sys.exit(main())
