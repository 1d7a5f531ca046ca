"""Retention: what remains is exactly what Kafka's rules keep.

An independent model of Kafka's UnifiedLog.deleteOldSegments (three passes, each deleting a
leading run of segments: log-start breached, then retention.bytes, then retention.ms; a
segment is deletable only if where its offsets end (the next segment's base offset, the log
end for the active segment) is <= the high watermark, and never an empty active segment;
the log-start rule never takes the active segment, the other two do (deletableSegments);
size rule: delete the oldest while total - segment.size >= retention.bytes; with
cleanup.policy=compact alone only the log-start rule applies) is
compared with storage.retention.segments_to_delete over random logs, and with
Log.delete_old_segments on real segment files under a ManualClock.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import BASE_TS, append, log_config, open_log, producer_batch, read_all

from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError
from storage.retention import SegmentInfo, segments_to_delete

POLICIES = ["delete", "compact", "compact,delete"]


def kafka_deletable(segments, config: LogConfig, now_ms, high_watermark, log_start) -> int:
    """Kafka's rules, pass by pass, as UnifiedLog applies them."""
    gone = 0

    def leading_run(predicate) -> None:
        nonlocal gone
        while gone < len(segments):
            segment = segments[gone]
            last = gone == len(segments) - 1
            if last and segment.size == 0:
                return  # isLastSegmentAndEmpty
            upper = segment.next_offset if last else segments[gone + 1].base_offset
            if not (high_watermark >= upper and predicate(segment, last, upper)):
                return
            gone += 1

    leading_run(lambda s, last, upper: not last and upper <= log_start)
    if "delete" in config.cleanup_policy.split(","):
        if config.retention_bytes >= 0:
            diff = sum(s.size for s in segments[gone:]) - config.retention_bytes

            def breached(s, last, upper):
                nonlocal diff
                if diff - s.size >= 0:
                    diff -= s.size
                    return True
                return False

            leading_run(breached)
        if config.retention_ms >= 0:
            leading_run(lambda s, last, upper: now_ms - s.largest_timestamp > config.retention_ms)
    return gone


@st.composite
def logs(draw):
    n = draw(st.integers(1, 8))
    segments, base = [], draw(st.integers(0, 50))
    for _ in range(n):
        length = draw(st.integers(0, 20))
        segments.append(
            SegmentInfo(base, base + length, draw(st.integers(0, 1000)), draw(st.integers(0, 100)))
        )
        base += length + draw(st.integers(0, 2))
    leo = segments[-1].next_offset
    return segments, draw(st.integers(segments[0].base_offset, max(leo, segments[0].base_offset)))


@settings(max_examples=500, deadline=None)
@given(
    log=logs(),
    policy=st.sampled_from(POLICIES),
    retention_ms=st.one_of(st.just(-1), st.integers(0, 120)),
    retention_bytes=st.one_of(st.just(-1), st.integers(0, 5000)),
    now=st.integers(0, 200),
    log_start_delta=st.integers(0, 60),
)
def test_segments_to_delete_matches_kafka(
    log, policy, retention_ms, retention_bytes, now, log_start_delta
):
    segments, high_watermark = log
    log_start = segments[0].base_offset + log_start_delta
    config = LogConfig.from_properties(
        {"cleanup.policy": policy, "retention.ms": retention_ms, "retention.bytes": retention_bytes}
    )
    got = segments_to_delete(segments, config, now, high_watermark, log_start)
    assert got == kafka_deletable(segments, config, now, high_watermark, log_start)


def test_size_rule_is_kafkas_inequality():
    # total 300, retention.bytes 200: deleting the first (100) leaves exactly 200 -> deleted;
    # deleting the next as well would leave 100 < 200 -> kept.
    segments = [SegmentInfo(b, b + 10, 100, 0) for b in (0, 10, 20)]
    config = LogConfig.from_properties({"retention.bytes": 200, "retention.ms": -1})
    assert segments_to_delete(segments, config, 0, 30, 0) == 1
    config = LogConfig.from_properties({"retention.bytes": 201, "retention.ms": -1})
    assert segments_to_delete(segments, config, 0, 30, 0) == 0


# --- on a real log ---------------------------------------------------------------------------


@dataclass
class Case:
    policy: str
    retention_ms: int
    retention_bytes: int
    advance_ms: int
    hw_segment: int  # the high watermark sits at the base of this segment (or inside it)
    log_start_delta: int


def build(tmp_path, rng, clock, case: Case):
    config = log_config(
        cleanup_policy=case.policy,
        retention_ms=case.retention_ms,
        retention_bytes=case.retention_bytes,
    )
    log = open_log(tmp_path, config, clock=clock)
    model = []
    for k in range(rng.randint(1, 8)):
        if k:
            log.roll()
        # Segment k: 1-4 batches, timestamps around BASE_TS + k * 1000, not in order.
        for _ in range(rng.randint(1, 4)):
            ts = [BASE_TS + k * 1000 + rng.randint(-300, 300) for _ in range(rng.randint(1, 3))]
            model.append(append(log, producer_batch(len(ts), timestamps=ts, value_size=200)))
    return log, model


