"""A broker's membership decisions, without I/O (Kafka's BrokerLifecycleManager state
machine): when to register, when to heartbeat and what to ask in it, what the controller's
answers do, and when a controlled shutdown is over. broker/lifecycle_client.py is the pump:
it calls `poll(now)`, sends the request it gets over gRPC (finding the active controller),
and feeds the answer back.

States (Kafka's BrokerState): STARTING (not registered, or registered and not caught up
with the metadata log) -> RECOVERY (caught up, still fenced) -> RUNNING (unfenced) ->
PENDING_CONTROLLED_SHUTDOWN (heartbeats with want_shut_down) -> SHUTTING_DOWN (the
controller let it go, or the time ran out). Only the transitions of VALID_PREVIOUS are
legal; any other is a bug of the caller and raises IllegalLifecycleTransition, as Kafka's
state changes do. Two moves Kafka's broker does not make and this one does: the controller
fencing it again (its session expired, a failed log directory) takes RUNNING back to
RECOVERY, and a registration the controller replaced (STALE_BROKER_EPOCH or
BROKER_ID_NOT_REGISTERED to a request stamped with the current epoch) takes it back to
STARTING, to register again.

Pace: one request in flight at a time. A registration is retried after
REGISTRATION_BACKOFF_S; once registered the broker heartbeats every FENCED_HEARTBEAT_S while
fenced (Kafka: 10 ms until the initial catch-up, so a restarted broker is unfenced as soon as
it replayed its registration) and every heartbeat interval once unfenced or when a heartbeat
got no answer. Until the node calls `set_ready_to_unfence` (its first image after the
catch-up applied, its listeners serving) heartbeats ask to stay fenced (want_fence), as
Kafka's setReadyToUnfence, so clients are never sent to a broker that does not serve yet.
A controlled shutdown heartbeats every min(interval, 0.2 s) until the controller says the
broker leads nothing, the timeout passes, or no controller answered for `no_controller_s`
(the whole cluster is stopping: nobody is left to move leaderships to).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from strom_api.error_codes import ErrorCode

REGISTRATION_BACKOFF_S = 0.2
FENCED_HEARTBEAT_S = 0.05  # while fenced (Kafka: 10 ms until the initial catch-up)
SHUTDOWN_HEARTBEAT_MAX_S = 0.2  # want_shut_down heartbeats come at least this often
# Errors that say the broker's registration was replaced (or is gone).
REGISTRATION_ERRORS = frozenset({ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED})


class BrokerState(enum.Enum):
    STARTING = "STARTING"
    RECOVERY = "RECOVERY"
    RUNNING = "RUNNING"
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUTTING_DOWN = "SHUTTING_DOWN"


_S = BrokerState
# Each state and the states it may be entered from.
VALID_PREVIOUS: dict[BrokerState, frozenset[BrokerState]] = {
    _S.STARTING: frozenset({_S.RECOVERY, _S.RUNNING}),  # the registration was replaced
    _S.RECOVERY: frozenset({_S.STARTING, _S.RUNNING}),  # caught up; fenced again
    _S.RUNNING: frozenset({_S.RECOVERY}),
    _S.PENDING_CONTROLLED_SHUTDOWN: frozenset({_S.STARTING, _S.RECOVERY, _S.RUNNING}),
    _S.SHUTTING_DOWN: frozenset(
        {_S.STARTING, _S.RECOVERY, _S.RUNNING, _S.PENDING_CONTROLLED_SHUTDOWN}
    ),
}
_SHUTTING = frozenset({_S.PENDING_CONTROLLED_SHUTDOWN, _S.SHUTTING_DOWN})


class IllegalLifecycleTransition(RuntimeError):
    """A transition outside VALID_PREVIOUS: a bug, as Kafka's IllegalStateException."""


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    """Send a RegisterBrokerRequest (the pump fills in the listeners, rack, incarnation)."""

    request_id: int


@dataclass(frozen=True, slots=True)
class BrokerHeartbeat:
    """Send a BrokerHeartbeatRequest (the pump adds the metadata offset and the replicas of
    failed log directories, read when it is sent)."""

    request_id: int
    broker_epoch: int
    want_fence: bool
    want_shut_down: bool


Request = RegisterBroker | BrokerHeartbeat


@dataclass(frozen=True, slots=True)
class Poll:
    """What the pump does now: send `send` (if any), else wake at `wake_at` (None: only an
    answer to the request in flight moves anything); `done` once SHUTTING_DOWN."""

    send: Request | None = None
    wake_at: float | None = None
    done: bool = False


