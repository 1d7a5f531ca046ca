"""All partition logs of a node, across its `log.dirs`. Not thread-safe.

Each partition lives in `<log dir>/<topic>-<partition>/`. Per log directory, as in Kafka:
  recovery-point-offset-checkpoint   topic partition offset  (all below is fsynced)
  replication-offset-checkpoint      topic partition offset  (high watermarks)
  log-start-offset-checkpoint        topic partition offset
  .kafka_cleanshutdown               present only between a clean shutdown and the next start
One checkpoint file per directory means one fsync covers every partition in it. After a
clean shutdown no segment is scanned at start-up; after a crash each log scans only from its
recovery point. A checkpoint file is rewritten only when one of its offsets changed since it
was last written (each log tells its manager when one of its three offsets moves), so a
broker of idle partitions writes nothing, and the periodic checkpoint costs what changed
before it costs a write of the whole file.

A log directory goes offline at its first OSError (storage.log_dir_failures): from then on
its logs refuse work, its checkpoints and clean-shutdown marker are no longer written (what
is on its disk is left for recovery to judge), and new partitions go to the directories
still online. A directory that fails at start-up is offline from the start, as in Kafka.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Sequence

from storage import checkpoint
from storage.cleaner import clean
from storage.clock import Clock, SystemClock
from storage.config import LogConfig
from storage.errors import KafkaStorageError, LogDirError
from storage.file_io import atomic_write, fsync_dir
from storage.log import Log
from storage.log_dir_failures import LogDirFailureChannel
from storage.names import validate_topic

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

TopicPartition = tuple[str, int]
_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]{1,249})-(?P<partition>\d+)$")


def _marker_epoch(path: str) -> int:
    """The broker epoch in a clean-shutdown marker; -1 when it holds none (an empty marker
    from before KIP-966, or one that does not parse)."""
    try:
        with open(path, "rb") as f:
            epoch = json.loads(f.read() or b"{}").get("brokerEpoch", -1)
    except (OSError, ValueError, AttributeError):
        return -1
    return epoch if isinstance(epoch, int) else -1


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[str],
        default_config: LogConfig | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not log_dirs:
            raise LogDirError("log.dirs is empty: at least one log directory is required")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self.clock = clock or SystemClock()
        self.failures = LogDirFailureChannel()
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        # How many logs each directory holds: where a new log goes, without counting
        # 10,000 logs for each of 10,000 new ones.
        self._held: dict[str, int] = {d: 0 for d in self.log_dirs}
        # Per log directory: the logs whose offsets moved (or that came or went) since its
        # checkpoints were last written, and the offsets those hold (recovery point, high
        # watermark, log start). The loop adds, the checkpoint thread pops: set.add and
        # set.pop are atomic, and a log that moves again after its pop is added again.
        self._dirty: dict[str, set[TopicPartition]] = {d: set() for d in self.log_dirs}
        self._written: dict[str, dict[TopicPartition, tuple[int, int, int]]] = {
            d: {} for d in self.log_dirs
        }
        self._checkpointed: set[str] = set()  # written at least once by this process
        self.had_clean_shutdown = False
        # KIP-966: the broker epoch the clean-shutdown markers recorded (-1: none, or not
        # the same in every directory); the broker sends it when it registers.
        self.previous_broker_epoch = -1

    def startup(self, configs: dict[str, LogConfig] | None = None) -> None:
        """Opens every partition log found; `configs` maps topics to their LogConfig."""
        configs = configs or {}
        clean_everywhere = True
        epochs = set()
        for log_dir in self.log_dirs:
            try:
                was_clean, epoch = self._load_dir(log_dir, configs)
            except OSError as exc:
                self.failures.mark_offline(
                    log_dir, f"loading its logs failed: {exc.strerror or exc}"
                )
                was_clean, epoch = False, -1
            clean_everywhere &= was_clean
            epochs.add(epoch)
        self.had_clean_shutdown = clean_everywhere and bool(self.log_dirs)
        self.previous_broker_epoch = epochs.pop() if len(epochs) == 1 else -1

    def _load_dir(self, log_dir: str, configs: dict[str, LogConfig]) -> tuple[bool, int]:
        """Opens the logs of one directory; returns whether it was shut down cleanly and
        the broker epoch its marker recorded (-1 if none)."""
        os.makedirs(log_dir, exist_ok=True)
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        was_clean = os.path.exists(marker)
        epoch = _marker_epoch(marker) if was_clean else -1
        recovery = checkpoint.read_offsets(os.path.join(log_dir, RECOVERY_POINT_FILE))
        hws = checkpoint.read_offsets(os.path.join(log_dir, HIGH_WATERMARK_FILE))
        starts = checkpoint.read_offsets(os.path.join(log_dir, LOG_START_FILE))
        for name in sorted(os.listdir(log_dir)):
            match = _PARTITION_DIR.match(name)
            if not match or not os.path.isdir(os.path.join(log_dir, name)):
                continue
            tp = (match["topic"], int(match["partition"]))
            if tp in self.logs:
                raise LogDirError(f"partition {tp[0]}-{tp[1]} is in two log directories")
            self.logs[tp] = Log.open(
                os.path.join(log_dir, name),
                configs.get(tp[0], self.default_config),
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
                high_watermark=hws.get(tp, 0),
                clean_shutdown=was_clean,
                clock=self.clock,
                failures=self.failures,
            )
            self._track(tp, log_dir)
        if was_clean:
            # From here on, a crash is unclean again.
            os.unlink(marker)
            fsync_dir(log_dir)
        return was_clean, epoch

    # --- log directories ----------------------------------------------------------------

    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if not self.failures.is_offline(d)]

    def offline_dir_count(self) -> int:
        return len(self.log_dirs) - len(self.online_dirs())

    def dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def logs_in(self, log_dir: str) -> list[TopicPartition]:
        return [tp for tp, d in self._dir_of.items() if d == log_dir]

    def _online_logs(self) -> list[Log]:
        return [log for log in self.logs.values() if not log.offline]

    # --- logs ---------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        sync_dir: bool = True,
    ) -> Log:
        """`sync_dir` False: the caller fsyncs the log directory itself (`sync_dirs`), once
        for all the logs it creates in one go, instead of once per log."""
        tp = (topic, partition)
        log = self.logs.get(tp)
        if log is not None:
            return log
        validate_topic(topic, partition)
        # A new partition goes to the online directory holding the fewest, as Kafka places
        # them.
        online = self.online_dirs()
        if not online:
            raise KafkaStorageError(
                f"cannot create the log of {topic}-{partition}: every log directory is offline",
                self.log_dirs[0],
            )
        log_dir = min(online, key=self._held.__getitem__)
        try:
            log = Log.open(
                os.path.join(log_dir, f"{topic}-{partition}"),
                config or self.default_config,
                clock=self.clock,
                failures=self.failures,
            )
            if sync_dir:
                fsync_dir(log_dir)
        except OSError as exc:
            why = f"creating the log of {topic}-{partition} failed: {exc.strerror or exc}"
            self.failures.mark_offline(log_dir, why)
            raise KafkaStorageError(
                f"Disk error in log directory {log_dir}: {why}", log_dir
            ) from exc
        self.logs[tp] = log
        self._track(tp, log_dir)
        return log

    def _track(self, tp: TopicPartition, log_dir: str) -> None:
        """`tp`'s log lives in `log_dir` from now on; its offsets go into the next
        checkpoint, and into every later one where they changed."""
        previous = self._dir_of.get(tp)
        if previous is not None:
            self._held[previous] -= 1
        self._dir_of[tp] = log_dir
        self._held[log_dir] += 1
        dirty = self._dirty[log_dir]
        self.logs[tp].on_offsets_changed = lambda: dirty.add(tp)
        dirty.add(tp)

    def sync_dirs(self, log_dirs: Iterable[str]) -> None:
        """fsyncs each of `log_dirs` (online ones), so the logs created in them are there
        after a crash; one that fails goes offline."""
        for log_dir in set(log_dirs):
            if self.failures.is_offline(log_dir):
                continue
            try:
                fsync_dir(log_dir)
            except OSError as exc:
                why = f"creating logs failed: {exc.strerror or exc}"
                self.failures.mark_offline(log_dir, why)

    def delete_log(self, topic: str, partition: int) -> None:
        tp = (topic, partition)
        log = self.logs.pop(tp, None)
        if log is not None:
            log_dir = self._dir_of.pop(tp)
            self._held[log_dir] -= 1
            log.on_offsets_changed = None
            self._dirty[log_dir].add(tp)  # out of the next checkpoint
            log.delete()
            if self.failures.is_offline(log_dir):
                return  # its files stay for whoever repairs the disk
            try:
                fsync_dir(log_dir)
            except OSError as exc:
                why = f"deleting {topic}-{partition} failed: {exc.strerror or exc}"
                self.failures.mark_offline(log_dir, why)

    def flush_all(self) -> None:
        for log in self._online_logs():
            log.flush()

    def flush_dirty_logs(self) -> int:
        """Flushes every log whose `flush.ms` has passed; returns how many."""
        return sum(log.flush_if_due() for log in self._online_logs())

    def checkpoint(self) -> None:
        """Writes the three offset checkpoints of every online log directory. A directory
        that fails to take them goes offline; the others are still written, then
        KafkaStorageError is raised."""
        failed: KafkaStorageError | None = None
        for log_dir in self.online_dirs():
            try:
                self._checkpoint_dir(log_dir)
            except OSError as exc:
                why = f"writing the offset checkpoints failed: {exc.strerror or exc}"
                self.failures.mark_offline(log_dir, why)
                failed = KafkaStorageError(f"Disk error in log directory {log_dir}: {why}", log_dir)
        if failed is not None:
            raise failed

    def _checkpoint_dir(self, log_dir: str) -> None:
        """Rewrites those of the directory's three checkpoints whose offsets changed."""
        written, dirty = self._written[log_dir], self._dirty[log_dir]
        first = log_dir not in self._checkpointed  # all three, even for no partition
        changed = [first, first, first]
        while dirty:
            tp = dirty.pop()
            log = self.logs.get(tp)
            if log is None or self._dir_of.get(tp) != log_dir:
                if written.pop(tp, None) is not None:
                    changed = [True, True, True]
                continue
            offsets = (log.recovery_point, log.high_watermark, log.log_start_offset)
            before = written.get(tp)
            if before != offsets:
                written[tp] = offsets
                for i in range(3):
                    changed[i] |= before is None or before[i] != offsets[i]
        for i, name in enumerate((RECOVERY_POINT_FILE, HIGH_WATERMARK_FILE, LOG_START_FILE)):
            if changed[i]:
                checkpoint.write_offsets(
                    os.path.join(log_dir, name), {tp: o[i] for tp, o in written.items()}
                )
        self._checkpointed.add(log_dir)

    def cleanup(self) -> tuple[int, int]:
        """One round of retention and compaction over every log: (segments deleted,
        records compacted away). The broker runs it every log.retention.check.interval.ms."""
        deleted = removed = 0
        for log in self._online_logs():
            if log.config.compact:
                removed += clean(log).records_removed
            deleted += log.delete_old_segments()
        return deleted, removed

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Flush, checkpoint, close, then mark each directory as cleanly shut down, with the
        broker's epoch (Kafka's {"version":0,"brokerEpoch":N}) for KIP-966's detection.
        An offline directory gets none of this: no marker, so the next start recovers it."""
        for log in self._online_logs():
            with contextlib.suppress(KafkaStorageError):  # its directory is offline now
                log.flush()
        with contextlib.suppress(KafkaStorageError):
            self.checkpoint()
        for log in self.logs.values():
            if log.offline:
                log.release()
            else:
                with contextlib.suppress(KafkaStorageError):
                    log.close()
        marker = json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode()
        for log_dir in self.online_dirs():
            try:
                atomic_write(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), marker)
            except OSError as exc:
                why = f"writing the clean-shutdown marker failed: {exc.strerror or exc}"
                self.failures.mark_offline(log_dir, why)
        self.logs.clear()
        self._dir_of.clear()
        for log_dir in self.log_dirs:
            self._held[log_dir] = 0
            self._dirty[log_dir].clear()
            self._written[log_dir].clear()
        self._checkpointed.clear()
