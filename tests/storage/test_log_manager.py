"""LogManager: every partition log of a node across its log directories.

Proves what storage/log_manager.py promises: partitions live in `<dir>/<topic>-<partition>/`
with Kafka's topic-name rules, new ones go to the directory with the fewest; each directory
holds Kafka's three offset checkpoints and, only between a clean shutdown and the next start,
`.kafka_cleanshutdown`; after a clean shutdown no segment is scanned at start-up, after a
crash each log scans only from its checkpointed recovery point; high watermarks and log start
offsets come back from their checkpoints; cleanup() applies retention and compaction.
"""

from __future__ import annotations

import json
import os
import random

import pytest
from storage_helpers import BASE_TS, crash, fill, log_config, read_all

from storage.clock import ManualClock
from storage.errors import InvalidTopicError, LogDirError, OffsetOutOfRangeError
from storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    LogManager,
)
from strom_api.records import Record, decode_batches, encode_batch


def manager(tmp_path, n_dirs=2, **config):
    dirs = [str(tmp_path / f"d{i}") for i in range(n_dirs)]
    lm = LogManager(dirs, log_config(segment_bytes=1024, **config), ManualClock(BASE_TS))
    lm.startup()
    return lm, dirs


def populate(lm, rng, partitions=(("orders", 0), ("orders", 1), ("users", 0))):
    contents = {}
    for topic, p in partitions:
        log = lm.get_or_create_log(topic, p)
        model = fill(log, rng, 12)
        log.update_high_watermark(model[-1].base)
        contents[(topic, p)] = model
    return contents


def test_partitions_live_in_topic_partition_dirs_spread_over_log_dirs(tmp_path):
    lm, dirs = manager(tmp_path)
    populate(lm, random.Random(0))
    where = {tp: os.path.dirname(log.directory) for tp, log in lm.logs.items()}
    assert sorted(where.values()).count(dirs[0]) in (1, 2)
    assert set(where.values()) == set(dirs)  # the fewest-partitions rule used both
    for (topic, p), log in lm.logs.items():
        assert os.path.basename(log.directory) == f"{topic}-{p}"
    assert lm.get_or_create_log("orders", 0) is lm.get_log("orders", 0)
    assert lm.get_log("nope", 0) is None


@pytest.mark.parametrize(
    "topic, partition",
    [("", 0), (".", 0), ("..", 0), ("a/b", 0), ("a b", 0), ("x" * 250, 0), ("ok", -1), ("ünï", 0)],
)
def test_illegal_topic_names(tmp_path, topic, partition):
    lm, dirs = manager(tmp_path)
    with pytest.raises(InvalidTopicError):
        lm.get_or_create_log(topic, partition)
    assert all(os.listdir(d) == [] for d in dirs)


def test_legal_topic_name_edges(tmp_path):
    lm, _ = manager(tmp_path)
    for topic in ["x" * 249, "a.b_c-d", "-", "_"]:
        assert lm.get_or_create_log(topic, 0).log_end_offset == 0


def test_no_log_dirs():
    with pytest.raises(LogDirError):
        LogManager([])


def test_clean_shutdown_then_start_scans_nothing(tmp_path):
    lm, dirs = manager(tmp_path)
    contents = populate(lm, random.Random(1))
    lm.logs[("orders", 0)].update_high_watermark(5)
    lm.logs[("orders", 0)].delete_records_before(3)
    lm.shutdown()
    for d in dirs:
        assert os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
        for name in (RECOVERY_POINT_FILE, HIGH_WATERMARK_FILE, LOG_START_FILE):
            assert open(os.path.join(d, name)).read().startswith("0\n")

    lm2, _ = manager(tmp_path)
    assert lm2.had_clean_shutdown
    assert all(not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE)) for d in dirs)
    for tp, model in contents.items():
        log = lm2.get_log(*tp)
        assert log.load_info.recovered_segments == 0, tp
        start = 3 if tp == ("orders", 0) else 0
        assert log.log_start_offset == start
        assert log.high_watermark == (5 if tp == ("orders", 0) else model[-1].base)
        assert read_all(log) == [s.raw for s in model if s.last >= start]
    with pytest.raises(OffsetOutOfRangeError):
        lm2.get_log("orders", 0).read(2, 100)


