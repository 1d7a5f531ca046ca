"""The broker's background log work (Kafka's LogManager scheduler and LogCleaner):

- every `log.retention.check.interval.ms`: retention (segments past `retention.ms` /
  `retention.bytes` or below the log start, the active segment too once it has expired,
  so an idle topic empties) on every local replica, then one compaction
  pass over each log whose `cleanup.policy` has `compact`;
- every `log.flush.scheduler.interval.ms`: the logs whose `flush.ms` has passed are fsynced
  (Kafka's defaults never flush by time: replication, not fsync, makes records durable).

Retention and flushes run on the event loop (a retention pass unlinks files; a flush is due
only when a user set flush.ms), so they never race a request on the same log. Compaction
reads and rewrites closed segments in a thread, and only the swap of cleaned segments into
the log runs on the loop. A partition whose log directory is offline after a disk error
is left alone: its files wait for a restart's recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable

from broker.partition import Partition
from broker.replica_config import ReplicaConfig
from storage.cleaner import clean
from storage.errors import StorageError
from storage.log import CLEANED_SUFFIX
from storage.segment import SUFFIXES, LogSegment, file_name

log = logging.getLogger("strom.maintenance")


class LogMaintenance:
    def __init__(self, partitions: Callable[[], list[Partition]], config: ReplicaConfig) -> None:
        self.partitions = partitions
        self.config = config
        self.segments_deleted = 0
        self.records_compacted = 0
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks.append(
            asyncio.create_task(
                self._every(self.config.retention_check_interval_ms, self.retention_and_compaction)
            )
        )
        self._tasks.append(
            asyncio.create_task(
                self._every(self.config.flush_scheduler_interval_ms, self._flush_due)
            )
        )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _every(self, interval_ms: int, work: Callable[[], object]) -> None:
        if interval_ms >= 2**62:
            return  # Long.MAX_VALUE: never
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                result = work()
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                log.exception("background log work failed")

    def _online(self) -> list[Partition]:
        return [p for p in self.partitions() if not p.offline]

    async def retention_and_compaction(self) -> None:
        for partition in self._online():
            active = partition.log.active_segment.base_offset
            try:
                deleted = partition.log.delete_old_segments()
                if partition.log.active_segment.base_offset != active:
                    # Every segment expired and the log rolled (storage.retention): the
                    # producers' state is snapshotted at the new segment, as at every
                    # Kafka roll, since no batch is left to rebuild it from on restart.
                    partition.snapshot_producers()
            except (StorageError, OSError) as exc:
                log.warning("retention of %s failed: %s", partition.name, exc)
                continue
            if deleted:
                self.segments_deleted += deleted
                log.info("deleted %d segment(s) of %s by retention", deleted, partition.name)
                partition.on_change()
        for partition in self._online():
            if partition.log.config.compact:
                await self._compact(partition)

    async def _compact(self, partition: Partition) -> None:
        loop = asyncio.get_running_loop()

        def swap_on_loop(group: list[LogSegment], base: int) -> LogSegment:
            future = asyncio.run_coroutine_threadsafe(_swap(partition, group, base), loop)
            return future.result(timeout=60)  # the loop may be stopping

        try:
            result = await asyncio.to_thread(clean, partition.log, None, swap_on_loop)
        except (StorageError, OSError) as exc:
            # A segment deleted or truncated under the cleaner (retention, a follower
            # truncating): the next pass starts over from the log as it is then. Not a
            # reason to take the directory offline, since such a race raises OSError too
            # (a closed file); a failing disk is caught by the log's own next operation.
            log.warning("compaction of %s stopped: %s", partition.name, exc)
            return
        if result.records_removed:
            self.records_compacted += result.records_removed
            log.info(
                "compacted %s: %d records removed, %d -> %d bytes",
                partition.name,
                result.records_removed,
                result.bytes_before,
                result.bytes_after,
            )

    def _flush_due(self) -> None:
        for partition in self._online():
            try:
                partition.log.flush_if_due()
            except StorageError as exc:  # its log directory is offline now
                log.error("flush of %s failed: %s", partition.name, exc)


async def _swap(partition: Partition, group: list[LogSegment], base: int) -> LogSegment:
    current = partition.log.segments
    if not all(any(s is c for c in current) for s in group):
        # Retention or a truncation replaced these segments while they were being cleaned.
        for suffix in SUFFIXES:
            path = os.path.join(partition.log.directory, file_name(base, suffix) + CLEANED_SUFFIX)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        raise StorageError(f"the segments of {partition.name} changed during compaction")
    return partition.log.replace_segments(group, base)
