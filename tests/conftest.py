"""Suite-wide settings.

Test helpers are shared as `tests.<suite>.<module>` (the simulator's modules import each
other that way, so `python -m tests.sim` and pytest share one copy): `python -m pytest`
puts the repository root on sys.path, a bare `pytest` does not, so it is done here.

Hypothesis explores new inputs on every developer run; under CI (CI=true) it is derandomized,
so main's CI is reproducible and a red run is a change's fault, not a lucky draw. Failures
print the example (and a blob to replay it) either way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import settings

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

settings.register_profile("dev", deadline=None, print_blob=True)
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
