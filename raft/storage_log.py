"""The Raft log on the storage engine: the `__cluster_metadata-0` partition.

Entries are stored as Kafka RecordBatch v2 batches, one batch per run of entries that share
an epoch and kind: the entry's epoch is the batch's partitionLeaderEpoch (so storage's
leader-epoch cache answers end_offset_for_epoch), its data the record value, and Raft's own
records (LeaderChange) go in control batches, as in Kafka's metadata log. Not thread-safe.

The log may start after offset 0 once a snapshot holds its prefix: `base` is that snapshot's
id, which the driver finds among the snapshot files when it opens the log (raft/log.py says
what it stands in for).
"""

from __future__ import annotations

from collections.abc import Sequence

from raft.limits import INT64_MAX, MAX_EPOCH, check_range
from raft.messages import NO_SNAPSHOT, Entry, SnapshotId
from storage.errors import CorruptRecordError
from storage.log import Log
from strom_api.records import Record, decode_batches, encode_batch

METADATA_TOPIC_PARTITION = ("__cluster_metadata", 0)
_READ_BYTES = 8 * 1024 * 1024
# Entries per stored batch when several proposals share one: a read decodes whole batches,
# so small proposals are not piled into batches a fetch of a few entries must decode whole.
MAX_BATCH_ENTRIES = 256
# The newest entries, kept decoded beside the log: a leader answers its followers' fetches
# (and the node applies what commits) from memory instead of decoding the batches it wrote
# a moment ago. Decoding was a quarter of each node's samples while 10,000 partitions were
# created (docs/architecture.md §9). Bounded by entries and by their bytes.
TAIL_ENTRIES = 20_000
TAIL_BYTES = 16 << 20


def open_raft_log(log: Log, snapshots: Sequence[SnapshotId]) -> StorageRaftLog:
    """The Raft log over `log`, starting at the snapshot (of `snapshots`) where the log
    starts. A crash can leave the log starting before that snapshot's end (segments deleted,
    the new log start not yet checkpointed): it then starts at the next snapshot again."""
    start = log.log_start_offset
    if start == 0:
        return StorageRaftLog(log)
    for snapshot_id in sorted(snapshots):
        if snapshot_id.end_offset == start:
            return StorageRaftLog(log, snapshot_id)
        if snapshot_id.end_offset > start:
            if snapshot_id.end_offset <= log.log_end_offset:
                _start_log_at(log, snapshot_id.end_offset)
            else:
                log.truncate_fully_and_start_at(snapshot_id.end_offset)
            return StorageRaftLog(log, snapshot_id)
    raise CorruptRecordError(
        f"the metadata log in {log.directory} starts at offset {start}, and no snapshot holds "
        "the entries before it"
    )


