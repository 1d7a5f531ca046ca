"""Options for the Raft interaction scripts.

`pytest tests/raft --rewrite` (or `STROM_REWRITE=1 pytest tests/raft`) writes the actual outputs
into `testdata/*.txt` instead of comparing them; review the change with `git diff`. The option
is only known when pytest is pointed at tests/raft (or a file in it); the variable works always.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--rewrite",
        action="store_true",
        default=False,
        help="rewrite the expected outputs of tests/raft/testdata/*.txt",
    )


@pytest.fixture
def rewrite(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--rewrite")) or os.environ.get("STROM_REWRITE") == "1"
