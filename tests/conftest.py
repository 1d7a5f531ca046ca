"""Suite-wide settings.

Hypothesis explores new inputs on every developer run; under CI (CI=true) it is derandomized,
so main's CI is reproducible and a red run is a change's fault, not a lucky draw. Failures
print the example (and a blob to replay it) either way.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("dev", deadline=None, print_blob=True)
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
