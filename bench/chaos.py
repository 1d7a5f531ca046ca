"""Chaos figures for the record (issue 9): runs tests/chaos for a few seeds on both
topologies and prints, per nemesis, runs, minutes, acknowledged records, the checker's
counts (goal: 0 everywhere) and the median/max unavailability after each kind of fault.

    python bench/chaos.py [--quick]

Every nemesis on its own (--each): --quick one 20 s run each on 3 combined nodes (about 5
minutes); else one 60 s run each on both topologies (about 25 minutes).
"""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    duration, topology = ("20", "combined") if quick else ("60", "both")
    return subprocess.call(
        [
            sys.executable,
            "-m",
            "tests.chaos",
            "--each",
            "--seeds",
            "1",
            "--duration",
            duration,
            "--topology",
            topology,
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )


if __name__ == "__main__":
    sys.exit(main())
