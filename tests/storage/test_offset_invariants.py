"""The log's offsets keep log start <= high watermark <= log end and recovery point <= log
end through every operation and reopen (storage/log.py check_offsets, issue 19), and a log
that broke them says so with the numbers instead of clamping them into place."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import append, log_config, open_log, random_batch

from storage.errors import OffsetInvariantError, OffsetOutOfRangeError

OPERATIONS = ("append", "high_watermark", "truncate", "delete_records", "retention", "reopen")


def offsets_hold(log) -> None:
    assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
    assert log.recovery_point <= log.log_end_offset


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    steps=st.lists(st.sampled_from(OPERATIONS), min_size=1, max_size=30),
)
def test_every_operation_leaves_the_offsets_in_order(tmp_path_factory, seed, steps):
    rng = random.Random(seed)
    path = tmp_path_factory.mktemp("log")
    config = log_config(segment_bytes=2048, retention_bytes=5000)
    log = open_log(path, config)
    for step in steps:
        leo = log.log_end_offset
        if step == "append":
            append(log, random_batch(rng))
        elif step == "high_watermark":
            log.update_high_watermark(rng.randint(-5, leo + 5))
        elif step == "truncate":
            log.truncate_to(rng.randint(0, leo + 2))
        elif step == "delete_records":
            try:
                log.delete_records_before(rng.randint(0, leo + 2))
            except OffsetOutOfRangeError:
                pass  # past the high watermark: refused, nothing changed
        elif step == "retention":
            log.delete_old_segments()
        else:
            hw, start, recovery = log.high_watermark, log.log_start_offset, log.recovery_point
            log.close()
            log = open_log(
                path,
                config,
                high_watermark=hw,
                log_start_offset=start,
                recovery_point=recovery,
                clean_shutdown=True,
            )
        offsets_hold(log)
    log.close()


def test_a_broken_order_is_refused_with_its_numbers(tmp_path):
    log = open_log(tmp_path)
    append(log, random_batch(random.Random(1)))
    log.high_watermark = log.log_end_offset + 3  # what no operation may leave
    with pytest.raises(OffsetInvariantError) as caught:
        log.check_offsets("a test")
    assert "high watermark" in str(caught.value) and caught.value.error_name == (
        "UNKNOWN_SERVER_ERROR"
    )
    log.close()
