"""Command line for the replication simulator.

    .venv/bin/python -m tests.replication_sim --seed N [--trace]     one seed
    .venv/bin/python -m tests.replication_sim --seeds N [--start S]  seeds S .. S+N-1

Exit status 1 when any seed fails for a reason not listed in known_bugs.py; each failure
prints its seed and the replay command. A summary is printed after every batch of seeds.
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.replication_sim.plan import Plan
from tests.replication_sim.simulation import RunResult, replay_command, run_seed, summarize

BATCH = 50


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.replication_sim")
    one = parser.add_mutually_exclusive_group(required=True)
    one.add_argument("--seed", type=int, help="run one seed")
    one.add_argument("--seeds", type=int, help="run this many seeds")
    parser.add_argument("--start", type=int, default=0, help="first seed of --seeds")
    parser.add_argument("--trace", action="store_true", help="print every event (--seed)")
    parser.add_argument("--full", action="store_true", help="print whole failure reports")
    parser.add_argument(
        "--no-isr-view",
        action="store_true",
        help="leave out invariant (9) (the leader's ISR view), to see what breaking it leads to",
    )
    args = parser.parse_args(argv)
    isr_view = not args.no_isr_view
    if args.seed is not None:
        print(f"seed {args.seed}: {Plan.from_seed(args.seed).describe()}")
        result = run_seed(args.seed, echo=args.trace, isr_view=isr_view)
        if result.failure is not None:
            print(result.failure)
            if result.known_bug:
                print(f"(known bug '{result.known_bug}', tests/replication_sim/known_bugs.py)")
            return 1
        print(f"seed {args.seed}: ok, {result.sim_ms} simulated ms; {summarize([result])}")
        return 0
    return _many(args.start, args.seeds, args.full, isr_view)


def _many(start: int, count: int, full: bool, isr_view: bool) -> int:
    began = time.monotonic()
    results: list[RunResult] = []
    batch: list[RunResult] = []
    failures: list[int] = []
    known: dict[str, list[int]] = {}
    for seed in range(start, start + count):
        result = run_seed(seed, isr_view=isr_view)
        results.append(result)
        batch.append(result)
        if result.known_bug is not None:
            known.setdefault(result.known_bug, []).append(seed)
        elif result.failure is not None:
            failures.append(seed)
            print(result.failure if full else result.failure.split("\n", 1)[0])
            print(f"  replay: {replay_command(seed)}", flush=True)
        if len(batch) == BATCH or seed == start + count - 1:
            first = batch[0].seed
            bad = sum(1 for r in batch if r.failure is not None)
            print(
                f"seeds {first}..{seed}: {bad} failed; {summarize(batch)} "
                f"[{time.monotonic() - began:.1f} s]",
                flush=True,
            )
            batch = []
    known_count = sum(len(s) for s in known.values())
    print(
        f"\nseeds {start}..{start + count - 1}: {count} run, {len(failures)} failed, "
        f"{known_count} failed with a known bug's signature; {time.monotonic() - began:.1f} s"
    )
    print(summarize(results))
    for name, seeds in known.items():
        shown = " ".join(map(str, seeds[:30])) + (" ..." if len(seeds) > 30 else "")
        print(f"known bug '{name}': {len(seeds)} seeds: {shown}")
    if failures:
        print("failing seeds: " + " ".join(map(str, failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
