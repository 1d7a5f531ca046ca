"""Offset-index and time-index lookups against a brute-force scan, over many segments and rolls.

Random batch sizes and non-monotonic timestamps, small `segment.bytes` and
`index.interval.bytes`: for every offset in [log start, LEO), Log.read returns whole batches
starting with the one holding that offset (byte for byte), honours max_bytes / min_one /
max_offset, and offset_for_timestamp equals "the first record in offset order with a timestamp
>= t". The same checks run again after a clean reopen (indexes loaded from disk), after a
crash reopen (indexes rebuilt), and after the log start moves into the middle of a batch.
"""

from __future__ import annotations

import random

import pytest
from storage_helpers import (
    batch_holding,
    check_reads,
    check_timestamps,
    crash,
    fill,
    log_config,
    open_log,
    split,
)

from storage.errors import OffsetOutOfRangeError
from strom_api.records import decode_batch

SEEDS = range(6)


def build(tmp_path, seed):
    rng = random.Random(seed)
    config = log_config(
        segment_bytes=rng.choice([1024, 2048, 4096]),
        index_interval_bytes=rng.choice([0, 100, 300]),
    )
    log = open_log(tmp_path, config)
    model = fill(log, rng, 70, ts_spread=rng.choice([5, 10_000]))
    return rng, config, log, model


def check_max_offset(log, model, rng, context):
    for _ in range(150):
        offset = rng.randrange(log.log_start_offset, log.log_end_offset)
        max_offset = rng.randrange(offset, log.log_end_offset + 2)
        got = split(log.read(offset, rng.randint(1, 5000), max_offset=max_offset))
        i = batch_holding(model, offset)
        assert all(decode_batch(b)[0].last_offset < max_offset for b in got), context
        assert got == [s.raw for s in model[i : i + len(got)]], context
        if model[i].last < max_offset:
            assert got, f"{context} read({offset}, max_offset={max_offset}) returned nothing"


def check_everything(log, model, rng, context):
    check_reads(log, model, rng, context)
    check_timestamps(log, model, context)
    check_max_offset(log, model, rng, context)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_end_offset + 1, 100)
    if log.log_start_offset > 0:
        with pytest.raises(OffsetOutOfRangeError):
            log.read(log.log_start_offset - 1, 100)


@pytest.mark.parametrize("seed", SEEDS)
def test_lookups_match_a_scan(tmp_path, seed):
    rng, _, log, model = build(tmp_path, seed)
    assert len(log.segments) >= 4, "the test needs several segments"
    assert sum(len(s.index) for s in log.segments) >= 4, "the test needs index entries"
    check_everything(log, model, rng, f"seed={seed}")


@pytest.mark.parametrize("seed", SEEDS)
def test_lookups_after_clean_reopen_use_indexes_from_disk(tmp_path, seed):
    rng, config, log, model = build(tmp_path, seed)
    entries = [len(s.index) for s in log.segments]
    leo = log.log_end_offset
    log.close()
    log = open_log(tmp_path, config, clean_shutdown=True, recovery_point=leo)
    assert log.load_info.recovered_segments == 0
    assert [len(s.index) for s in log.segments] == entries
    check_everything(log, model, rng, f"seed={seed} clean reopen")


@pytest.mark.parametrize("seed", SEEDS)
def test_lookups_after_crash_reopen(tmp_path, seed):
    rng, config, log, model = build(tmp_path, seed)
    crash(log)
    log = open_log(tmp_path, config, recovery_point=0)
    assert log.load_info.recovered_segments == len(log.segments)
    check_everything(log, model, rng, f"seed={seed} crash reopen")


@pytest.mark.parametrize("seed", SEEDS)
def test_lookups_with_log_start_inside_a_batch(tmp_path, seed):
    rng, _, log, model = build(tmp_path, seed)
    log.update_high_watermark(log.log_end_offset)
    multi = [s for s in model[len(model) // 3 :] if s.last > s.base]
    target = multi[0].base + 1 if multi else model[len(model) // 2].base
    log.delete_records_before(target)
    assert log.log_start_offset == target
    check_everything(log, model, rng, f"seed={seed} log start {target}")


def test_empty_log(tmp_path):
    log = open_log(tmp_path)
    assert log.read(0, 100) == b""
    assert log.offset_for_timestamp(0) is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