def test_start_after_a_crash_scans_from_the_checkpointed_recovery_point(tmp_path):
    lm, dirs = manager(tmp_path)
    contents = populate(lm, random.Random(2))
    points = {}
    for tp, log in lm.logs.items():
        point = log.segments[len(log.segments) // 2].base_offset
        log.flush(point)
        points[tp] = point
    lm.checkpoint()
    for log in lm.logs.values():  # more data after the checkpoint, then a crash
        fill(log, random.Random(3), 3)
        crash(log)

    lm2, _ = manager(tmp_path)
    assert not lm2.had_clean_shutdown
    for tp, point in points.items():
        log = lm2.get_log(*tp)
        bases = [s.base_offset for s in log.segments]
        scanned = sum(1 for i in range(len(bases)) if i + 1 == len(bases) or bases[i + 1] > point)
        assert log.load_info.recovered_segments == scanned, tp
        assert read_all(log)[: len(contents[tp])] == [s.raw for s in contents[tp]]


def test_a_crash_after_a_clean_start_is_unclean_again(tmp_path):
    lm, _ = manager(tmp_path)
    populate(lm, random.Random(4))
    lm.shutdown()
    lm2, _ = manager(tmp_path)
    for log in lm2.logs.values():
        crash(log)
    lm3, _ = manager(tmp_path)
    assert not lm3.had_clean_shutdown
    assert all(log.load_info.recovered_segments >= 1 for log in lm3.logs.values())


def test_same_partition_in_two_dirs_is_refused(tmp_path):
    lm, dirs = manager(tmp_path)
    lm.get_or_create_log("t", 0)
    lm.shutdown()
    other = [d for d in dirs if not os.path.exists(os.path.join(d, "t-0"))][0]
    os.makedirs(os.path.join(other, "t-0"))
    with pytest.raises(LogDirError, match="t-0"):
        manager(tmp_path)


def test_checkpoint_files_hold_every_partition_of_their_dir(tmp_path):
    lm, dirs = manager(tmp_path)
    populate(lm, random.Random(5))
    lm.flush_all()
    lm.checkpoint()
    seen = {}
    for d in dirs:
        lines = open(os.path.join(d, RECOVERY_POINT_FILE)).read().splitlines()
        assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
        for line in lines[2:]:
            topic, p, offset = line.split(" ")
            seen[(topic, int(p))] = (d, int(offset))
    assert set(seen) == set(lm.logs)
    for tp, (d, offset) in seen.items():
        assert lm.logs[tp].directory.startswith(d)
        assert offset == lm.logs[tp].log_end_offset


def checkpoint_stats(d):
    """(inode, mtime_ns) of each checkpoint file: atomic_write renames a new file in, so a
    rewrite changes the inode even within one clock tick."""
    names = (RECOVERY_POINT_FILE, HIGH_WATERMARK_FILE, LOG_START_FILE)
    return {
        n: (os.stat(os.path.join(d, n)).st_ino, os.stat(os.path.join(d, n)).st_mtime_ns)
        for n in names
    }


def read_checkpoint(d, name):
    lines = open(os.path.join(d, name)).read().splitlines()
    return {(t, int(p)): int(o) for t, p, o in (line.split(" ") for line in lines[2:])}


def test_a_checkpoint_is_not_rewritten_when_no_offset_changed(tmp_path):
    lm, dirs = manager(tmp_path, n_dirs=1)
    populate(lm, random.Random(7))
    lm.checkpoint()
    before = checkpoint_stats(dirs[0])
    lm.checkpoint()
    lm.checkpoint()
    assert checkpoint_stats(dirs[0]) == before


def test_only_the_checkpoint_whose_offsets_moved_is_rewritten(tmp_path):
    lm, dirs = manager(tmp_path, n_dirs=1)
    populate(lm, random.Random(8))
    lm.checkpoint()
    before = checkpoint_stats(dirs[0])
    log = lm.get_log("orders", 1)
    log.update_high_watermark(log.log_end_offset)  # only the high watermark moves
    lm.checkpoint()
    after = checkpoint_stats(dirs[0])
    assert after[HIGH_WATERMARK_FILE] != before[HIGH_WATERMARK_FILE]
    assert after[RECOVERY_POINT_FILE] == before[RECOVERY_POINT_FILE]
    assert after[LOG_START_FILE] == before[LOG_START_FILE]
    hws = read_checkpoint(dirs[0], HIGH_WATERMARK_FILE)
    assert hws == {tp: log.high_watermark for tp, log in lm.logs.items()}
    lm.flush_all()  # the recovery points move
    log.delete_records_before(log.high_watermark)  # and a log start
    lm.checkpoint()
    assert read_checkpoint(dirs[0], RECOVERY_POINT_FILE) == {
        tp: log.recovery_point for tp, log in lm.logs.items()
    }
    assert read_checkpoint(dirs[0], LOG_START_FILE) == {
        tp: log.log_start_offset for tp, log in lm.logs.items()
    }


def test_checkpoints_follow_logs_created_and_deleted(tmp_path):
    lm, dirs = manager(tmp_path, n_dirs=1)
    lm.checkpoint()  # the first one writes all three, even for no partition
    assert all(read_checkpoint(dirs[0], n) == {} for n in checkpoint_stats(dirs[0]))
    lm.get_or_create_log("fresh", 0)
    lm.checkpoint()
    assert read_checkpoint(dirs[0], HIGH_WATERMARK_FILE) == {("fresh", 0): 0}
    lm.delete_log("fresh", 0)
    lm.checkpoint()
    assert all(read_checkpoint(dirs[0], n) == {} for n in checkpoint_stats(dirs[0]))


def test_delete_log_removes_its_directory(tmp_path):
    lm, _ = manager(tmp_path)
    log = lm.get_or_create_log("gone", 0)
    directory = log.directory
    lm.delete_log("gone", 0)
    assert not os.path.exists(directory)
    assert lm.get_log("gone", 0) is None
    lm.shutdown()
    lm2, _ = manager(tmp_path)
    assert lm2.get_log("gone", 0) is None


def test_cleanup_applies_retention_and_compaction(tmp_path):
    lm, _ = manager(tmp_path, n_dirs=1)
    clock = lm.clock
    deleting = lm.get_or_create_log("old", 0, log_config(retention_ms=1000))
    compacted = lm.get_or_create_log("kv", 0, log_config(cleanup_policy="compact"))
    for log in (deleting, compacted):
        for value in (b"1", b"2"):
            log.append(encode_batch([Record(0, BASE_TS, b"key", value)]), 0)
            log.roll()
        log.append(encode_batch([Record(0, BASE_TS, b"other", b"x")]), 0)
        log.update_high_watermark(log.log_end_offset)
    clock.advance(1001)
    deleted, removed = lm.cleanup()
    assert (deleted, removed) == (3, 1)  # every segment expired, the active one too
    assert deleting.log_start_offset == deleting.log_end_offset == 3
    values = [
        r.value for _, records in decode_batches(b"".join(read_all(compacted))) for r in records
    ]
    assert values == [b"2", b"x"]


def test_flush_dirty_logs_flushes_only_logs_past_their_flush_ms(tmp_path):
    clock = ManualClock(BASE_TS)
    lm = LogManager([str(tmp_path / "d")], log_config(flush_ms=100), clock)
    lm.startup()
    fast = lm.get_or_create_log("fast", 0)
    slow = lm.get_or_create_log("slow", 0, log_config(flush_ms=10_000))
    for log in (fast, slow):
        log.append(encode_batch([Record(0, BASE_TS, b"k", b"v")]), 0)
    clock.advance(100)
    assert lm.flush_dirty_logs() == 1
    assert fast.recovery_point == 1 and slow.recovery_point == 0


def test_the_clean_shutdown_marker_carries_the_broker_epoch(tmp_path):
    """KIP-966: the broker sends it back when it registers; anything else is unclean."""
    lm, dirs = manager(tmp_path)
    populate(lm, random.Random(5))
    lm.shutdown(broker_epoch=4711)
    for d in dirs:
        with open(os.path.join(d, CLEAN_SHUTDOWN_FILE)) as f:
            assert json.load(f) == {"version": 0, "brokerEpoch": 4711}  # Kafka's format
    lm2, _ = manager(tmp_path)
    assert lm2.previous_broker_epoch == 4711
    for log in lm2.logs.values():
        crash(log)
    lm3, _ = manager(tmp_path)  # after a crash: no marker, no epoch
    assert lm3.previous_broker_epoch == -1


def test_markers_that_disagree_or_hold_no_epoch_give_none(tmp_path):
    lm, dirs = manager(tmp_path)
    lm.shutdown(broker_epoch=7)
    with open(os.path.join(dirs[0], CLEAN_SHUTDOWN_FILE), "w") as f:
        f.write(json.dumps({"version": 0, "brokerEpoch": 8}))
    assert manager(tmp_path)[0].previous_broker_epoch == -1
    lm, dirs = manager(tmp_path)
    lm.shutdown(broker_epoch=7)
    for d in dirs:  # an empty marker, as written before KIP-966
        open(os.path.join(d, CLEAN_SHUTDOWN_FILE), "w").close()
    again = manager(tmp_path)[0]
    assert again.had_clean_shutdown and again.previous_broker_epoch == -1
