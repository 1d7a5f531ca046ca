"""Long chaos runs: python -m tests.chaos [--seeds N] [--start S] [--duration SECONDS]
[--nemesis KIND,...] [--each] [--topology combined|split|both] [--seed N (one run)]
[--secured (SASL_SSL clients, mTLS between nodes, the authorizer on: tests/chaos/secured.py)]
[--clients strom|confluent (the workload's producers and consumers: Strom's client over gRPC,
or confluent-kafka over the nodes' Kafka protocol listeners: tests/chaos/kafka_clients.py)].
Prints each run's seed, schedule and report, then a table per nemesis set; exit status 1
when any run found a violation."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections import defaultdict

from tests.chaos.nemesis import KINDS
from tests.chaos.run import CLIENTS, RunResult, run_once


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--seed", type=int, help="one run of this seed")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults per run")
    parser.add_argument("--nemesis", default=",".join(KINDS))
    parser.add_argument("--topology", choices=("combined", "split", "both"), default="both")
    parser.add_argument(
        "--each", action="store_true", help="run every nemesis on its own (a row each)"
    )
    parser.add_argument(
        "--secured", action="store_true", help="a secured cluster (tests/chaos/secured.py)"
    )
    parser.add_argument(
        "--clients", choices=CLIENTS, default="strom", help="the workload's producers and consumers"
    )
    args = parser.parse_args()
    if args.secured and args.clients != "strom":
        parser.error("--secured runs Strom's client only")
    kinds = tuple(k.strip() for k in args.nemesis.split(",") if k.strip())
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown nemesis {sorted(unknown)}; choose from {', '.join(KINDS)}")
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    topologies = ("combined", "split") if args.topology == "both" else (args.topology,)
    results: list[RunResult] = []
    sets = [(kind,) for kind in kinds] if args.each else [kinds]
    for seed in seeds:
        for topology in topologies:
            for nemeses in sets:
                with tempfile.TemporaryDirectory(prefix="strom-chaos-") as base:
                    results.append(
                        run_once(
                            base,
                            seed,
                            nemeses,
                            args.duration,
                            topology,
                            secured=args.secured,
                            clients=args.clients,
                        )
                    )
                print(flush=True)
    print(table(results))
    return 1 if any(r.report.violations for r in results) else 0


def table(results: list[RunResult]) -> str:
    """One row per nemesis set (run with --each for one row per kind of fault)."""
    names = (
        "lost",
        "duplicated",
        "reordered",
        "inconsistent",
        "vanished",
        "commits_backwards",
        "two_controllers",
        "replicas_behind",
        "refused",
    )
    rows = [
        "nemesis                runs   min  acked     lost dup reord incons vanish backw 2ctl "
        "behind refused  unavailable s (median/max)"
    ]
    groups: dict[str, list[RunResult]] = defaultdict(list)
    for r in results:
        groups[",".join(r.kinds)].append(r)
    for label, runs in sorted(groups.items()):
        counts = [sum(len(getattr(r.report, n)) for r in runs) for n in names]
        gaps: dict[str, list[float]] = defaultdict(list)
        for r in runs:
            for kind, values in r.report.unavailable.items():
                gaps[kind] += values
        unavailable = "; ".join(
            f"{kind} {statistics.median(v):.2f}/{max(v):.2f}" for kind, v in sorted(gaps.items())
        )
        rows.append(
            f"{label[:22]:<22} {len(runs):>4} {sum(r.seconds for r in runs) / 60:>5.1f} "
            f"{sum(r.report.acknowledged for r in runs):>6} {counts[0]:>8} {counts[1]:>3} "
            f"{counts[2]:>5} {counts[3]:>6} {counts[4]:>6} {counts[5]:>5} {counts[6]:>4} "
            f"{counts[7]:>6} {counts[8]:>7}  {unavailable}"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
