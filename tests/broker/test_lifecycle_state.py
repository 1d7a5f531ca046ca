"""The broker lifecycle's decisions (broker/lifecycle_state.py), driven by hand: event
sequences and the requests, wake-ups and states they give, without a controller or a clock."""

from __future__ import annotations

import pytest

from broker.lifecycle_state import (
    FENCED_HEARTBEAT_S,
    REGISTRATION_BACKOFF_S,
    BrokerHeartbeat,
    BrokerLifecycle,
    BrokerState,
    IllegalLifecycleTransition,
    Poll,
    RegisterBroker,
)

INTERVAL = 2.0


def sent(core: BrokerLifecycle, now: float) -> RegisterBroker | BrokerHeartbeat:
    step = core.poll(now)
    assert step.send is not None, f"nothing sent at {now}: {step}"
    return step.send


def registered(core: BrokerLifecycle, now: float = 0.0, epoch: int = 7) -> None:
    request = sent(core, now)
    assert isinstance(request, RegisterBroker)
    core.registered(request.request_id, epoch, now)


def beat(
    core: BrokerLifecycle,
    now: float,
    caught_up: bool = True,
    fenced: bool = False,
    shut_down: bool = False,
) -> BrokerHeartbeat:
    request = sent(core, now)
    assert isinstance(request, BrokerHeartbeat)
    core.heartbeat_answered(request.request_id, caught_up, fenced, shut_down, now)
    return request


def running(now: float = 0.0) -> BrokerLifecycle:
    core = BrokerLifecycle(1, INTERVAL)
    core.set_ready_to_unfence()
    registered(core, now)
    beat(core, now)
    assert core.state is BrokerState.RUNNING
    return core


# (answers to heartbeats after registering: (is_caught_up, is_fenced)) -> states after each,
# and the wait before the next heartbeat
ANSWERS = [
    ([(False, True)], [BrokerState.STARTING], FENCED_HEARTBEAT_S),
    ([(False, True), (True, True)], [BrokerState.STARTING, BrokerState.RECOVERY], 0.05),
    ([(True, True), (True, False)], [BrokerState.RECOVERY, BrokerState.RUNNING], INTERVAL),
    # unfenced in the answer that says it caught up: through RECOVERY to RUNNING
    ([(True, False)], [BrokerState.RUNNING], INTERVAL),
    # fenced again by the controller (session expired, failed log dir)
    ([(True, False), (True, True)], [BrokerState.RUNNING, BrokerState.RECOVERY], 0.05),
    # a fenced broker is never RUNNING, whatever the answer says of its catch-up
    ([(True, False), (False, True)], [BrokerState.RUNNING, BrokerState.RECOVERY], 0.05),
]


@pytest.mark.parametrize(("answers", "states", "pause"), ANSWERS)
def test_heartbeat_answers_drive_the_state(
    answers: list[tuple[bool, bool]], states: list[BrokerState], pause: float
) -> None:
    core = BrokerLifecycle(1, INTERVAL)
    core.set_ready_to_unfence()
    registered(core, 0.0)
    now = 0.0
    for (caught_up, fenced), state in zip(answers, states, strict=True):
        request = beat(core, now, caught_up, fenced)
        assert request.broker_epoch == 7 and not request.want_shut_down
        assert core.state is state
        assert (core.caught_up, core.fenced) == (caught_up, fenced)
        wake_at = core.poll(now).wake_at
        assert wake_at is not None
        last, now = now, wake_at
    assert now == pytest.approx(last + pause)


def test_registration_is_retried_after_a_backoff_then_heartbeats_at_once() -> None:
    core = BrokerLifecycle(1, INTERVAL)
    first = sent(core, 0.0)
    assert isinstance(first, RegisterBroker)
    assert core.poll(0.0) == Poll()  # one request in flight at a time
    core.failed(first.request_id, 0.1)
    assert core.poll(0.1) == Poll(wake_at=0.1 + REGISTRATION_BACKOFF_S)
    second = sent(core, 0.1 + REGISTRATION_BACKOFF_S)
    assert isinstance(second, RegisterBroker) and second.request_id != first.request_id
    core.registered(second.request_id, 12, 0.4)
    assert core.broker_epoch == 12 and core.state is BrokerState.STARTING
    heartbeat = sent(core, 0.4)
    assert isinstance(heartbeat, BrokerHeartbeat) and heartbeat.broker_epoch == 12


def test_a_failed_heartbeat_waits_the_interval() -> None:
    core = running()
    request = sent(core, INTERVAL)
    core.failed(request.request_id, INTERVAL + 1.0)
    assert core.poll(INTERVAL + 1.0).wake_at == INTERVAL * 2 + 1.0
    assert core.state is BrokerState.RUNNING  # no answer says nothing about the state


def test_not_ready_to_unfence_asks_to_stay_fenced() -> None:
    core = BrokerLifecycle(1, INTERVAL)
    registered(core)
    # The controller keeps a broker that asks want_fence fenced, however caught up it is.
    for now in (0.0, 1.0, 2.0):
        request = beat(core, now, caught_up=True, fenced=True)
        assert request.want_fence
        assert core.state is BrokerState.RECOVERY
    core.set_ready_to_unfence()
    request = beat(core, 3.0, caught_up=True, fenced=False)
    assert not request.want_fence
    assert core.state is BrokerState.RUNNING


