"""A simulated broker's calls to the controller (LifecycleClient._call and call_controller):
the one place where the broker side reaches the controller. A call names the controller's
handler (handle_register, handle_heartbeat, handle_alter_partition), goes over the
simulated network as a lossy RPC with a deadline, and ends in `done(answer)` exactly once:
the answer, or None when none came in time. Answers reach only the incarnation that made
the call. An ApiError answer goes through the product's rule first
(BrokerLifecycle.refused: only an answer about the current registration says it was
replaced), as LifecycleClient does for every call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from metadata.errors import ApiError
from tests.replication_sim.network import CONTROLLER

if TYPE_CHECKING:
    from tests.replication_sim.broker import SimBroker

CONTROLLER_VOTERS = 1  # call_controller tries len(voters) + 1 times


class ControllerLink:
    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        # calls awaiting an answer: token -> (done, the request's broker epoch)
        self.calls: dict[int, tuple[Callable[[Any], None], int | None]] = {}

    def call(
        self,
        handler: str,
        args: tuple[Any, ...],
        done: Callable[[Any], None],
        broker_epoch: int | None = None,
    ) -> None:
        """`handler`: the SimController method; `broker_epoch`: the one the request carries
        (None: it has none, RegisterBroker)."""
        broker, world = self.broker, self.broker.world
        token = next(world.tokens)
        self.calls[token] = (done, broker_epoch)
        reply = _Reply(broker, broker.incarnation, token)
        timeout = max(world.plan.heartbeat_interval_ms, 1_000)
        action = getattr(world.controller, handler)
        world.network.send(
            broker.id,
            CONTROLLER,
            action,
            *args,
            reply,
            lossy=True,
            deadline_ms=broker.now + timeout,
        )
        broker.later(timeout, self._timeout, token)

    def _timeout(self, token: int) -> None:
        call = self.calls.pop(token, None)
        if call is not None:
            call[0](None)

    def answered(self, token: int, answer: Any) -> None:
        call = self.calls.pop(token, None)
        if call is None:
            return
        done, request_epoch = call
        if isinstance(answer, ApiError):
            broker = self.broker
            before = broker.broker_epoch
            broker.lifecycle.refused(answer.error_name, request_epoch)
            if broker.broker_epoch != before:
                broker.trace(
                    f"{answer.error_name} for broker epoch {request_epoch}: register again"
                )
        done(answer)


class _Reply:
    """The answer path of one controller call, bound to the incarnation that made it."""

    __slots__ = ("broker", "incarnation", "token", "__name__")

    def __init__(self, broker: SimBroker, incarnation: int, token: int) -> None:
        self.broker = broker
        self.incarnation = incarnation
        self.token = token
        self.__name__ = "reply"

    def __call__(self, answer: Any) -> None:
        if self.broker.reachable(self.incarnation):
            self.broker.link.answered(self.token, answer)
