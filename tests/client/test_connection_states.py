"""strom.connection_states: Kafka's reconnect backoff (doubling from reconnect.backoff.ms to
reconnect.backoff.max.ms, +-20% jitter, reset by a success) and one warning per outage."""

from __future__ import annotations

import pytest

from strom.connection_states import ConnectionStates, connection_warning


def test_backoff_doubles_up_to_the_max_and_a_success_resets_it():
    states = ConnectionStates(50, 1000, jitter=lambda: 0.5)  # 0.5: no jitter
    now = 100.0
    waits = []
    starts = []
    for _ in range(8):
        starts.append(states.failed("b:1", now))
        waits.append(round(states.retry_at("b:1") - now, 6))
        assert not states.can_connect("b:1", now)
        assert states.can_connect("b:1", states.retry_at("b:1"))
    assert waits == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert starts == [True] + [False] * 7  # one warning per outage
    assert states.can_connect("other:2", now)  # per address
    states.succeeded("b:1")
    assert states.can_connect("b:1", now) and states.failures("b:1") == 0
    assert states.failed("b:1", now)  # a new outage is warned about again
    assert states.retry_at("b:1") - now == pytest.approx(0.05)


@pytest.mark.parametrize("draw, factor", [(0.0, 0.8), (0.999999, 1.2)])
def test_jitter_spreads_each_wait_by_twenty_percent(draw, factor):
    states = ConnectionStates(100, 1000, jitter=lambda: draw)
    states.failed("b:1", 0.0)
    assert states.retry_at("b:1") == pytest.approx(0.1 * factor, rel=1e-5)


def test_a_max_below_the_initial_backoff_is_raised_to_it():
    states = ConnectionStates(500, 100, jitter=lambda: 0.5)
    for _ in range(3):
        states.failed("b:1", 0.0)
    assert states.retry_at("b:1") == pytest.approx(0.5)


def test_the_warning_is_kafkas():
    assert connection_warning(-1, "127.0.0.1:9092") == (
        "Connection to node -1 (127.0.0.1:9092) could not be established. "
        "Broker may not be available."
    )
