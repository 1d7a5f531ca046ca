"""ISR changes on their way to the controller (Kafka's AlterPartitionManager): the pump that
sends what broker/isr_proposals.py queues, one AlterPartition request in flight at a time,
and hands each partition's answer back. The rules (what is sent, what an answer does) are
IsrProposals', which the replication simulator drives too."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from broker.isr_proposals import IsrProposals, Proposal
from broker.partition import Partition
from broker.partition_leader import IsrChange
from strom_api.v1 import controller_pb2

log = logging.getLogger("strom.isr")

Answer = Callable[[Partition, IsrChange, Any | None], None]


class AlterPartitionSender:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        controller_call: Callable[[str, Any], Awaitable[Any | None]],
        on_answer: Answer,
    ) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.controller_call = controller_call
        self.on_answer = on_answer
        self.requests_sent = 0
        self.proposals = IsrProposals()
        self._task: asyncio.Task[None] | None = None

    def submit(self, partition: Partition, change: IsrChange) -> None:
        self.proposals.submit(partition, change)
        self.wake()

    def wake(self) -> None:
        """Starts sending what is queued, unless a request is out already."""
        if self.proposals.has_queued and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._drain())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _drain(self) -> None:
        while self.proposals.has_queued:
            live, _settled = self.proposals.take()
            if live:
                await self._send(live)

    async def _send(self, batch: list[Proposal]) -> None:
        request = controller_pb2.AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch(),
            partitions=[
                controller_pb2.AlterPartitionRequest.Partition(
                    topic_id=p.partition.topic_id,
                    partition=p.partition.index,
                    leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch,
                    new_isr=list(p.change.isr),
                )
                for p in batch
            ],
        )
        self.requests_sent += 1
        try:
            response = await self.controller_call("AlterPartition", request)
        except Exception:  # an answer must reach every partition, or its ISR stays pending
            log.exception("AlterPartition failed")
            response = None
        answers = {}
        if response is not None:
            answers = {(a.topic_id, a.partition): a for a in response.partitions}
        for p in batch:
            key = (p.partition.topic_id, p.partition.index)
            self.on_answer(p.partition, p.change, answers.get(key))
