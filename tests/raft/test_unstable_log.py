"""The core's in-memory log (raft/unstable_log.py): step(), propose() and tick() never write
the log or the snapshot store; what they append, truncate or download reaches the disk only
through a Ready. Nor do they (or ready(), advance()) read the log: what they ask is kept in
memory, and the entries a Ready names are read by the driver (raft/ready_reads.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from datadriven import run_script
from interaction import Cluster

from raft.core import RaftCore
from raft.log import MemoryRaftLog
from raft.messages import Entry, SnapshotId
from raft.ready_reads import LogOverlay
from raft.snapshots import MemorySnapshotStore
from raft.unstable_log import UnstableLog, write_to
from tests.sim.simulation import run_seed

SIM_SEEDS = range(0, 15)
SCRIPTS = sorted((Path(__file__).parent / "testdata").glob("*.txt"))


class _Inside:
    """Set while the core runs one of the calls that must touch no file."""

    entry_point: str | None = None


_GUARDED_WRITES = {
    MemoryRaftLog: ("append", "truncate_to", "reset_to_snapshot", "delete_before"),
    MemorySnapshotStore: ("create", "begin", "write", "freeze", "delete_before"),
}
# Reads of the stable log: the core keeps what it asks in memory (raft/unstable_log.py) and
# the driver reads the entries a Ready names (raft/ready_reads.py).
_GUARDED_READS = {
    MemoryRaftLog: (
        "read",
        "start",
        "end_offset",
        "last_epoch",
        "end_offset_for_epoch",
        "epoch_starts",
    ),
    MemorySnapshotStore: ("read",),
}
_WRITING_CALLS = ("step", "propose", "tick")
_READING_CALLS = ("step", "propose", "tick", "ready", "has_ready", "advance")


def _guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes the log and the snapshot store raise if written inside step(), propose() or
    tick(), and the log if read inside those or ready() or advance()."""
    for guarded_calls, methods in (
        (_WRITING_CALLS, _GUARDED_WRITES),
        (_READING_CALLS, _GUARDED_READS),
    ):
        for cls, names in methods.items():
            for name in names:
                original = getattr(cls, name)

                def guarded(
                    self: object,
                    *args: object,
                    _original=original,
                    _name=name,
                    _calls=guarded_calls,
                ) -> object:  # type: ignore[no-untyped-def]
                    where = _Inside.entry_point
                    assert where not in _calls, (
                        f"{type(self).__name__}.{_name}{args} inside RaftCore.{where}"
                    )
                    return _original(self, *args)

                monkeypatch.setattr(cls, name, guarded)
    for name in _READING_CALLS:
        original = getattr(RaftCore, name)

        def inside(self: RaftCore, *args: object, _original=original, _name=name) -> object:  # type: ignore[no-untyped-def]
            _Inside.entry_point = _name
            try:
                return _original(self, *args)
            finally:
                _Inside.entry_point = None

        monkeypatch.setattr(RaftCore, name, inside)


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_the_core_reads_and_writes_no_log(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every interaction script again, with the log and the snapshot store refusing any
    write while the core is inside step(), propose() or tick(), and the log any read
    inside those or ready() and advance(): only carrying out a Ready (or the driver's own
    calls: opening the node, snapshot, compact) touches them."""
    _guard(monkeypatch)
    run_script(script, Cluster().run, False)


def test_the_simulated_cluster_reads_no_log_inside_the_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same guard over Raft simulator seeds (crashes, torn writes, snapshots, and
    leaders answering fetches from their unstable tail): the reads all happen in the
    ReadyHandler's read port."""
    _guard(monkeypatch)
    for seed in SIM_SEEDS:
        result = run_seed(seed)
        assert result.failure is None, result.failure


def _entries(spec: str) -> list[Entry]:
    """ "0@1 1@1" -> entries at those offsets and epochs."""
    out = []
    for word in spec.split():
        offset, _, epoch = word.partition("@")
        out.append(Entry(int(offset), int(epoch), word.encode()))
    return out


def _stable(spec: str) -> MemoryRaftLog:
    log = MemoryRaftLog()
    log.append(_entries(spec))
    log.sync()
    return log


def _read(stable: MemoryRaftLog, log: UnstableLog) -> Sequence[Entry]:
    """The log as the core sees it, read as the driver reads it for a Ready."""
    return LogOverlay(stable, log.writes()).read(log.start().end_offset, 100)


def _spots(entries: Sequence[Entry]) -> str:
    return " ".join(f"{e.offset}@{e.epoch}" for e in entries)


def test_a_truncation_into_the_stable_log_stays_in_memory_until_written() -> None:
    stable = _stable("0@1 1@1 2@1 3@1 4@1")
    log = UnstableLog.over(stable)
    log.truncate_to(3)
    log.append(_entries("3@2 4@2"))
    assert _spots(stable.entries) == "0@1 1@1 2@1 3@1 4@1"  # the disk is untouched
    assert _spots(_read(stable, log)) == "0@1 1@1 2@1 3@2 4@2"
    assert (log.end_offset(), log.last_epoch()) == (5, 2)
    # Epoch 1 ends where the cut is, not where it ended on disk.
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(2) == (2, 5)
    writes = log.writes()
    assert (writes.reset, writes.truncate_to, _spots(writes.entries)) == (None, 3, "3@2 4@2")
    write_to(stable, writes)
    log.stable_to(writes)
    assert not log.has_writes()
    assert _spots(stable.entries) == "0@1 1@1 2@1 3@2 4@2"
    assert log.unstable_offset == 5 and not log.tail


def test_a_tail_changed_while_its_ready_was_written_is_written_again() -> None:
    """stable_to marks only the tail it handed out (etcd's stableTo): a truncation that came
    in between leaves the rest unstable, and the next Ready cuts the disk again."""
    stable = _stable("0@1 1@1 2@1")
    log = UnstableLog.over(stable)
    log.append(_entries("3@1 4@1"))
    writes = log.writes()
    write_to(stable, writes)
    log.truncate_to(4)  # before advance(): the suffix diverged meanwhile
    log.append(_entries("4@3"))
    log.stable_to(writes)
    again = log.writes()
    assert (again.truncate_to, _spots(again.entries)) == (3, "3@1 4@3")
    write_to(stable, again)
    log.stable_to(again)
    assert not log.has_writes()
    assert _spots(stable.entries) == _spots(_read(stable, log)) == "0@1 1@1 2@1 3@1 4@3"


def test_a_snapshot_install_resets_the_log_with_the_ready() -> None:
    stable = _stable("0@1 1@1")
    log = UnstableLog.over(stable)
    snapshot = SnapshotId(7, 2)
    log.reset_to_snapshot(snapshot)
    log.append(_entries("7@2"))
    assert (log.start(), log.end_offset(), log.last_epoch()) == (snapshot, 8, 2)
    assert log.end_offset_for_epoch(1) == (0, 0)  # older than the log's start
    assert stable.end_offset() == 2
    writes = log.writes()
    assert (writes.reset, writes.truncate_to, _spots(writes.entries)) == (snapshot, None, "7@2")
    write_to(stable, writes)
    log.stable_to(writes)
    assert not log.has_writes() and log.reset is None
    assert (stable.start(), _spots(stable.entries)) == (snapshot, "7@2")


def test_compaction_over_unstable_entries_is_refused() -> None:
    log = UnstableLog.over(_stable("0@1 1@1"))
    log.append(_entries("2@1 3@1"))
    with pytest.raises(AssertionError, match="unstable"):
        log.delete_before(SnapshotId(3, 1))


def test_a_download_that_freezes_damaged_is_fetched_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver's answer for a downloaded snapshot's last chunk decides: damaged (the
    store dropped it), the core installs nothing, keeps its log and fetches again, and the
    next download, whole, is installed."""
    frozen: list[bool] = []
    freeze = MemorySnapshotStore.freeze

    def first_freeze_damaged(self: MemorySnapshotStore, snapshot_id: SnapshotId) -> bool:
        whole = freeze(self, snapshot_id)
        if not frozen:
            del self.snapshots[snapshot_id]  # as FileSnapshotStore drops a damaged .part
            whole = False
        frozen.append(whole)
        return whole

    monkeypatch.setattr(MemorySnapshotStore, "freeze", first_freeze_damaged)
    cluster = Cluster()
    for line in (
        "add-nodes voters=1,2,3 fetch-timeout=1000 snapshot-chunk=40",
        "tick 1 100",
        "stabilize quiet",
        "propose 1 a b c",
        "stabilize quiet",
        "partition 1,2 | 3",
        "propose 1 d e f",
        "stabilize quiet",
        "snapshot 1",
        "compact 1 end=7",
        "heal",
        "tick 3 200",
        "stabilize",
    ):
        cluster.run(line)
    node = cluster.nodes[3]
    assert frozen == [False, True]
    assert node.core.log.start() == SnapshotId(7, 1)
    assert node.core.snapshots_fetched == 1
    assert node.core.high_watermark == cluster.nodes[1].core.high_watermark
