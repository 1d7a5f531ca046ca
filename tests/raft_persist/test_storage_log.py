"""StorageRaftLog behaves exactly as MemoryRaftLog, the model, and survives a reopen.

Random sequences of appends (runs of epochs, control entries among them) and truncations
go to both logs; after every step end offset, last epoch, end_offset_for_epoch for every
epoch, and reads from every offset must agree. Then the storage log is flushed, closed
and reopened from disk, and must still agree.
"""

from __future__ import annotations

import random
import tempfile

import pytest

from raft.log import MemoryRaftLog
from raft.messages import Entry
from raft.storage_log import StorageRaftLog
from storage.config import LogConfig
from storage.log import Log

CONFIG = LogConfig.from_properties({"segment.bytes": 2048, "index.interval.bytes": 128})


def agree(model: MemoryRaftLog, real: StorageRaftLog, context: str) -> None:
    assert real.end_offset() == model.end_offset(), context
    assert real.last_epoch() == model.last_epoch(), context
    top = model.last_epoch() + 2
    for epoch in range(top):
        assert real.end_offset_for_epoch(epoch) == model.end_offset_for_epoch(epoch), (
            f"{context}: end_offset_for_epoch({epoch})"
        )
    for offset in range(0, model.end_offset() + 1, 3):
        assert list(real.read(offset, 7)) == list(model.read(offset, 7)), (
            f"{context}: read({offset})"
        )


@pytest.mark.parametrize("seed", range(12))
def test_storage_log_matches_the_memory_model(seed: int) -> None:
    rng = random.Random(seed)
    directory = tempfile.mkdtemp(prefix="raftlog-")
    model, real = MemoryRaftLog(), StorageRaftLog(Log.open(directory, CONFIG))
    epoch = 1
    for step in range(60):
        if rng.random() < 0.2 and model.end_offset():
            cut = rng.randrange(model.end_offset() + 1)
            model.truncate_to(cut)
            real.truncate_to(cut)
            epoch = max(epoch, model.last_epoch()) + 1  # a new leader writes a newer epoch
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
    reopened = StorageRaftLog(Log.open(directory, CONFIG, recovery_point=0))
    agree(model, reopened, f"seed {seed} after reopen")