@pytest.mark.parametrize("seed", range(40))
def test_delete_old_segments_keeps_what_kafka_keeps(tmp_path, clock, seed):
    rng = random.Random(seed)
    case = Case(
        policy=rng.choice(POLICIES),
        retention_ms=rng.choice([-1, 500, 2000, 5000]),
        retention_bytes=rng.choice([-1, 0, 2000, 5000]),
        advance_ms=rng.choice([0, 1500, 4000, 10_000]),
        hw_segment=rng.randint(0, 10),
        log_start_delta=rng.choice([0, 0, 3, 40]),
    )
    log, model = build(tmp_path, rng, clock, case)
    segments = list(log.segments)
    hw_at = min(case.hw_segment, len(segments) - 1)
    log.update_high_watermark(segments[hw_at].base_offset + rng.randint(0, 2))
    start = min(log.log_start_offset + case.log_start_delta, log.high_watermark)
    log.delete_records_before(start) if start > log.log_start_offset else None
    clock.advance(case.advance_ms)
    segments = list(log.segments)  # DeleteRecords applies retention too

    infos = [
        SegmentInfo(s.base_offset, s.next_offset, s.size, s.largest_timestamp) for s in log.segments
    ]
    want = kafka_deletable(
        infos, log.config, clock.time_ms(), log.high_watermark, log.log_start_offset
    )
    everything = want == len(infos)
    # Every segment expired: the log rolled, and starts empty at its end.
    expected_bases = [s.base_offset for s in log.segments][want:] or [log.log_end_offset]
    old_start = log.log_start_offset
    context = f"seed={seed} {case}"

    assert log.delete_old_segments() == want, context
    assert [s.base_offset for s in log.segments] == expected_bases, context
    if everything:
        assert log.active_segment.is_empty(), context
    else:
        assert log.active_segment is segments[-1], context
    assert log.log_start_offset == max(old_start, expected_bases[0]), context
    for base in {s.base_offset for s in segments} - set(expected_bases):
        assert not os.path.exists(tmp_path / f"{base:020d}.log"), context
    assert read_all(log) == [s.raw for s in model if s.last >= log.log_start_offset], context
    if log.log_start_offset > 0:
        with pytest.raises(OffsetOutOfRangeError):
            log.read(log.log_start_offset - 1, 100)
    assert all(o >= log.log_start_offset for _, o in log.leader_epochs.entries), context


def test_largest_timestamp_decides_and_only_a_leading_run_goes(tmp_path, clock):
    """retention.ms looks at a segment's newest record; an expired segment behind a live one
    waits for it."""
    log = open_log(tmp_path, log_config(retention_ms=1000), clock=clock)
    append(log, producer_batch(2, timestamps=[BASE_TS - 10_000, BASE_TS]))
    log.roll()
    append(log, producer_batch(2, timestamps=[BASE_TS - 10_000, BASE_TS - 10_000]))
    log.roll()
    append(log, producer_batch(2, timestamps=[BASE_TS - 10_000, BASE_TS + 1]))
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    log.update_high_watermark(log.log_end_offset)
    clock.advance(1000)
    assert log.delete_old_segments() == 0  # now - newest == retention.ms: not yet
    clock.advance(1)
    assert log.delete_old_segments() == 2  # both closed segments; the active one is live
    assert [s.base_offset for s in log.segments] == [4]
    assert log.log_start_offset == 4


def test_high_watermark_holds_back_retention(tmp_path, clock):
    log = open_log(tmp_path, log_config(retention_ms=0), clock=clock)
    for _ in range(3):
        append(log, producer_batch(1, timestamps=BASE_TS - 5000))
        log.roll()
    log.update_high_watermark(1)  # the segment [1, 2) holds offsets at the high watermark
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 1
    log.update_high_watermark(3)
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 3 and log.log_end_offset == 3


def test_an_idle_expired_active_segment_is_rolled_and_deleted(tmp_path, clock):
    """Kafka's deleteRetentionMsBreachedSegments takes the active segment too once it has
    expired (rolling a new one first): an idle topic does not keep its last records
    forever. The log starts at its end then, and appends go on from there."""
    log = open_log(tmp_path, log_config(retention_ms=1000), clock=clock)
    append(log, producer_batch(2, timestamps=[BASE_TS - 500, BASE_TS]))
    log.roll()
    append(log, producer_batch(3, timestamps=BASE_TS))
    log.update_high_watermark(log.log_end_offset)
    clock.advance(1000)
    assert log.delete_old_segments() == 0  # now - newest == retention.ms: not yet
    clock.advance(1)
    assert log.delete_old_segments() == 2
    assert [s.base_offset for s in log.segments] == [5]
    assert log.active_segment.is_empty()
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == 5
    segment_files = sorted(f for f in os.listdir(tmp_path) if f[0].isdigit())
    assert segment_files and all(f.startswith(f"{5:020d}.") for f in segment_files)
    assert read_all(log) == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    assert log.delete_old_segments() == 0  # an empty active segment is never deleted
    appended = append(log, producer_batch(1, timestamps=clock.time_ms()))
    assert appended.base == 5 and read_all(log) == [appended.raw]


def test_the_active_segment_waits_for_the_high_watermark(tmp_path, clock):
    log = open_log(tmp_path, log_config(retention_ms=0), clock=clock)
    append(log, producer_batch(2, timestamps=BASE_TS - 5000))
    log.update_high_watermark(1)  # offset 1 is not replicated yet
    assert log.delete_old_segments() == 0
    log.update_high_watermark(2)
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 2 and log.active_segment.base_offset == 2


@pytest.mark.parametrize(("retention_bytes", "deleted"), [(1, 2), (0, 3)])
def test_size_retention_takes_the_active_segment_only_at_zero(
    tmp_path, clock, retention_bytes, deleted
):
    """By size, Kafka deletes the oldest segments while the rest stay at or above
    retention.bytes: the active segment goes only when nothing is to stay."""
    log = open_log(
        tmp_path, log_config(retention_ms=-1, retention_bytes=retention_bytes), clock=clock
    )
    for k in range(3):
        if k:
            log.roll()
        append(log, producer_batch(1, timestamps=BASE_TS))
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == deleted
    assert log.log_start_offset == deleted
    assert log.active_segment.base_offset == 2 + (deleted == 3)