class BrokerLifecycle:
    def __init__(self, broker_id: int, heartbeat_interval_s: float) -> None:
        self.broker_id = broker_id
        self.interval = heartbeat_interval_s
        self.state = BrokerState.STARTING
        self.broker_epoch = -1
        # As the controller's last heartbeat answer said (the node's readiness reads them).
        self.fenced = True
        self.caught_up = False
        self.ready_to_unfence = False
        # Whether the controller let the broker go (False: the shutdown ran out of time).
        self.released = False
        self.registrations = 0
        self._next_id = 0
        self._in_flight: Request | None = None
        self._send_at = 0.0
        self._deadline = 0.0
        self._last_answer = 0.0
        self._no_controller_s = 0.0

    # --- events ----------------------------------------------------------------------------

    def poll(self, now: float) -> Poll:
        """Time has passed: the next request to send, or when to look again."""
        if self.state is BrokerState.SHUTTING_DOWN:
            return Poll(done=True)
        if self._in_flight is not None:
            return Poll()
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN and (
            now >= self._deadline or now - self._last_answer >= self._no_controller_s
        ):
            self._transition(BrokerState.SHUTTING_DOWN)
            return Poll(done=True)
        if now < self._send_at:
            return Poll(wake_at=self._send_at)
        self._next_id += 1
        request: Request
        if self.broker_epoch < 0 and self.state not in _SHUTTING:
            request = RegisterBroker(self._next_id)
        else:
            request = BrokerHeartbeat(
                self._next_id,
                self.broker_epoch,
                want_fence=not self.ready_to_unfence,
                want_shut_down=self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN,
            )
        self._in_flight = request
        return Poll(send=request)

    def registered(self, request_id: int, broker_epoch: int, now: float) -> None:
        """The controller accepted the registration: heartbeat at once."""
        if not isinstance(self._take(request_id), RegisterBroker):
            return
        self.broker_epoch = broker_epoch
        self.registrations += 1
        self._send_at = now

    def heartbeat_answered(
        self,
        request_id: int,
        is_caught_up: bool,
        is_fenced: bool,
        should_shut_down: bool,
        now: float,
    ) -> None:
        if not isinstance(self._take(request_id), BrokerHeartbeat):
            return
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            self._last_answer = now
            if should_shut_down:
                self.released = True
                self._transition(BrokerState.SHUTTING_DOWN)
            self._send_at = now + min(self.interval, SHUTDOWN_HEARTBEAT_MAX_S)
            return
        self.fenced = is_fenced
        self.caught_up = is_caught_up
        if not is_fenced:
            self._move_to(BrokerState.RUNNING)
        elif is_caught_up or self.state is BrokerState.RUNNING:  # fenced again: RECOVERY
            self._move_to(BrokerState.RECOVERY)
        # Fenced, it heartbeats fast: it is unfenced as soon as it has caught up and is ready.
        self._send_at = now + (FENCED_HEARTBEAT_S if is_fenced else self.interval)

    def failed(self, request_id: int, now: float) -> None:
        """The request got no answer, or an error (`refused` has seen the error first)."""
        request = self._take(request_id)
        if request is None:
            return
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            self._send_at = now + min(self.interval, SHUTDOWN_HEARTBEAT_MAX_S)
        elif isinstance(request, RegisterBroker):
            self._send_at = now + REGISTRATION_BACKOFF_S
        else:
            self._send_at = now + self.interval

    def refused(self, error: str, request_epoch: int | None) -> None:
        """Any controller call of this broker (a heartbeat, AlterPartition) came back with
        `error`. Only an answer about the current registration means it was replaced; a
        request stamped with an older epoch (or none yet) says nothing new."""
        if error not in REGISTRATION_ERRORS or request_epoch is None:
            return
        if not request_epoch == self.broker_epoch >= 0:
            return
        self.broker_epoch = -1
        if self.state not in _SHUTTING and self.state is not BrokerState.STARTING:
            self._transition(BrokerState.STARTING)

    def set_ready_to_unfence(self) -> None:
        """The node serves: heartbeats stop asking to stay fenced."""
        self.ready_to_unfence = True

    def begin_controlled_shutdown(
        self, now: float, timeout_s: float, no_controller_s: float
    ) -> None:
        """Heartbeats with want_shut_down from now on (the request in flight, if any, is
        abandoned: its answer is ignored). Not registered, there is nothing to wait for."""
        self._in_flight = None
        if self.broker_epoch < 0:
            self.released = True
            self._transition(BrokerState.SHUTTING_DOWN)
            return
        self._transition(BrokerState.PENDING_CONTROLLED_SHUTDOWN)
        self._deadline = now + timeout_s
        self._last_answer = now
        self._no_controller_s = no_controller_s
        self._send_at = now

    # --- rules -----------------------------------------------------------------------------

    def _take(self, request_id: int) -> Request | None:
        """The request in flight this answers, no longer in flight; None for an answer to
        one abandoned (a controlled shutdown began meanwhile): ignored."""
        request = self._in_flight
        if request is None or request.request_id != request_id:
            return None
        self._in_flight = None
        return request

    def _move_to(self, state: BrokerState) -> None:
        """Through RECOVERY: a broker unfenced by the answer that says it caught up passes
        RECOVERY on its way to RUNNING, as Kafka's does."""
        if state is self.state:
            return
        if state is BrokerState.RUNNING and self.state is BrokerState.STARTING:
            self._transition(BrokerState.RECOVERY)
        self._transition(state)

    def _transition(self, state: BrokerState) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalLifecycleTransition(
                f"Broker {self.broker_id} should be in one of "
                f"{sorted(s.value for s in VALID_PREVIOUS[state])} states before moving to "
                f"{state.value} state. Instead it is in {self.state.value} state."
            )
        self.state = state