def test_stale_broker_epoch_registers_again() -> None:
    core = running()
    request = sent(core, INTERVAL)
    assert isinstance(request, BrokerHeartbeat)
    core.refused("STALE_BROKER_EPOCH", request.broker_epoch)
    core.failed(request.request_id, INTERVAL)
    assert core.broker_epoch == -1 and core.state is BrokerState.STARTING
    again = sent(core, INTERVAL * 2)
    assert isinstance(again, RegisterBroker)
    core.registered(again.request_id, 20, INTERVAL * 2)
    assert core.registrations == 2
    beat(core, INTERVAL * 2, caught_up=True, fenced=False)
    assert core.state is BrokerState.RUNNING and core.broker_epoch == 20


@pytest.mark.parametrize(
    ("error", "request_epoch"),
    [
        ("STALE_BROKER_EPOCH", 6),  # stamped with an older registration
        ("BROKER_ID_NOT_REGISTERED", None),  # a request that carries no epoch
        ("NOT_CONTROLLER", 7),  # not about the registration at all
    ],
)
def test_errors_not_about_the_current_registration_keep_it(
    error: str, request_epoch: int | None
) -> None:
    core = running()
    core.refused(error, request_epoch)
    assert core.broker_epoch == 7 and core.state is BrokerState.RUNNING


def test_an_alter_partition_refused_for_the_current_epoch_registers_again() -> None:
    """Any call, not only a heartbeat, tells the broker its registration was replaced."""
    core = running()
    core.refused("BROKER_ID_NOT_REGISTERED", 7)
    assert core.state is BrokerState.STARTING
    assert isinstance(sent(core, INTERVAL), RegisterBroker)


def test_controlled_shutdown_until_the_controller_lets_go() -> None:
    core = running()
    in_flight = sent(core, INTERVAL)  # abandoned: its answer comes after the shutdown began
    core.begin_controlled_shutdown(INTERVAL, timeout_s=30.0, no_controller_s=5.0)
    assert core.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
    core.heartbeat_answered(in_flight.request_id, True, False, True, INTERVAL)
    assert core.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
    request = beat(core, INTERVAL, shut_down=False)
    assert request.want_shut_down and request.broker_epoch == 7
    # every min(interval, 0.2 s) while leaderships move
    assert core.poll(INTERVAL).wake_at == pytest.approx(INTERVAL + 0.2)
    beat(core, INTERVAL + 0.2, shut_down=True)
    assert core.state is BrokerState.SHUTTING_DOWN and core.released
    assert core.poll(INTERVAL + 0.2) == Poll(done=True)


def test_controlled_shutdown_times_out() -> None:
    core = running()
    core.begin_controlled_shutdown(10.0, timeout_s=1.0, no_controller_s=5.0)
    now = 10.0
    while True:
        step = core.poll(now)
        if step.done:
            break
        if step.send is not None:
            core.heartbeat_answered(step.send.request_id, True, False, False, now)
        else:
            assert step.wake_at is not None
            now = step.wake_at
    # the deadline is looked at before each heartbeat, as they come every 0.2 s
    assert 11.0 <= now < 11.2 + 1e-9
    assert core.state is BrokerState.SHUTTING_DOWN and not core.released


def test_controlled_shutdown_gives_up_when_no_controller_answers() -> None:
    core = running()
    core.begin_controlled_shutdown(10.0, timeout_s=30.0, no_controller_s=1.0)
    now = 10.0
    sends = 0
    while not (step := core.poll(now)).done:
        if step.send is not None:
            sends += 1
            core.failed(step.send.request_id, now)
        else:
            assert step.wake_at is not None
            now = step.wake_at
    assert 11.0 <= now < 11.2 + 1e-9 and sends in (5, 6)
    assert not core.released


def test_controlled_shutdown_before_registering_is_done_at_once() -> None:
    core = BrokerLifecycle(1, INTERVAL)
    request = sent(core, 0.0)
    core.begin_controlled_shutdown(0.0, timeout_s=30.0, no_controller_s=5.0)
    core.registered(request.request_id, 7, 0.1)  # abandoned: ignored
    assert core.broker_epoch == -1
    assert core.poll(0.1) == Poll(done=True) and core.released


def test_illegal_transitions_raise() -> None:
    core = running()
    core.begin_controlled_shutdown(0.0, timeout_s=1.0, no_controller_s=1.0)
    with pytest.raises(IllegalLifecycleTransition) as error:
        core.begin_controlled_shutdown(0.0, timeout_s=1.0, no_controller_s=1.0)
    assert str(error.value) == (
        "Broker 1 should be in one of ['RECOVERY', 'RUNNING', 'STARTING'] states before "
        "moving to PENDING_CONTROLLED_SHUTDOWN state. Instead it is in "
        "PENDING_CONTROLLED_SHUTDOWN state."
    )
    assert core.poll(1.0).done
    with pytest.raises(IllegalLifecycleTransition, match="Instead it is in SHUTTING_DOWN"):
        core.begin_controlled_shutdown(1.0, timeout_s=1.0, no_controller_s=1.0)
    starting = BrokerLifecycle(2, INTERVAL)
    with pytest.raises(IllegalLifecycleTransition, match="before moving to RUNNING state"):
        starting._transition(BrokerState.RUNNING)  # RUNNING only from RECOVERY
