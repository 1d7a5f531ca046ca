"""The replicas a simulated broker holds on its disk: the storage engine's own LogManager over
the broker's directory (one Log per replica, the three offset checkpoints per directory, the
clean-shutdown marker with the broker epoch), and a broker.partition.Partition over each Log
once the metadata names it (ReplicaManager._apply). Pumped as server/node.py pumps them:

- start: LogManager.startup opens every log found, each with its checkpointed high
  watermark, log start and recovery point (after a crash it scans from the recovery point);
  the marker's broker epoch is what the broker registers with (KIP-966);
- a registration naming a replica with no log yet: the log is created first (the node's disk
  work between detach and attach), then the Partition;
- the checkpoint loop (replica.high.watermark.checkpoint.interval.ms) and DeleteRecords
  (persist_offsets) write the checkpoints with LogManager.checkpoint;
- a crash closes the files without a word (no flush, no checkpoint: the page cache keeps
  every write); a clean stop snapshots every partition's producers and runs
  LogManager.shutdown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.partition import Partition
from broker.topic_settings import TopicSettings
from metadata.image import PartitionRegistration
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager
from tests.replication_sim.controller import TopicPartition

if TYPE_CHECKING:
    from tests.replication_sim.broker import SimBroker


class Replicas:
    def __init__(self, broker: SimBroker, directory: str) -> None:
        self.broker = broker
        self.directory = directory
        plan = broker.world.plan
        self.log_config = LogConfig(segment_bytes=plan.segment_bytes, retention_ms=-1)
        self.settings = TopicSettings(
            log=self.log_config, min_insync_replicas=plan.min_insync_replicas
        )
        self.manager: LogManager | None = None
        self.partitions: dict[TopicPartition, Partition] = {}
        self.by_id: dict[tuple[bytes, int], Partition] = {}
        # Called with a partition that changed (Partition.on_change)
        self.on_change: Callable[[TopicPartition], None] = lambda tp: None

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return {} if self.manager is None else self.manager.logs

    # --- the process ---------------------------------------------------------------------

    def open(self) -> int:
        """The process starts: every log opened; returns the broker epoch of the
        clean-shutdown marker (-1: none, the last stop was a crash)."""
        manager = LogManager([self.directory], self.log_config, clock=self.broker.world.clock)
        manager.startup()
        self.manager = manager
        return manager.previous_broker_epoch

    def crash(self) -> None:
        assert self.manager is not None
        for log in self.manager.logs.values():
            for segment in log.segments:  # no flush, no index write: the page cache keeps it
                segment.close_file()
        self._forget()

    def clean_stop(self, broker_epoch: int) -> None:
        assert self.manager is not None
        for partition in self.partitions.values():
            partition.snapshot_producers()
        self.manager.shutdown(broker_epoch)
        self._forget()

    def close(self) -> None:
        """The run is over: the files closed (nothing more is checked)."""
        if self.manager is not None:
            for log in self.manager.logs.values():
                log.close()
            self._forget()

    def _forget(self) -> None:
        self.manager = None
        self.partitions = {}
        self.by_id = {}

    def checkpoint(self) -> None:
        """LogManager.checkpoint (Node._checkpoint_now)."""
        if self.manager is not None:
            self.manager.checkpoint()

    # --- the metadata ----------------------------------------------------------------------

    def apply(
        self, tp: TopicPartition, topic_id: bytes, registration: PartitionRegistration
    ) -> tuple[Partition, bool]:
        """ReplicaManager._apply: the replica's Partition (its log created if need be) takes
        the registration; returns it and whether its role or leader changed."""
        manager = self.manager
        assert manager is not None
        partition = self.partitions.get(tp)
        if partition is None:
            created = manager.get_log(*tp) is None
            log = manager.get_or_create_log(*tp)
            if created:
                self.broker.world.checker.on_log_opened(self.broker, tp, log)
            partition = Partition(
                tp[0],
                tp[1],
                topic_id,
                log,
                self.broker.id,
                self.settings,
                self.broker.world.plan.replica_lag_time_max_ms,
            )
            partition.on_change = lambda: self.on_change(tp)
            self.partitions[tp] = partition
            self.by_id[(topic_id, tp[1])] = partition
            self.broker.leader.replica_created()
        moved = partition.apply_registration(registration, self.broker.wall, self.settings)
        return partition, moved
