"""InitProducerId without transactions: producer ids come from blocks the controller hands
this broker (AllocateProducerIds, 1,000 at a time, recorded in the metadata log so no id
is ever given twice in the cluster), as Kafka's ProducerIdManager does.

A producer that asks again with its id and epoch (KIP-360: after UNKNOWN_PRODUCER_ID or an
epoch overflow) gets the same id with the next epoch; at the epoch's limit it gets a new id.
Only an id the controller has handed out (below the metadata's next producer id block) is
bumped: any other is answered with a new id, as Kafka answers every non-transactional
InitProducerId, so no request can mint itself an id some broker will give out later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode
from strom_api.v1 import common_pb2, controller_pb2

MAX_EPOCH = 32767  # producer epochs are int16


class ProducerIdManager:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        controller_call: Callable[[str, Any], Awaitable[Any | None]],
        issued_below: Callable[[], int] = lambda: 0,
    ) -> None:
        """`issued_below`: the first producer id the controller has not handed out yet."""
        self.issued_below = issued_below
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.controller_call = controller_call
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def init_producer_id(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        if transactional_id:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                "Transactions are not supported: leave transactional.id unset; idempotent "
                "producers need none.",
            )
        issued = 0 <= producer_id < max(self.issued_below(), self._end)
        if issued and 0 <= producer_epoch < MAX_EPOCH - 1:
            return producer_id, producer_epoch + 1
        return await self._new_id(), 0

    async def _new_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                await self._allocate()
            self._next += 1
            return self._next - 1

    async def _allocate(self) -> None:
        request = controller_pb2.AllocateProducerIdsRequest(
            broker_id=self.broker_id, broker_epoch=self.broker_epoch()
        )
        response = await self.controller_call("AllocateProducerIds", request)
        if response is None:
            raise ApiError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "No controller answered the request for a block of producer ids; try again.",
            )
        if response.HasField("error") and response.error.error.code != 0:
            name = common_pb2.ErrorCode.Name(response.error.error.code)
            raise ApiError(ErrorCode(name), response.error.error.message)
        self._next = response.first_producer_id
        self._end = response.first_producer_id + response.count
