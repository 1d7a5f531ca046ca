"""The leader's view of its followers: caught-up times by Kafka's rule, ISR shrink and
expand proposals with the maximal ISR in between, and a high watermark that follows the
ISR's slowest member, never moves back, and stops below min.insync.replicas."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.partition_leader import PartitionLeader

LAG = 30_000


def leader(isr=(1, 2, 3), end=0, hw=0, min_isr=1, now=0) -> PartitionLeader:
    return PartitionLeader.elected(
        1,
        (1, 2, 3),
        isr,
        5,
        7,
        end,
        hw,
        now,
        min_insync_replicas=min_isr,
        replica_lag_time_max_ms=LAG,
    )


def everyone(_: int) -> bool:
    return True


def test_the_high_watermark_follows_the_slowest_isr_member():
    p = leader(end=10)
    assert p.on_follower_fetch(2, 10, 10, 1) is False  # 3 has not fetched: still at 0
    assert p.on_follower_fetch(3, 6, 10, 2) is True and p.high_watermark == 6
    assert p.on_follower_fetch(3, 10, 10, 3) is True and p.high_watermark == 10
    # A follower's fetch from an older offset never moves it back.
    assert p.on_follower_fetch(3, 4, 12, 4) is False and p.high_watermark == 10


def test_a_lagging_follower_is_proposed_out_and_the_hw_then_moves_without_it():
    p = leader(end=100)
    p.on_follower_fetch(2, 100, 100, 1_000)
    p.on_follower_fetch(3, 40, 100, 1_000)
    assert p.high_watermark == 40
    # Its last caught-up time is the election (0): out once the lag time has passed.
    assert p.isr_change_needed(100, LAG, everyone) is None
    change = p.isr_change_needed(100, LAG + 1, everyone)
    assert change is not None and change.removed == (3,) and change.isr == (1, 2)
    # While the shrink is in flight the maximal ISR still holds 3: no jump yet.
    assert not p.update_high_watermark(100) and p.high_watermark == 40
    assert p.isr_change_needed(100, 2_000 + LAG, everyone) is None  # one at a time
    p.on_isr_committed((1, 2), 8)
    assert p.update_high_watermark(100) and p.high_watermark == 100


def test_a_follower_at_the_leaders_log_end_stays_in_the_isr_of_an_idle_partition():
    p = leader(end=10, hw=10)
    p.on_follower_fetch(2, 10, 10, 1)
    p.on_follower_fetch(3, 10, 10, 1)
    # Long past replica.lag.time.max.ms without a fetch, but nothing to fetch: caught up.
    assert p.isr_change_needed(10, 100 * LAG, everyone) is None
    # Once the leader's log moves on, the old catch-up time counts again.
    change = p.isr_change_needed(11, 100 * LAG, everyone)
    assert change is not None and change.removed == (2, 3) and change.isr == (1,)


def test_kafkas_caught_up_rule_keeps_a_steady_follower_behind_a_busy_leader():
    p = leader(end=0)
    end, now = 0, 0
    for _ in range(100):
        now += 1_000
        fetched_to = end  # it fetched everything that existed at its previous fetch
        end += 50  # the leader appends between the fetches
        p.on_follower_fetch(2, fetched_to, end, now)
        p.on_follower_fetch(3, end, end, now)
    assert p.followers[2].last_caught_up_ms == now - 1_000
    assert p.isr_change_needed(end, now + LAG - 1_000, everyone) is None


def test_a_caught_up_eligible_follower_is_proposed_back_in():
    p = leader(isr=(1, 2), end=50, hw=50)
    p.on_follower_fetch(3, 30, 50, 1)
    assert p.isr_change_needed(50, 2, everyone) is None  # not yet at the high watermark
    p.on_follower_fetch(3, 50, 50, 3)
    assert p.isr_change_needed(50, 4, lambda b: b != 3) is None  # fenced: not eligible
    change = p.isr_change_needed(50, 4, everyone)
    assert change is not None and change.added == (3,) and change.isr == (1, 2, 3)
    # Expansion in flight: the new member already bounds the high watermark.
    p.on_follower_fetch(2, 60, 60, 5)
    assert p.high_watermark == 50
    p.on_isr_refused()
    assert p.pending is None


def test_below_min_insync_replicas_the_high_watermark_stands_still():
    p = leader(isr=(1,), end=10, hw=3, min_isr=2)
    assert p.under_min_isr()
    assert not p.on_follower_fetch(2, 10, 10, 1) and p.high_watermark == 3
    p.on_isr_committed((1, 2), 9)
    assert p.update_high_watermark(10) and p.high_watermark == 10


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_the_high_watermark_never_passes_an_isr_members_log_end(seed):
    rng = random.Random(seed)
    p = leader(end=0)
    end, now, last_hw = 0, 0, 0
    for _ in range(200):
        now += rng.randrange(1, 5_000)
        action = rng.random()
        if action < 0.3:
            end += rng.randrange(1, 20)
        elif action < 0.8:
            follower = rng.choice((2, 3))
            fetch = rng.randrange(max(p.followers[follower].log_end_offset, 0), end + 1)
            p.on_follower_fetch(follower, fetch, end, now)
        elif p.pending is None:
            p.isr_change_needed(end, now, lambda b: rng.random() < 0.8)
        elif rng.random() < 0.7:
            p.on_isr_committed(p.pending.isr, p.partition_epoch + 1)
        else:
            p.on_isr_refused()
        assert p.high_watermark >= last_hw
        last_hw = p.high_watermark
        # Every member of the ISR, proposed additions included, holds all below the high
        # watermark: it is what acks=all promises.
        # (A member that has not fetched yet, -1, holds the HW from the election: 0 here.)
        for member in p.maximal_isr:
            if member != 1:
                known = p.followers[member].log_end_offset
                assert known >= p.high_watermark or (known == -1 and p.high_watermark == 0)
        assert 1 in p.isr
