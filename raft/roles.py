"""The roles a node takes, and every legal transition between them.

    Unattached  -> Unattached   a higher epoch, no leader known
                -> Prospective  election timeout (voters only)
                -> Follower     a leader is discovered
    Prospective -> Prospective  election timeout: a new pre-vote round
                -> Candidate    a majority granted the pre-vote (the epoch grows by one)
                -> Unattached   a higher epoch, or a vote granted to another in this epoch
                -> Follower     a leader is discovered
    Candidate   -> Leader       a majority granted the vote
                -> Unattached   a higher epoch, or election timeout (then backoff)
                -> Follower     a leader is discovered
    Leader      -> Resigned     graceful shutdown, or check-quorum failed
                -> Unattached   a higher epoch
                -> Follower     a leader of a higher epoch is discovered
    Follower    -> Prospective  fetch timeout (voters)
                -> Unattached   a higher epoch; the leader resigned; fetch timeout (observers)
                -> Follower     a leader of a higher epoch is discovered
    Resigned    -> Prospective  election timeout
                -> Unattached   a higher epoch
                -> Follower     a leader is discovered

Observers (nodes outside the voter set) are only ever Unattached or Follower. Anything else
is a bug in the core and raises IllegalTransitionError instead of being ignored.
"""

from __future__ import annotations

import enum


class Role(enum.Enum):
    UNATTACHED = "Unattached"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


U, P, C, L, F, R = (
    Role.UNATTACHED,
    Role.PROSPECTIVE,
    Role.CANDIDATE,
    Role.LEADER,
    Role.FOLLOWER,
    Role.RESIGNED,
)

LEGAL: dict[Role, frozenset[Role]] = {
    U: frozenset({U, P, F}),
    P: frozenset({P, C, U, F}),
    C: frozenset({L, U, F}),
    L: frozenset({R, U, F}),
    F: frozenset({P, U, F}),
    R: frozenset({P, U, F}),
}
OBSERVER_ROLES = frozenset({U, F})


class IllegalTransitionError(RuntimeError):
    """The core tried a transition the protocol does not allow."""


def check_transition(node_id: int, voter: bool, old: Role, new: Role, why: str) -> None:
    if new not in LEGAL[old] or (not voter and new not in OBSERVER_ROLES):
        kind = "voter" if voter else "observer"
        raise IllegalTransitionError(
            f"node {node_id} ({kind}) cannot go from {old.value} to {new.value} ({why})"
        )
