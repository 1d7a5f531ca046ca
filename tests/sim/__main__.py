"""Command line for the Raft simulator.

    python -m tests.sim --seed N [--trace]     one seed; --trace prints every event as it runs
    python -m tests.sim --seeds N [--start S]  seeds S .. S+N-1, then a summary
    make sim SEEDS=100000                      the same through make (SEED=N for one seed)

Exit status 1 when any seed fails; each failure prints its seed and the replay command.
Seeds that fail with the signature of a known, unfixed core bug (known_bugs.py) are counted
and listed apart and do not fail the run: `--seeds` is for finding *new* bugs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from tests.sim.plan import Plan
from tests.sim.simulation import replay_command, run_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.split("\n")[0])
    one = parser.add_mutually_exclusive_group(required=True)
    one.add_argument("--seed", type=int, help="run one seed")
    one.add_argument("--seeds", type=int, help="run this many seeds")
    parser.add_argument("--start", type=int, default=0, help="first seed of --seeds")
    parser.add_argument("--trace", action="store_true", help="print every event (--seed)")
    args = parser.parse_args(argv)
    if args.seed is not None:
        return _one(args.seed, args.trace)
    return _many(args.start, args.seeds)


def _one(seed: int, trace: bool) -> int:
    print(f"seed {seed}: {Plan.from_seed(seed).describe()}")
    result = run_seed(seed, echo=trace)
    if result.failure is not None:
        print(result.failure)
        return 1
    print(
        f"seed {seed}: ok, {result.events} events checked over {result.sim_ms} simulated ms, "
        f"{result.leaders} leaders elected, {result.committed} entries committed"
    )
    return 0


def _many(start: int, count: int) -> int:
    # Wall time here is only reported, never fed into a run.
    began = time.monotonic()
    failures: list[int] = []
    known: dict[str, list[int]] = {}
    events = leaders = committed = 0
    coverage: Counter[str] = Counter()
    for seed in range(start, start + count):
        result = run_seed(seed)
        events += result.events
        leaders += result.leaders
        committed += result.committed
        coverage.update(result.coverage)
        if result.known_bug is not None:
            known.setdefault(result.known_bug, []).append(seed)
        elif result.failure is not None:
            failures.append(seed)
            print(result.failure.split("\n", 1)[0])
            print(f"  replay: {replay_command(seed)}", flush=True)
        done = seed - start + 1
        if done % 1000 == 0:
            rate = done / (time.monotonic() - began)
            print(
                f"... {done}/{count} seeds, {len(failures)} failed, {rate:.1f} seeds/s", flush=True
            )
    elapsed = time.monotonic() - began
    known_count = sum(len(seeds) for seeds in known.values())
    print(
        f"\nseeds {start}..{start + count - 1}: {count} run, {len(failures)} failed, "
        f"{known_count} failed with a known core bug's signature; {events} events checked, "
        f"{leaders} leaders elected, {committed} entries committed; {elapsed:.1f} s"
    )
    print("snapshot paths taken: " + ", ".join(f"{k} {v}" for k, v in sorted(coverage.items())))
    for name, seeds in known.items():
        shown = " ".join(map(str, seeds[:20])) + (" ..." if len(seeds) > 20 else "")
        print(f"known bug '{name}' (tests/sim/known_bugs.py): {len(seeds)} seeds: {shown}")
    if failures:
        print("failing seeds: " + " ".join(map(str, failures)))
        print(f"replay one with: {replay_command(failures[0])} --trace")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
