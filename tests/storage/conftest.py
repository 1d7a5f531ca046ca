"""Fixtures for the storage tests; plain helpers live in storage_helpers.py."""

from __future__ import annotations

import pytest
from storage_helpers import BASE_TS

from storage.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(BASE_TS)
