"""Refused Raft messages are logged at most once per sender per minute, never a traceback."""

from __future__ import annotations

import logging

import pytest

from raft.refusal_log import MAX_SENDERS, RefusalLog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_sender_per_minute(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refusals = RefusalLog(logging.getLogger("test.raft"), clock=clock)
    with caplog.at_level(logging.WARNING, "test.raft"):
        for _ in range(1000):
            refusals.refused(99, "node 99 is not a voter")
        refusals.refused(98, "node 98 is not a voter")
        clock.now = 59.0
        refusals.refused(99, "node 99 is not a voter")
        clock.now = 61.0
        refusals.refused(99, "node 99 is not a voter")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "Refused a Raft message from node 99: node 99 is not a voter",
        "Refused a Raft message from node 98: node 98 is not a voter",
        "Refused a Raft message from node 99: node 99 is not a voter "
        "(1000 more like it in the last 60 s not logged)",
    ]
    assert all(r.exc_info is None for r in caplog.records)


def test_a_flood_of_made_up_ids_shares_one_line(caplog: pytest.LogCaptureFixture) -> None:
    refusals = RefusalLog(logging.getLogger("test.raft"), clock=Clock())
    with caplog.at_level(logging.WARNING, "test.raft"):
        for sender in range(100, 100 + MAX_SENDERS + 5000):
            refusals.refused(sender, "not a voter")
    assert len(caplog.records) == MAX_SENDERS + 1
