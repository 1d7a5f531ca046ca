"""The fetch session cache (broker/fetch_sessions.py), rule by rule: contexts from the
session fields, what an incremental answer carries, epochs, and eviction."""

from __future__ import annotations

import random

import pytest

from broker.fetch_sessions import (
    NO_SESSION,
    ContextKind,
    FetchSessionCache,
    FetchState,
    PartitionNews,
    SessionError,
)

A0 = ("a", 0)
A1 = ("a", 1)
B0 = ("b", 0)


def state(offset: int = 0, max_bytes: int = 1024) -> FetchState:
    return FetchState(offset, max_bytes)


def news(
    hw: int = 10, records: bool = False, error: bool = False, log_start: int = 0
) -> PartitionNews:
    return PartitionNews(records, error, hw, hw, log_start)


def cache(slots: int = 10, eviction_ms: int = 1000) -> FetchSessionCache:
    return FetchSessionCache(slots, eviction_ms, random.Random(7))


def open_session(c, keys=(A0, A1, B0), now=0, privileged=False, hw=10) -> int:
    ctx = c.new_context(
        0,
        0,
        [(k, state()) for k in keys],
        [],
        uses_topic_ids=False,
        privileged=privileged,
        now_ms=now,
    )
    assert ctx.kind is ContextKind.FULL
    done = c.complete(ctx, [(k, news(hw)) for k in keys], now)
    assert done.carried == tuple(keys)  # a full fetch answers everything
    return done.session_id


def incremental(c, sid, epoch, asked=(), forgotten=(), now=0, ids=False):
    return c.new_context(
        sid,
        epoch,
        list(asked),
        list(forgotten),
        uses_topic_ids=ids,
        privileged=False,
        now_ms=now,
    )


def test_full_fetch_creates_a_session_and_incremental_ones_follow_it():
    c = cache()
    sid = open_session(c)
    assert sid != NO_SESSION
    ctx = incremental(c, sid, 1)
    assert ctx.kind is ContextKind.INCREMENTAL
    assert [k for k, _ in ctx.partitions] == [A0, A1, B0]  # the session's, none asked
    # nothing changed: nothing carried
    done = c.complete(ctx, [(k, news()) for k in (A0, A1, B0)], 1)
    assert done == done.__class__(sid, None, ())
    # the next epoch is 2
    assert incremental(c, sid, 2).kind is ContextKind.INCREMENTAL


def test_incremental_answer_carries_records_errors_and_changed_offsets_only():
    c = cache()
    sid = open_session(c, keys=(A0, A1, B0, ("c", 0), ("d", 0)))
    ctx = incremental(c, sid, 1)
    answered = [
        (A0, news(records=True)),
        (A1, news(hw=11)),  # the high watermark moved
        (B0, news(log_start=5)),  # the log start moved
        (("c", 0), news()),  # unchanged
        (("d", 0), PartitionNews(False, False, 10, 9, 0)),  # the last stable offset moved
    ]
    assert c.complete(ctx, answered, 1).carried == (A0, A1, B0, ("d", 0))
    # the cached values took the answer's: the same answer again carries only records
    ctx = incremental(c, sid, 2)
    answered[0] = (A0, news())
    assert c.complete(ctx, answered, 2).carried == ()


def test_an_error_is_always_carried_and_the_partition_again_once_it_clears():
    c = cache()
    sid = open_session(c, keys=(A0,))
    ctx = incremental(c, sid, 1)
    error = PartitionNews(False, True, -1, -1, -1)
    assert c.complete(ctx, [(A0, error)], 1).carried == (A0,)
    assert c.complete(incremental(c, sid, 2), [(A0, error)], 2).carried == (A0,)
    # cleared, with the same offsets as before the error: sent, the cached hw was reset
    assert c.complete(incremental(c, sid, 3), [(A0, news())], 3).carried == (A0,)
    assert c.complete(incremental(c, sid, 4), [(A0, news())], 4).carried == ()


def test_incremental_adds_updates_and_forgets_partitions():
    c = cache()
    sid = open_session(c, keys=(A0, A1))
    ctx = incremental(
        c, sid, 1, asked=[(A1, state(offset=5)), (B0, state(offset=2))], forgotten=[A0]
    )
    assert ctx.partitions == ((A1, state(offset=5)), (B0, state(offset=2)))
    # a new partition is carried the first time (its cached high watermark is -1)
    assert c.complete(ctx, [(A1, news()), (B0, news())], 1).carried == (B0,)
    assert c.stats.partitions_cached == 2


def test_partitions_with_records_move_to_the_end():
    c = cache()
    sid = open_session(c)
    ctx = incremental(c, sid, 1)
    c.complete(ctx, [(A0, news(records=True)), (A1, news()), (B0, news())], 1)
    assert [k for k, _ in incremental(c, sid, 2).partitions] == [A1, B0, A0]


def test_wrong_epoch_unknown_id_and_topic_id_mismatch():
    c = cache()
    sid = open_session(c)
    wrong = incremental(c, sid, 5)
    assert (wrong.kind, wrong.error) == (
        ContextKind.ERROR,
        SessionError.INVALID_FETCH_SESSION_EPOCH,
    )
    assert c.complete(wrong, [], 0) == c.complete(wrong, [], 0).__class__(
        NO_SESSION, SessionError.INVALID_FETCH_SESSION_EPOCH, ()
    )
    assert incremental(c, sid + 1, 1).error is SessionError.FETCH_SESSION_ID_NOT_FOUND
    assert incremental(c, sid, 1, ids=True).error is SessionError.FETCH_SESSION_TOPIC_ID_ERROR
    # a refused epoch does not move the session on
    assert incremental(c, sid, 1).kind is ContextKind.INCREMENTAL


