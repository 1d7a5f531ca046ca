"""Chaos figures for the record (issue 9): runs tests/chaos for a few seeds on both
topologies and prints, per nemesis, runs, minutes, acknowledged records, the checker's
counts (goal: 0 everywhere) and the median/max unavailability after each kind of fault.

    python bench/chaos.py [--quick]      (--quick: 1 seed x 30 s; default 3 seeds x 60 s)
"""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    seeds, duration = ("1", "30") if quick else ("3", "60")
    return subprocess.call(
        [sys.executable, "-m", "tests.chaos", "--seeds", seeds, "--duration", duration],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )


if __name__ == "__main__":
    sys.exit(main())
