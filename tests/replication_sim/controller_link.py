"""A simulated broker's calls to the controller quorum (LifecycleClient._call and
call_controller): the one place where the broker side reaches the controller. Which
controller node each try goes to, and what an answer or a failure does to that, are the
product's rules (broker/controller_routing.ControllerRouting, the class the broker's gRPC
pump drives); this module is the pump over the simulated network.

A call names the controller's handler (handle_register, handle_heartbeat,
handle_alter_partition) and ends in `done(answer)` exactly once: the answer, or None when
none came. A try goes to the routing's target node as a lossy RPC with the gRPC deadline the
product sets (the heartbeat interval, at least 1 s); no answer by then (lost, held on a cut
link, a node that crashed with the call pending) or a refused connection (a node that is
down) is `no_answer`; an error answer from a controller carries the Raft leader that node
knows (active_controller_id, quorum.leader_hint): a REGISTRATION_ERRORS one goes through the
product's lifecycle rule (BrokerLifecycle.refused: only an answer about the current
registration says it was replaced), any other to the routing's `refused`. A call makes one
try (registrations and heartbeats: the lifecycle core retries on its own schedule) or
ControllerRouting.attempts (AlterPartition, call_controller), each failed try followed at
once by the next. Answers reach only the incarnation that made the call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.controller_routing import ControllerRouting
from broker.lifecycle_state import REGISTRATION_ERRORS
from metadata.errors import ApiError
from tests.replication_sim.quorum import raft_id_of

if TYPE_CHECKING:
    from tests.replication_sim.broker import SimBroker


class ControllerLink:
    """One broker process's calls (a restart makes a new one: routing starts over)."""

    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        self.routing = ControllerRouting(broker.world.controller.quorum.node_ids)
        # token -> (done, the request's broker epoch, tries left, the handler and its args)
        self.calls: dict[int, tuple[Callable[[Any], None], int | None, int, str, Any]] = {}

    def call(
        self,
        handler: str,
        args: tuple[Any, ...],
        done: Callable[[Any], None],
        broker_epoch: int | None = None,
        retry: bool = False,
    ) -> None:
        """`handler`: the SimController method; `broker_epoch`: the one the request carries
        (None: it has none, RegisterBroker); `retry`: call_controller's tries (done(None)
        once they are used up), else one."""
        tries = self.routing.attempts if retry else 1
        self._try(handler, args, done, broker_epoch, tries)

    def _try(
        self,
        handler: str,
        args: tuple[Any, ...],
        done: Callable[[Any], None],
        broker_epoch: int | None,
        tries: int,
    ) -> None:
        broker = self.broker
        world = broker.world
        token = next(world.tokens)
        self.calls[token] = (done, broker_epoch, tries - 1, handler, args)
        reply = _Reply(broker, broker.incarnation, token)
        timeout = max(world.plan.heartbeat_interval_ms, 1_000)
        target = self.routing.target
        controller = world.controller
        world.network.send(
            broker.id,
            target,
            controller.quorum.deliver,
            raft_id_of(target),
            getattr(controller, handler),
            *args,
            reply,
            lossy=True,
            deadline_ms=broker.now + timeout,
        )
        broker.later(timeout, self._timeout, token)

    def _timeout(self, token: int) -> None:
        if token in self.calls:
            self.routing.no_answer()
            self._finish(token, None)

    def answered(self, token: int, answer: Any, active_controller_id: int) -> None:
        call = self.calls.get(token)
        if call is None:
            return
        if answer is None:  # the connection was refused
            self.routing.no_answer()
        elif isinstance(answer, ApiError):
            if answer.error_name in REGISTRATION_ERRORS:
                broker = self.broker
                before = broker.broker_epoch
                # The product's rule: only an answer about the current registration says it
                # was replaced.
                broker.lifecycle.refused(answer.error_name, call[1])
                if broker.broker_epoch != before:
                    broker.trace(f"{answer.error_name} for broker epoch {call[1]}: register again")
            else:
                self.routing.refused(active_controller_id)
        self._finish(token, answer)

    def _finish(self, token: int, answer: Any) -> None:
        done, broker_epoch, tries_left, handler, args = self.calls.pop(token)
        failed = answer is None or isinstance(answer, ApiError)
        if failed and tries_left > 0:
            self._try(handler, args, done, broker_epoch, tries_left)
            return
        done(answer)


class _Reply:
    """The answer path of one controller call, bound to the incarnation that made it."""

    __slots__ = ("broker", "incarnation", "token", "__name__")

    def __init__(self, broker: SimBroker, incarnation: int, token: int) -> None:
        self.broker = broker
        self.incarnation = incarnation
        self.token = token
        self.__name__ = "reply"

    def __call__(self, answer: Any, active_controller_id: int = -1) -> None:
        broker = self.broker
        if broker.reachable(self.incarnation):
            broker.link.answered(self.token, answer, active_controller_id)