def test_a_raced_incremental_fetch_is_answered_invalid_epoch():
    c = cache()
    sid = open_session(c)
    first = incremental(c, sid, 1)
    second = incremental(c, sid, 2)  # taken before the first answered
    done = c.complete(first, [(A0, news(records=True))], 1)
    assert (done.session_id, done.error, done.carried) == (
        sid,
        SessionError.INVALID_FETCH_SESSION_EPOCH,
        (),
    )
    assert c.complete(second, [(A0, news(records=True))], 1).carried == (A0,)


def test_final_epoch_closes_the_session_and_answers_sessionless():
    c = cache()
    sid = open_session(c)
    ctx = c.new_context(
        sid, -1, [(A0, state())], [], uses_topic_ids=False, privileged=False, now_ms=1
    )
    assert ctx.kind is ContextKind.SESSIONLESS
    assert c.complete(ctx, [(A0, news())], 1).session_id == NO_SESSION
    assert c.stats.sessions == 0
    assert incremental(c, sid, 1).error is SessionError.FETCH_SESSION_ID_NOT_FOUND


def test_a_full_fetch_naming_a_session_closes_it_and_opens_another():
    c = cache()
    sid = open_session(c)
    ctx = c.new_context(
        sid, 0, [(A0, state())], [], uses_topic_ids=False, privileged=False, now_ms=1
    )
    other = c.complete(ctx, [(A0, news())], 1).session_id
    assert other not in (NO_SESSION, sid)
    assert incremental(c, sid, 1).error is SessionError.FETCH_SESSION_ID_NOT_FOUND
    assert c.stats.sessions == 1


def test_forgetting_every_partition_closes_the_session():
    c = cache()
    sid = open_session(c, keys=(A0,))
    ctx = incremental(c, sid, 1, forgotten=[A0])
    assert (ctx.kind, ctx.partitions) == (ContextKind.SESSIONLESS, ())
    assert c.complete(ctx, [], 1).session_id == NO_SESSION
    assert c.stats.sessions == 0


def test_no_slots_no_sessions():
    c = cache(slots=0)
    assert open_session(c) == NO_SESSION
    assert c.stats.sessions == 0


def test_a_full_cache_evicts_the_least_recently_used_once_idle_past_the_eviction_time():
    c = cache(slots=2, eviction_ms=1000)
    first = open_session(c, now=0)
    second = open_session(c, now=10)
    assert open_session(c, now=500) == NO_SESSION  # both fresh, neither evictable
    incremental(c, first, 1, now=900)  # first used again: second is now the oldest
    third = open_session(c, now=1011)  # second idle 1001 ms > 1000
    assert third != NO_SESSION
    assert incremental(c, second, 1, now=1011).error is SessionError.FETCH_SESSION_ID_NOT_FOUND
    assert incremental(c, first, 2, now=1011).kind is ContextKind.INCREMENTAL
    assert c.stats.evictions == 1


def test_an_old_busy_session_gives_way_to_a_larger_one_only():
    c = cache(slots=1, eviction_ms=1000)
    small = open_session(c, keys=(A0,), now=0)
    incremental(c, small, 1, now=1500)  # used 1500 ms after creation: evictable
    assert open_session(c, keys=(B0,), now=1600) == NO_SESSION  # same size: kept
    larger = open_session(c, keys=(A0, B0), now=1600)
    assert larger != NO_SESSION
    assert incremental(c, small, 2, now=1600).error is SessionError.FETCH_SESSION_ID_NOT_FOUND


def test_a_young_busy_session_is_kept_from_consumers_but_not_from_a_follower():
    c = cache(slots=1, eviction_ms=1000)
    consumer = open_session(c, keys=(A0,), now=0)
    assert open_session(c, keys=(A0, A1, B0), now=100) == NO_SESSION
    follower = open_session(c, keys=(A0,), now=200, privileged=True)
    assert follower != NO_SESSION  # a follower's session is worth more than a consumer's
    assert incremental(c, consumer, 1, now=200).error is SessionError.FETCH_SESSION_ID_NOT_FOUND
    # and a consumer's never evicts a young follower's, whatever its size
    assert open_session(c, keys=(A0, A1, B0), now=300) == NO_SESSION


def test_epochs_wrap_to_one_after_the_largest_int():
    c = cache()
    sid = open_session(c)
    c.get(sid).epoch = 2**31 - 1
    incremental(c, sid, 2**31 - 1)
    assert c.get(sid).epoch == 1


def test_topic_ids_key_the_session_apart_from_names():
    c = cache()
    topic_id = bytes(range(16))
    ctx = c.new_context(
        0, 0, [((topic_id, 0), state())], [], uses_topic_ids=True, privileged=False, now_ms=0
    )
    sid = c.complete(ctx, [((topic_id, 0), news())], 0).session_id
    ctx = incremental(c, sid, 1, asked=[((topic_id, 0), state(offset=3))], ids=True)
    assert ctx.partitions == (((topic_id, 0), state(offset=3)),)


@pytest.mark.parametrize("slots, eviction", [(-1, 0), (0, -1)])
def test_negative_settings_are_refused(slots, eviction):
    with pytest.raises(ValueError):
        FetchSessionCache(slots, eviction, random.Random(0))
