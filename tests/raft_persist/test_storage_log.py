"""StorageRaftLog behaves exactly as MemoryRaftLog, the model, and survives a reopen.

Random sequences of appends (runs of epochs, control entries among them), truncations,
log-prefix cleanups (the log starts at a snapshot) and resets to a snapshot go to both logs;
after every step start, end offset, last epoch, end_offset_for_epoch for every epoch, and
reads from every offset must agree (whether they come from the stored batches or the
decoded tail kept in memory), and so must the Raft core's in-memory view of each
(raft/unstable_log.py, built from the log's epoch index). Then the storage log is flushed,
closed and reopened from disk (with the snapshot it starts at, as the driver does), and
must still agree.
"""

from __future__ import annotations

import random

import pytest

from raft import storage_log
from raft.log import MemoryRaftLog
from raft.messages import Entry, SnapshotId
from raft.storage_log import StorageRaftLog, open_raft_log
from raft.unstable_log import UnstableLog
from storage.config import LogConfig
from storage.log import Log

CONFIG = LogConfig.from_properties({"segment.bytes": 2048, "index.interval.bytes": 128})


def agree(model: MemoryRaftLog, real: StorageRaftLog, context: str) -> None:
    assert real.start() == model.start(), context
    assert real.end_offset() == model.end_offset(), context
    assert real.last_epoch() == model.last_epoch(), context
    top = model.last_epoch() + 2
    for epoch in range(top):
        assert real.end_offset_for_epoch(epoch) == model.end_offset_for_epoch(epoch), (
            f"{context}: end_offset_for_epoch({epoch})"
        )
    for offset in range(model.start_offset, model.end_offset() + 1, 3):
        assert list(real.read(offset, 7)) == list(model.read(offset, 7)), (
            f"{context}: read({offset})"
        )
    # The core's in-memory view, built from each log's epoch index as a node opens it,
    # answers as the model does without reading an entry.
    for log in (model, real):
        view = UnstableLog.over(log)
        assert (view.start(), view.end_offset()) == (model.start(), model.end_offset()), context
        assert view.last_epoch() == model.last_epoch(), context
        for epoch in range(top):
            assert view.end_offset_for_epoch(epoch) == model.end_offset_for_epoch(epoch), (
                f"{context}: the view's end_offset_for_epoch({epoch}) over {type(log).__name__}"
            )
        for offset in range(model.start_offset, model.end_offset()):
            assert view.epoch_at(offset) == model.read(offset, 1)[0].epoch, (
                f"{context}: the view's epoch_at({offset}) over {type(log).__name__}"
            )


@pytest.mark.parametrize("tail_entries", [0, 5, storage_log.TAIL_ENTRIES])
@pytest.mark.parametrize("seed", range(12))
def test_storage_log_matches_the_memory_model(
    seed: int, tail_entries: int, tmp_path, monkeypatch
) -> None:
    """With no decoded tail (every read decodes stored batches), a tail of a few entries
    (reads cross from the batches into it; appends push entries out of it) and the default."""
    monkeypatch.setattr(storage_log, "TAIL_ENTRIES", tail_entries)
    rng = random.Random(seed)
    directory = str(tmp_path)
    model, real = MemoryRaftLog(), StorageRaftLog(Log.open(directory, CONFIG))
    epoch = 1
    for step in range(60):
        roll = rng.random()
        if roll < 0.2 and model.end_offset() > model.start_offset:
            cut = rng.randrange(model.start_offset, model.end_offset() + 1)
            model.truncate_to(cut)
            real.truncate_to(cut)
            epoch = max(epoch, model.last_epoch()) + 1  # a new leader writes a newer epoch
        elif roll < 0.3 and model.end_offset() > model.start_offset:
            # A snapshot of a prefix; the log now starts there.
            end = rng.randrange(model.start_offset + 1, model.end_offset() + 1)
            snapshot = SnapshotId(end, model.read(end - 1, 1)[0].epoch)
            model.delete_before(snapshot)
            real.delete_before(snapshot)
        elif roll < 0.35:
            # A follower installs a leader's snapshot beyond its log end.
            epoch += 1
            snapshot = SnapshotId(model.end_offset() + rng.randrange(1, 20), epoch)
            model.reset_to_snapshot(snapshot)
            real.reset_to_snapshot(snapshot)
        else:
            start = model.end_offset()
            entries = []
            for i in range(rng.randrange(1, 6)):
                if rng.random() < 0.15:
                    epoch += 1
                entries.append(
                    Entry(
                        start + i,
                        epoch,
                        rng.randbytes(rng.randrange(40)),
                        control=rng.random() < 0.1,
                    )
                )
            model.append(entries)
            real.append(entries)
        agree(model, real, f"seed {seed} step {step}")
    real.sync()
    real.log.close()
    # The log start offset was never checkpointed: the log reopens at its first segment,
    # and open_raft_log starts it at its snapshot again.
    snapshots = [model.start()] if model.start_offset else []
    reopened = open_raft_log(Log.open(directory, CONFIG, recovery_point=0), snapshots)
    agree(model, reopened, f"seed {seed} after reopen")


@pytest.mark.parametrize("entry", [Entry(0, 2**31 - 1, b"x"), Entry(0, -1, b"x")])
def test_an_entry_with_an_out_of_range_epoch_is_never_written(tmp_path, entry: Entry) -> None:
    """Before, epoch 2^31 failed inside the batch encoder (`Value out of range`); 2^31-1 was
    written and every election after it overflowed."""
    raft_log = StorageRaftLog(Log.open(str(tmp_path / "__cluster_metadata-0"), CONFIG))
    with pytest.raises(ValueError, match="refusing to persist entry epoch"):
        raft_log.append([entry])
    assert raft_log.end_offset() == 0
