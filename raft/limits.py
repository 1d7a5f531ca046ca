"""The numeric bounds of the Raft protocol, checked where values come in and before they are
written.

Epochs, replica ids and counts are int32 on the wire (KIP-595's schemas), in quorum-state
and in the log (a batch's partitionLeaderEpoch); offsets are int64. A value outside its
range must be refused where it enters (raft/wire.py decoding, RaftCore.step) or before it
is written (raft/quorum_state.py, raft/storage_log.py), never discovered deep inside when
something overflows.

The largest epoch a node may enter is MAX_EPOCH = 2^31-2, one below int32's maximum, so
that the next election (which stands in epoch + 1) still fits. An epoch jump from a voter
is legitimate Raft (a node that was away catches up in one step), so any epoch up to
MAX_EPOCH is accepted from a voter, however large the jump; beyond it the message is
refused. Reaching MAX_EPOCH by real elections would take 2^31 of them; a node there refuses
to stand again (it raises EpochExhaustedError) rather than overflow.
"""

from __future__ import annotations

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_EPOCH = INT32_MAX - 1
MAX_NODE_ID = INT32_MAX


class EpochExhaustedError(RuntimeError):
    """This node would have to enter an epoch beyond MAX_EPOCH."""


def out_of_range(name: str, value: int, low: int, high: int) -> str | None:
    """Why `value` is not a valid `name` (a sentence), or None when low <= value <= high."""
    if low <= value <= high:
        return None
    return f"{name} {value} is outside [{low}, {high}]"


def check_range(name: str, value: int, low: int, high: int) -> None:
    """Raises ValueError naming the field when `value` is outside [low, high]: for values
    about to be persisted, where an out-of-range one is a bug that must not reach the disk."""
    problem = out_of_range(name, value, low, high)
    if problem is not None:
        raise ValueError(f"refusing to persist {problem}")
