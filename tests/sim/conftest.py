"""The simulator's modules import each other as `tests.sim.x`, so that `python -m tests.sim`
and pytest share one copy of them. `python -m pytest` puts the repository root on sys.path;
a bare `pytest` does not, so do it here."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
