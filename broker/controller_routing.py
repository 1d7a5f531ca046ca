"""Which controller a broker's next call goes to, sans-I/O (Kafka's NodeToControllerChannel
rule, as Strom's broker follows it): the broker knows the voters (controller.quorum.voters),
not which of them is active, so it asks one and follows what it hears.

The rules:
- the first call goes to the lowest voter id;
- no answer (a refused connection, a reset, a deadline passed): the next voter, in id order
  and round again;
- an error answer from a controller (NOT_CONTROLLER above all: a standby, or the Raft leader
  whose controller is not active yet) names the Raft leader in active_controller_id: the
  next try goes there when it is a voter, else to the next voter. An answer that errs about
  the request itself (a REGISTRATION_ERRORS one) is the lifecycle's business and moves
  nothing (broker/lifecycle_state.py);
- a call (AlterPartition, AllocateProducerIds, CreateTopics: `call_controller`) makes at most
  len(voters) + 1 tries, so it reaches the active controller even when the first voter asked
  is down and the second a standby, and then gives up: its caller has its own retry;
- a forwarded admin request (KIP-590: `forward`) tries until its deadline instead; a
  NOT_CONTROLLER naming another voter is followed at once, anything else (no answer, no
  leader named, the voter just asked named) moves on to the next voter after FORWARD_BACKOFF_S.
The broker's asyncio pump (broker/lifecycle_client.py, over gRPC) and the replication
simulator's brokers (tests/replication_sim, over the simulated network) drive this class.
No clock, no I/O. Not thread-safe: one event loop (or the simulator) drives it.
"""

from __future__ import annotations

from collections.abc import Iterable

# How long a forwarded request waits before it asks the next voter.
FORWARD_BACKOFF_S = 0.05
# A controlled shutdown gives up once no controller answered for this long (the broker then
# stops anyway: broker/lifecycle_state.BrokerLifecycle.begin_controlled_shutdown).
NO_CONTROLLER_S = 5.0


class ControllerRouting:
    def __init__(self, voters: Iterable[int]) -> None:
        self.voters: tuple[int, ...] = tuple(sorted(set(voters)))
        if not self.voters:
            raise ValueError("a broker needs at least one controller voter")
        self.target = self.voters[0]  # where the next try goes

    @property
    def attempts(self) -> int:
        """How many tries one call makes before it gives up (call_controller)."""
        return len(self.voters) + 1

    def no_answer(self) -> None:
        """The try got no answer: the next voter."""
        i = self.voters.index(self.target)
        self.target = self.voters[(i + 1) % len(self.voters)]

    def refused(self, active_controller_id: int) -> None:
        """A controller answered with an error naming the Raft leader: go there if it is a
        voter (it may be the one just asked: a leader about to become active), else on."""
        if active_controller_id in self.voters:
            self.target = active_controller_id
        else:
            self.no_answer()

    def forward_refused(self, active_controller_id: int) -> bool:
        """A forwarded request answered NOT_CONTROLLER: returns whether the next try goes out
        at once (another voter was named and is the target now); otherwise the target moved
        on to the next voter and the next try waits FORWARD_BACKOFF_S."""
        if active_controller_id in self.voters and active_controller_id != self.target:
            self.target = active_controller_id
            return True
        self.no_answer()
        return False
