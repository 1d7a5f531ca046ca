"""Command line for the controller simulation.

    .venv/bin/python -m tests.controller_sim --seed N [--trace]     one seed
    .venv/bin/python -m tests.controller_sim --seeds N [--start S]  seeds S .. S+N-1

Exit status 1 when any seed fails; each failure prints its seed and the replay command.
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.controller_sim.simulation import replay_command, run_seed, summarize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.controller_sim")
    one = parser.add_mutually_exclusive_group(required=True)
    one.add_argument("--seed", type=int, help="run one seed")
    one.add_argument("--seeds", type=int, help="run this many seeds")
    parser.add_argument("--start", type=int, default=0, help="first seed of --seeds")
    parser.add_argument("--trace", action="store_true", help="print every event (--seed)")
    args = parser.parse_args(argv)
    if args.seed is not None:
        result = run_seed(args.seed, echo=args.trace)
        if result.failure is not None:
            print(result.failure)
            return 1
        print(f"seed {args.seed}: ok, {result.events} events over {result.sim_ms} ms")
        print(summarize([result]))
        return 0
    began = time.monotonic()
    results = []
    failures = []
    for seed in range(args.start, args.start + args.seeds):
        result = run_seed(seed)
        results.append(result)
        if result.failure is not None:
            failures.append(seed)
            print(result.failure.split("\n", 1)[0])
            print(f"  replay: {replay_command(seed)}", flush=True)
    print(
        f"seeds {args.start}..{args.start + args.seeds - 1}: {len(failures)} failed; "
        f"{time.monotonic() - began:.1f} s"
    )
    print(summarize(results))
    if failures:
        print("failing seeds: " + " ".join(map(str, failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
