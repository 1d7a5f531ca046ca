"""server/requests/groups.py without a front end: what its answers keep."""

from __future__ import annotations

import asyncio
import gc

from server.requests import groups as group_requests
from tests.server.group_paths import no_groups


def test_refusals_kept_as_answers_leave_no_garbage_cycles():
    """A refusal raised by the coordinator carries a traceback, whose frames hold it again:
    kept in an answer, each left cycles only the collector frees (46 objects a group of a
    DeleteGroups, three quarters of its time in collections). Answers keep it without."""
    paths = no_groups()
    groups = [f"g{i}" for i in range(1000)]
    gc.collect()
    gc.disable()
    try:
        answers = asyncio.run(group_requests.delete_groups(paths, groups, None))
        del answers
        garbage = gc.collect()
    finally:
        gc.enable()
    assert garbage < 1000, f"{garbage} objects in cycles after 1000 refused deletions"
