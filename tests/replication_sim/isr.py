"""A simulated leader's ISR changes: the product's IsrProposals (broker/isr_proposals.py:
what is queued, what is sent, what an answer does), pumped as AlterPartitionSender and
ReplicaManager pump it. Every read of a follower fetch is followed by the ISR check of its
partition, and the isr-expiration task checks every led partition each
replica.lag.time.max.ms / 2; a change goes into the queue, and the drain task (started on
the next turn of the loop) sends every change still pending in one AlterPartition request,
one request in flight, with the lifecycle client's retries (voters + 1 tries); each
partition's result (or NO_ANSWER when none came) goes to IsrProposals.answered, and a RETRY
is queued again after ISR_RETRY_BACKOFF_S.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.isr_proposals import ISR_RETRY_BACKOFF_S, IsrProposals, Outcome, Proposal
from broker.partition import Partition
from broker.partition_leader import IsrChange
from metadata.alter_partition import IsrProposal, IsrResult

if TYPE_CHECKING:
    from tests.replication_sim.broker import SimBroker

ISR_RETRY_BACKOFF_MS = round(ISR_RETRY_BACKOFF_S * 1000)


@dataclass
class AlterCall:
    """One AlterPartition request of the AlterPartitionSender, through call_controller."""

    batch: list[Proposal]
    proposals: list[IsrProposal]
    broker_epoch: int


class IsrPump:
    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        # The product's ISR proposals (in memory: a crash loses them, as the process's do),
        # and whether AlterPartitionSender's drain task runs
        self.proposals = IsrProposals()
        self.sending = False

    def expiration(self) -> None:
        """Kafka's isr-expiration task, every replica.lag.time.max.ms / 2."""
        broker = self.broker
        for partition in list(broker.replicas.partitions.values()):
            if partition.is_leader:
                self.maybe_change(partition)
        broker.later(max(broker.world.plan.replica_lag_time_max_ms // 2, 50), self.expiration)

    def maybe_change(self, partition: Partition) -> None:
        broker = self.broker
        change = partition.isr_change_needed(broker.wall, broker.eligible)
        if change is None:
            return
        broker.stats.isr_proposals += 1
        leader = partition.leader
        assert leader is not None
        for r in change.added:
            idle = broker.wall - leader.followers[r].last_fetch_ms
            if idle > broker.world.plan.replica_lag_time_max_ms:
                # Kafka expands the ISR only on the follower's own fetch (maybeExpandIsr):
                # this one has not fetched for longer than replica.lag.time.max.ms.
                broker.stats.idle_isr_adds += 1
                broker.trace(
                    f"{partition.name}: adds b{r} to the ISR though it has not fetched for "
                    f"{idle} ms"
                )
        broker.trace(
            f"{partition.name}: propose ISR {list(change.isr)} (le {partition.leader_epoch} pe "
            f"{partition.partition_epoch}; +{list(change.added)} -{list(change.removed)})"
        )
        self.submit(partition, change)
        broker.world.checker.touched((partition.topic, partition.index))

    def submit(self, partition: Partition, change: IsrChange) -> None:
        """AlterPartitionSender.submit: into the product's queue; the drain task, if not
        running, starts on the next turn of the event loop (asyncio.create_task)."""
        self.proposals.submit(partition, change)
        self._wake()

    def _wake(self) -> None:
        if not self.sending and self.proposals.has_queued:
            self.sending = True
            self.broker.later(0, self._drain)

    def _drain(self) -> None:
        """AlterPartitionSender._drain: while changes are queued, take them and send those
        still pending in one request (one in flight: the next round starts once every
        answer was applied)."""
        broker = self.broker
        while self.proposals.has_queued:
            live, settled = self.proposals.take()
            for p in settled:
                broker.stats.isr_unsent += 1
                broker.trace(
                    f"{p.partition.name}: AlterPartition isr={list(p.change.isr)} not sent: "
                    "no longer pending"
                )
            if not live:
                continue
            proposals = []
            for p in live:
                partition = p.partition
                proposals.append(
                    IsrProposal(
                        partition.topic_id,
                        partition.index,
                        p.leader_epoch,
                        p.partition_epoch,
                        p.change.isr,
                    )
                )
                broker.trace(
                    f"{partition.name}: send AlterPartition isr={list(p.change.isr)} "
                    f"le={p.leader_epoch} pe={p.partition_epoch}"
                    + (
                        f" (the partition is at le {partition.leader_epoch} pe "
                        f"{partition.partition_epoch})"
                        if (p.leader_epoch, p.partition_epoch)
                        != (partition.leader_epoch, partition.partition_epoch)
                        else ""
                    )
                )
            broker.stats.batched_alter_requests += len(proposals) > 1
            self._attempt(AlterCall(live, proposals, broker.broker_epoch))
            return
        self.sending = False

    def _attempt(self, call: AlterCall) -> None:
        """LifecycleClient.call_controller: the product's tries of the same request (a
        whole-request error, STALE_BROKER_EPOCH, is a failed try as no answer is)."""

        def answered(answer: Any) -> None:
            self._done(call, answer if isinstance(answer, list) else [])

        args = (self.broker.id, call.broker_epoch, call.proposals)
        self.broker.link.call(
            "handle_alter_partition", args, answered, call.broker_epoch, retry=True
        )

    def _done(self, call: AlterCall, results: list[IsrResult]) -> None:
        """AlterPartitionSender._send's end: each partition's result (none: NO_ANSWER) to
        ReplicaManager._isr_answered, the product's rule; then the drain goes on."""
        by_key = {(r.topic_id, r.partition_id): r for r in results}
        for p, proposal in zip(call.batch, call.proposals, strict=True):
            self._answered(p, proposal, by_key.get((proposal.topic_id, proposal.partition_id)))
        self._drain()

    def _answered(self, p: Proposal, proposal: IsrProposal, answer: IsrResult | None) -> None:
        broker = self.broker
        partition, change = p.partition, p.change
        broker.world.checker.touched((partition.topic, partition.index))
        if answer is not None and answer.error is None and answer.registration is not None:
            reg = answer.registration
            outcome = self.proposals.answered(partition, change, None, reg.isr, reg.partition_epoch)
            broker.trace(
                f"{partition.name}: ISR is now {list(reg.isr)} (partition epoch "
                f"{reg.partition_epoch})"
                + ("" if outcome is Outcome.COMMITTED else f"; {outcome.value}")
            )
            return
        broker.stats.isr_refusals += 1
        error = answer.error if answer is not None else None
        name = "NO_ANSWER" if error is None else error.error_name
        outcome = self.proposals.answered(partition, change, name)
        broker.trace(
            f"{partition.name}: ISR change to {list(change.isr)} not accepted: {name}; "
            f"{outcome.value}"
        )
        if outcome is Outcome.RETRY:
            broker.later(ISR_RETRY_BACKOFF_MS, self._resend, partition, change)
        elif outcome is Outcome.DROPPED:
            broker.world.checker.note_refusal(broker, partition, proposal, change, name)

    def _resend(self, partition: Partition, change: IsrChange) -> None:
        """ReplicaManager._resend_isr_change."""
        tp = (partition.topic, partition.index)
        served = self.broker.replicas.partitions.get(tp) is partition
        if self.proposals.resend(partition, change, served):
            self.broker.stats.isr_resends += 1
            self._wake()
