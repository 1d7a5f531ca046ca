"""ISR changes on their way to the controller (Kafka's AlterPartitionManager): the changes
this broker's leaders propose are queued and sent together, one AlterPartition request in
flight at a time, so a broker coming back to a thousand partitions costs a few requests
and metadata commits, not a thousand. Each partition's answer goes back to it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

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
        # key -> (partition, change, leader epoch, partition epoch at proposal time)
        self._pending: dict[tuple[bytes, int], tuple[Partition, IsrChange, int, int]] = {}
        self._task: asyncio.Task[None] | None = None

    def submit(self, partition: Partition, change: IsrChange) -> None:
        """Queues `change`, stamped with the epochs it was computed against: a change
        computed on an older ISR must never be applied to a newer one."""
        self._pending[(partition.topic_id, partition.index)] = (
            partition,
            change,
            partition.leader_epoch,
            partition.partition_epoch,
        )
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, {}
            # A change the metadata settled meanwhile (no longer the pending one) stays home.
            live = [
                item
                for item in batch.values()
                if item[0].leader is not None and item[0].leader.pending is item[1]
            ]
            if live:
                await self._send(live)

    async def _send(self, batch: list[tuple[Partition, IsrChange, int, int]]) -> None:
        request = controller_pb2.AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch(),
            partitions=[
                controller_pb2.AlterPartitionRequest.Partition(
                    topic_id=p.topic_id,
                    partition=p.index,
                    leader_epoch=leader_epoch,
                    partition_epoch=partition_epoch,
                    new_isr=list(change.isr),
                )
                for p, change, leader_epoch, partition_epoch in batch
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
        for partition, change, _, _ in batch:
            self.on_answer(partition, change, answers.get((partition.topic_id, partition.index)))