class StorageRaftLog:
    """A RaftLog (raft.log) backed by a storage.Log; sync() is its fsync."""

    def __init__(self, log: Log, base: SnapshotId = NO_SNAPSHOT) -> None:
        if log.log_start_offset != base.end_offset:
            raise ValueError(
                f"the metadata log starts at offset {log.log_start_offset}, not at the end of "
                f"its snapshot {base}"
            )
        self.log = log
        self.base = base
        # The entries at offsets [_tail_start, log end), decoded; empty at open.
        self._tail: list[Entry] = []
        self._tail_start = log.log_end_offset
        self._tail_bytes = 0

    def start(self) -> SnapshotId:
        return self.base

    def end_offset(self) -> int:
        return self.log.log_end_offset

    def last_epoch(self) -> int:
        if self.log.log_end_offset == self.base.end_offset:
            return self.base.epoch
        return max(self.log.leader_epochs.latest_epoch(), 0)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        entries = self.log.leader_epochs.entries
        floor = [i for i, (e, _) in enumerate(entries) if e <= epoch]
        if not floor:
            if epoch >= self.base.epoch:
                return self.base.epoch, self.base.end_offset
            return 0, 0
        i = floor[-1]
        end = entries[i + 1][1] if i + 1 < len(entries) else self.log.log_end_offset
        return entries[i][0], end

    def epoch_starts(self) -> Sequence[tuple[int, int]]:
        # Storage's leader-epoch cache, kept with every append and truncation and rebuilt
        # by recovery: the core's epoch index comes from it without reading a batch.
        return list(self.log.leader_epochs.entries)

    def read(self, offset: int, max_entries: int) -> Sequence[Entry]:
        tail_start = self._tail_start
        if offset >= tail_start:
            index = offset - tail_start
            return self._tail[index : index + max_entries]
        out = self._read_stored(offset, min(max_entries, tail_start - offset))
        if out and len(out) < max_entries and out[-1].offset + 1 == tail_start:
            out += self._tail[: max_entries - len(out)]
        return out

    def _read_stored(self, offset: int, max_entries: int) -> list[Entry]:
        out: list[Entry] = []
        while len(out) < max_entries and offset < self.log.log_end_offset:
            data = self.log.read(offset, _READ_BYTES)
            if not data:
                break
            # Batches decode lazily, and only until enough entries are in hand: a fetch of
            # a few entries must not decode megabytes of batches behind them.
            for header, records in decode_batches(data):
                for record in records:
                    if record.offset >= offset and len(out) < max_entries:
                        out.append(
                            Entry(
                                record.offset,
                                header.partition_leader_epoch,
                                record.value or b"",
                                header.is_control,
                                _more(record),
                            )
                        )
                offset = max(offset, header.next_offset)
                if len(out) >= max_entries:
                    break
        return out

    def append(self, entries: Sequence[Entry]) -> None:
        self._write(entries)
        if entries:
            self._tail += entries
            self._tail_bytes += sum(len(e.data) for e in entries)
            self._bound_tail()

    def _bound_tail(self) -> None:
        """Drops the oldest tail entries past the bounds, a quarter more at a time (so that
        it is not done at every append)."""
        tail = self._tail
        if len(tail) <= TAIL_ENTRIES and self._tail_bytes <= TAIL_BYTES:
            return
        keep_entries, keep_bytes = TAIL_ENTRIES * 3 // 4, TAIL_BYTES * 3 // 4
        drop, dropped_bytes = 0, 0
        while drop < len(tail) and (
            len(tail) - drop > keep_entries or self._tail_bytes - dropped_bytes > keep_bytes
        ):
            dropped_bytes += len(tail[drop].data)
            drop += 1
        self._drop_tail_before(self._tail_start + drop)

    def _drop_tail_before(self, offset: int) -> None:
        drop = min(max(offset - self._tail_start, 0), len(self._tail))
        if drop:
            self._tail_bytes -= sum(len(e.data) for e in self._tail[:drop])
            del self._tail[:drop]
            self._tail_start += drop

    def _cut_tail_at(self, offset: int) -> None:
        """Nothing at or above `offset` is in the log any more; the tail ends there."""
        if offset <= self._tail_start:
            self._tail, self._tail_start, self._tail_bytes = [], self.log.log_end_offset, 0
        else:
            cut = offset - self._tail_start
            self._tail_bytes -= sum(len(e.data) for e in self._tail[cut:])
            del self._tail[cut:]

    def _write(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            # Checked before anything is written: an epoch beyond MAX_EPOCH is a bug that must
            # not reach the disk (a batch's partitionLeaderEpoch is an int32).
            check_range("entry epoch", entry.epoch, 0, MAX_EPOCH)
            check_range("entry offset", entry.offset, 0, INT64_MAX)
        batches = []
        run: list[Entry] = []
        for entry in entries:
            # A proposal is one RecordBatch (a crash keeps or loses it whole); proposals of
            # one epoch and kind share batches up to MAX_BATCH_ENTRIES.
            if (
                run
                and not run[-1].more
                and (
                    (entry.epoch, entry.control) != (run[0].epoch, run[0].control)
                    or len(run) >= MAX_BATCH_ENTRIES
                )
            ):
                batches.append(_encode(run))
                run = []
            run.append(entry)
        if run:
            batches.append(_encode(run))
        if batches:
            self.log.append_as_follower(b"".join(batches))

    def truncate_to(self, offset: int) -> None:
        """Raft may cut inside a stored batch (followers batch entries as they fetch them,
        not as the leader did); storage cuts whole batches, so the batch's surviving prefix
        is written again after the cut."""
        if offset >= self.log.log_end_offset:
            return
        first = None
        if offset >= self.log.log_start_offset:
            first = next(decode_batches(self.log.read(offset, 1)), None)
        survivors: list[Entry] = []
        if first is not None and first[0].base_offset < offset:
            header, records = first
            survivors = [
                Entry(
                    r.offset,
                    header.partition_leader_epoch,
                    r.value or b"",
                    header.is_control,
                    _more(r),
                )
                for r in records
                if r.offset < offset
            ]
        self.log.truncate_to(offset)
        self._write(survivors)  # below `offset`: the tail, if it reaches there, has them
        self._cut_tail_at(offset)

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        if not self.base.end_offset <= snapshot_id.end_offset <= self.log.log_end_offset:
            raise ValueError(f"cannot start the log at {snapshot_id}: outside the log")
        _start_log_at(self.log, snapshot_id.end_offset)
        self.base = snapshot_id
        self._drop_tail_before(snapshot_id.end_offset)

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        self.log.truncate_fully_and_start_at(snapshot_id.end_offset)
        self.base = snapshot_id
        self._tail, self._tail_start, self._tail_bytes = [], self.log.log_end_offset, 0

    def sync(self) -> None:
        self.log.flush()


def _start_log_at(log: Log, offset: int) -> None:
    # Only committed entries are ever in a snapshot: the storage high watermark may go up to
    # its end (the Raft core, not storage, knows what is committed).
    if log.high_watermark < offset:
        log.update_high_watermark(offset)
    log.delete_records_before(offset)


_MORE = (("strom.more", None),)  # a record header: not the last entry of its proposal


def _more(record: Record) -> bool:
    return any(name == "strom.more" for name, _ in record.headers)


def _encode(run: list[Entry]) -> bytes:
    # Timestamps are not Raft's business; 0 keeps the bytes a pure function of the entries.
    return encode_batch(
        [Record(e.offset, 0, None, e.data, _MORE if e.more else ()) for e in run],
        partition_leader_epoch=run[0].epoch,
        control=run[0].control,
    )
