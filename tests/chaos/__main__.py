"""Long chaos runs: python -m tests.chaos [--seeds N] [--start S] [--duration SECONDS]
[--nemesis kill,kill-leader,kill-controller,pause] [--topology combined|split|both]
[--seed N (one run)]. Prints each run's seed, schedule and report, then a table per nemesis;
exit status 1 when any run found a violation."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections import defaultdict

from tests.chaos.nemesis import KINDS
from tests.chaos.run import RunResult, run_once


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--seed", type=int, help="one run of this seed")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults per run")
    parser.add_argument("--nemesis", default=",".join(KINDS))
    parser.add_argument("--topology", choices=("combined", "split", "both"), default="both")
    args = parser.parse_args()
    kinds = tuple(k.strip() for k in args.nemesis.split(",") if k.strip())
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown nemesis {sorted(unknown)}; choose from {', '.join(KINDS)}")
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    topologies = ("combined", "split") if args.topology == "both" else (args.topology,)
    results: list[RunResult] = []
    for seed in seeds:
        for topology in topologies:
            with tempfile.TemporaryDirectory(prefix="strom-chaos-") as base:
                results.append(run_once(base, seed, kinds, args.duration, topology))
            print()
    print(table(results))
    return 1 if any(r.report.violations for r in results) else 0


def table(results: list[RunResult]) -> str:
    rows = [
        "nemesis          runs  minutes  faults  acked    lost dup reord incons vanish "
        "backw 2ctl  unavail median/max s"
    ]
    per_kind: dict[str, list[float]] = defaultdict(list)
    for r in results:
        for kind, gaps in r.report.unavailable.items():
            per_kind[kind] += gaps
    total = defaultdict(int)
    for r in results:
        rep = r.report
        total["acked"] += rep.acknowledged
        for name in (
            "lost",
            "duplicated",
            "reordered",
            "inconsistent",
            "vanished",
            "commits_backwards",
            "two_controllers",
        ):
            total[name] += len(getattr(rep, name))
    minutes = sum(r.seconds for r in results) / 60
    for kind, gaps in sorted(per_kind.items()):
        rows.append(
            f"{kind:<16} {len(results):>4} {minutes:>8.1f} {len(gaps):>7} "
            f"{'':>6} {'':>7} {'':>3} {'':>5} {'':>6} {'':>6} {'':>5} {'':>4}  "
            f"{statistics.median(gaps):.2f}/{max(gaps):.2f}"
        )
    faults = sum(len(g) for g in per_kind.values())
    rows.append(
        f"{'all':<16} {len(results):>4} {minutes:>8.1f} {faults:>7} "
        f"{total['acked']:>6} {total['lost']:>7} {total['duplicated']:>3} {total['reordered']:>5} "
        f"{total['inconsistent']:>6} {total['vanished']:>6} {total['commits_backwards']:>5} "
        f"{total['two_controllers']:>4}"
    )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
