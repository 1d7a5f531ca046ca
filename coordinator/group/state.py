"""A consumer group as its coordinator keeps it (Kafka's GroupMetadata): members, state,
generation, the chosen assignor, and committed offsets. Plain data and small pure rules;
the sans-I/O core (coordinator/group/core.py) drives the transitions and the waiting.

States, as Kafka's classic protocol: Empty (no members; offsets may remain) ->
PreparingRebalance (members (re)join) -> CompletingRebalance (joined; the leader computes
the assignment) -> Stable (everyone has its assignment); Dead once deleted or moved away.
Only Kafka's transitions are legal (VALID_PREVIOUS, GroupState.scala's validPreviousStates);
any other is a coordinator bug and raises, as Kafka's assertValidTransition does. A group
read back from `__consumer_offsets` takes its state with `restore`, not a transition.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from coordinator.group.records import OffsetValue


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Each state and the states it may be entered from (Kafka's GroupState.validPreviousStates).
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupTransition(RuntimeError):
    """A transition outside VALID_PREVIOUS: a coordinator bug, as Kafka's IllegalStateException."""


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat_ms: int = 0
    # The JoinGroup / SyncGroup request waiting for its answer (the pump's request id).
    join_request: int | None = None
    sync_request: int | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass(eq=False)
class Group:
    group_id: str
    partition: int  # of __consumer_offsets
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # KIP-394 ids, deadline ms
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    rebalance_deadline_ms: int = 0  # members not rejoined by then are removed
    join_not_before_ms: int = 0  # group.initial.rebalance.delay.ms for a group that was empty
    state_timestamp_ms: int = 0

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalGroupTransition(
                f"Group {self.group_id} should be in one of "
                f"{sorted(s.value for s in VALID_PREVIOUS[state])} states before moving to "
                f"{state.value} state. Instead it is in {self.state.value} state."
            )
        self.state = state
        self.state_timestamp_ms = now_ms

    def restore(self, state: GroupState, now_ms: int) -> None:
        """The state a group loaded from __consumer_offsets starts in (Stable with members,
        else Empty): not a transition."""
        self.state = state
        self.state_timestamp_ms = now_ms

    def supports(self, protocol_type: str, protocols: list[str]) -> bool:
        if not self.members:
            return bool(protocols)
        group_type = self.protocol_type or next(iter(self.members.values())).protocol_type
        if protocol_type != group_type:
            return False
        common = set(protocols)
        for member in self.members.values():
            common &= set(member.protocol_names())
        return bool(common)

    def select_protocol(self) -> str:
        """Kafka's vote: the protocols every member supports; each member votes for the
        first of those it lists; the most votes win (the first candidate on a tie)."""
        # Each member's names read once, and looked up in sets: a JoinGroup listing "range"
        # 20,000 times once held the coordinator's loop for 7 s (the Kafka-protocol probe).
        names = [m.protocol_names() for m in self.members.values()]
        supported = [set(n) for n in names]
        candidates = [p for p in dict.fromkeys(names[0]) if all(p in s for s in supported)]
        rank = {p: i for i, p in enumerate(candidates)}
        votes = Counter(next(p for p in n if p in rank) for n in names)
        return max(candidates, key=lambda p: (votes[p], -rank[p]))

    def all_joined(self) -> bool:
        return (
            all(m.join_request is not None for m in self.members.values())
            and not self.pending_members
        )

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
