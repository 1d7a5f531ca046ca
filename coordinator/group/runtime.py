"""The group coordinator's asyncio pump (Kafka's CoordinatorRuntime, for one coordinator):
it takes the clock, turns each request into an event for the sans-I/O core
(coordinator/group/core.py), and carries out the effects the core returns: completes the
waiting requests, appends to `__consumer_offsets` through the broker's
`CoordinatorPartitions` and reports each outcome back, reads a partition when this broker
starts leading it, and runs `tick` by the deadline the core asks for. No decision is made
here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol, TypeVar, cast

from coordinator.group.config import GroupConfig
from coordinator.group.core import OFFSETS_TOPIC, CoordinatorBug, GroupCoordinatorCore
from coordinator.group.messages import (
    Answer,
    Append,
    CommitResult,
    DeleteGroup,
    DeleteOffsetsResult,
    Effects,
    FetchResult,
    Heartbeat,
    JoinGroup,
    JoinResult,
    LeaveGroup,
    LeaveResult,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
    SyncResult,
)
from coordinator.group.state import Group
from coordinator.partitions import CoordinatorPartitions
from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode

log = logging.getLogger("strom.groups")

T = TypeVar("T")
M = TypeVar("M", contravariant=True)

# A tick never runs sooner than this after the previous one, whatever the core asks.
_MIN_TICK_S = 0.01


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionRole(Protocol):
    """The broker's view of one of its partitions (broker/partition.py's Partition)."""

    @property
    def topic(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def is_leader(self) -> bool: ...


class GroupCoordinator:
    def __init__(
        self,
        broker_id: int,
        partitions: CoordinatorPartitions,
        config: GroupConfig | None = None,
    ) -> None:
        self.partitions = partitions
        self.config = config or GroupConfig()
        self.core = GroupCoordinatorCore(
            broker_id, self.config, partitions.partition_count, now_ms()
        )
        self._requests: dict[int, asyncio.Future[Answer]] = {}
        self._next_request = 0
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at_ms: int | None = None
        self._stopped = False

    def start(self) -> None:
        self._schedule_tick(now_ms())

    async def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        for task in self._loading.values():
            task.cancel()
        self._run(self.core.shut_down)

    # --- requests -------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.core.partition_for(group_id)

    async def join_group(self, join: JoinGroup) -> JoinResult:
        return cast(JoinResult, await self._call(self.core.join_group, join))

    async def sync_group(self, sync: SyncGroup) -> SyncResult:
        return cast(SyncResult, await self._call(self.core.sync_group, sync))

    async def heartbeat(self, beat: Heartbeat) -> None:
        await self._call(self.core.heartbeat, beat)

    async def leave_group(self, leave: LeaveGroup) -> tuple[LeaveResult, ...]:
        return cast(tuple[LeaveResult, ...], await self._call(self.core.leave_group, leave))

    async def commit_offsets(self, commit: OffsetCommit) -> CommitResult:
        return cast(CommitResult, await self._call(self.core.commit_offsets, commit))

    async def fetch_offsets(self, fetch: OffsetFetch) -> FetchResult:
        return cast(FetchResult, await self._call(self.core.fetch_offsets, fetch))

    async def delete_group(self, group_id: str) -> None:
        await self._call(self.core.delete_group, DeleteGroup(group_id))

    async def delete_offsets(self, delete: OffsetDelete) -> DeleteOffsetsResult:
        return cast(DeleteOffsetsResult, await self._call(self.core.delete_offsets, delete))

    async def _call(self, handler: _Handler[T], request: T) -> Answer:
        self._next_request += 1
        request_id = self._next_request
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._requests[request_id] = future
        self._run(lambda: handler(request_id, request, now_ms()))
        return await future

    # --- reading --------------------------------------------------------------------

    def describe(self, group_id: str) -> Group | None:
        return self.core.describe(group_id)

    def list_groups(self) -> list[Group]:
        return self.core.list_groups()

    def committed_offsets(self) -> list[tuple[str, str, int, int]]:
        """For metrics, read on the event loop."""
        return self.core.committed_offsets()

    # --- partitions -------------------------------------------------------------------

    def on_partition_role(self, partition: PartitionRole) -> None:
        """Called when this broker's role for a partition changed (or it went away)."""
        if partition.topic != OFFSETS_TOPIC:
            return
        index = partition.index
        if partition.is_leader:
            if self.core.begin_load(index):
                self._loading[index] = asyncio.create_task(self._load(index))
            return
        task = self._loading.pop(index, None)
        if task is not None:
            task.cancel()
        self._run(lambda: self.core.unload(index, now_ms()))

    async def _load(self, index: int) -> None:
        try:
            for chunk in self.partitions.read(OFFSETS_TOPIC, index):
                self.core.load_records(index, chunk)
                await asyncio.sleep(0)  # let requests in between chunks
            self._run(lambda: self.core.load_finished(index, now_ms()))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("could not load %s-%d", OFFSETS_TOPIC, index)
            self.core.load_failed(index)
        finally:
            if self._loading.get(index) is asyncio.current_task():
                del self._loading[index]

    # --- effects --------------------------------------------------------------------

    def _apply(self, effects: Effects) -> None:
        for response in effects.responses:
            future = self._requests.pop(response.request)
            if future.done():  # the caller went away (its RPC was cancelled)
                continue
            if response.error is not None:
                future.set_exception(response.error)
            else:
                future.set_result(response.answer)
        for append in effects.appends:
            task = asyncio.create_task(self._append(append))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if effects.wakeup_ms is not None:
            self._schedule_tick(effects.wakeup_ms)

    async def _append(self, append: Append) -> None:
        try:
            error = await self.partitions.append(
                OFFSETS_TOPIC,
                append.partition,
                append.records,
                now_ms(),
                self.config.offsets_commit_timeout_ms,
            )
        except Exception as exc:  # the broker's bug: the waiting request still gets an answer
            log.exception("append to %s-%d failed", OFFSETS_TOPIC, append.partition)
            error = ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, f"The append failed: {exc}")
        self._run(lambda: self.core.append_done(append.write, error, now_ms()))

    def _schedule_tick(self, at_ms: int) -> None:
        if self._stopped or (self._timer_at_ms is not None and self._timer_at_ms <= at_ms):
            return
        if self._timer is not None:
            self._timer.cancel()
        delay_s = max((at_ms - now_ms()) / 1000, _MIN_TICK_S)
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._tick)
        self._timer_at_ms = at_ms

    def _tick(self) -> None:
        self._timer = self._timer_at_ms = None
        if not self._run(lambda: self.core.tick(now_ms())):
            self._schedule_tick(now_ms() + 100)  # the failed tick set no next deadline

    def _run(self, step: Callable[[], Effects]) -> bool:
        """Runs a step of the core and carries out its effects, those of a failed step too
        (logged: a failed step is a coordinator bug). False when it failed."""
        try:
            effects = step()
        except CoordinatorBug as bug:
            log.exception("group coordinator step failed")
            self._apply(bug.effects)
            return False
        self._apply(effects)
        return True


class _Handler(Protocol[M]):
    """One of the core's request handlers: (request id, message, now_ms) -> Effects."""

    def __call__(self, request: int, message: M, now_ms: int, /) -> Effects: ...
