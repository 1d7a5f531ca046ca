"""ISR changes a leader proposes to the controller, and what their answers do (Kafka's
AlterPartitionManager and Partition.handleAlterPartitionError), without I/O: the node's
AlterPartitionSender and the replication simulator both drive this one class, so the rules
the simulator checks are the ones the broker runs.

- `submit` queues a partition's change stamped with the epochs it was computed against (a
  change computed on an older ISR must never be applied to a newer one); a newer change of
  the same partition replaces one not sent yet.
- `take` hands the pump the next request's worth: every queued change still pending on its
  partition (one the metadata settled meanwhile stays home). One request is in flight at a
  time, so a broker coming back to a thousand partitions costs a few requests, not a
  thousand.
- `answered` applies the controller's answer for one partition, by Kafka's rules: an answer
  to a proposal that is no longer pending is ignored; accepted, the ISR is committed; with
  no answer the change may or may not have been committed, so it stays pending (the high
  watermark keeps counting the larger ISR) and is sent again after ISR_RETRY_BACKOFF_S;
  INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED and INVALID_REQUEST refuse the change itself,
  which is dropped; any other refusal (a stale partition or leader epoch, an unknown topic)
  means the metadata moved on, and the delta that brings it settles the ISR.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from broker.partition import Partition
from broker.partition_leader import IsrChange
from strom_api.error_codes import ErrorCode

ISR_RETRY_BACKOFF_S = 0.1  # Kafka's AlterPartition retries after a transport error
RESET_ERRORS = frozenset(
    {ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INVALID_REQUEST}
)


@dataclass(frozen=True, slots=True)
class Proposal:
    partition: Partition
    change: IsrChange
    leader_epoch: int  # the partition's epochs when the change was computed
    partition_epoch: int


class Outcome(enum.Enum):
    COMMITTED = "committed"
    IGNORED = "no longer pending: ignored"
    RETRY = "sent again after a backoff"  # the pump calls `resend` after ISR_RETRY_BACKOFF_S
    DROPPED = "dropped"
    AWAITS_METADATA = "stays pending until the metadata settles it"


@dataclass(slots=True)
class IsrStats:
    shrinks: int = 0
    expands: int = 0
    failed: int = 0  # answers that did not accept the change (Kafka's FailedIsrUpdatesPerSec)
    resent: int = 0


class IsrProposals:
    def __init__(self) -> None:
        self.stats = IsrStats()
        # (topic id, partition) -> the change queued and not sent yet
        self._queued: dict[tuple[bytes, int], Proposal] = {}

    @property
    def has_queued(self) -> bool:
        return bool(self._queued)

    def submit(self, partition: Partition, change: IsrChange) -> None:
        self._queued[(partition.topic_id, partition.index)] = Proposal(
            partition, change, partition.leader_epoch, partition.partition_epoch
        )

    def take(self) -> tuple[list[Proposal], list[Proposal]]:
        """The queued proposals, emptying the queue: (to send, settled meanwhile)."""
        live: list[Proposal] = []
        settled: list[Proposal] = []
        for proposal in self._queued.values():
            (live if _pending(proposal.partition, proposal.change) else settled).append(proposal)
        self._queued = {}
        return live, settled

    def answered(
        self,
        partition: Partition,
        change: IsrChange,
        error: str | None,
        isr: Sequence[int] = (),
        partition_epoch: int = -1,
    ) -> Outcome:
        """One partition's answer: `error` None for an accepted change (with the ISR and
        partition epoch the controller committed), "NO_ANSWER" when none came, else the
        error's name."""
        current = _pending(partition, change)
        if error is None:
            # Counted even when the metadata delta got here first and settled the ISR.
            self.stats.shrinks += bool(change.removed)
            self.stats.expands += bool(change.added)
            if not current:
                return Outcome.IGNORED
            partition.isr_committed(list(isr), partition_epoch)
            return Outcome.COMMITTED
        self.stats.failed += 1
        if not current:
            return Outcome.IGNORED
        if error == "NO_ANSWER":
            return Outcome.RETRY
        if error in RESET_ERRORS:
            partition.isr_refused()
            return Outcome.DROPPED
        return Outcome.AWAITS_METADATA

    def resend(self, partition: Partition, change: IsrChange, still_served: bool) -> bool:
        """After a RETRY's backoff: queues the change again if it is still the partition's
        pending one and the broker still holds the partition."""
        if not (still_served and _pending(partition, change)):
            return False
        self.stats.resent += 1
        self.submit(partition, change)
        return True


def _pending(partition: Partition, change: IsrChange) -> bool:
    leader = partition.leader
    return leader is not None and leader.pending is change
