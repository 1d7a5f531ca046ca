"""The assignors' properties (hypothesis): every subscribed partition goes to exactly one
member subscribed to its topic; range and roundrobin match Kafka's worked examples; sticky
is balanced and moves as few partitions as a balanced result allows; cooperative-sticky
never hands a partition to a new owner in the same round its old owner still holds it.
The protocol bytes round-trip."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strom.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    by_name,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


def test_range_matches_kafkas_example():
    # Kafka's RangeAssignor javadoc: C0, C1 on t0, t1 with 3 partitions each.
    subs = {"C0": Subscription(("t0", "t1")), "C1": Subscription(("t0", "t1"))}
    out = RangeAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert out == {
        "C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)],
        "C1": [("t0", 2), ("t1", 2)],
    }


def test_roundrobin_matches_kafkas_example():
    subs = {"C0": Subscription(("t0", "t1")), "C1": Subscription(("t0", "t1"))}
    out = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert out == {
        "C0": [("t0", 0), ("t0", 2), ("t1", 1)],
        "C1": [("t0", 1), ("t1", 0), ("t1", 2)],
    }


MEMBERS = st.lists(
    st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, max_size=6, unique=True
)
TOPICS = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(1, 12), min_size=1)


@st.composite
def groups(draw):
    partitions = draw(TOPICS)
    members = draw(MEMBERS)
    subs = {}
    for m in members:
        topics = draw(st.lists(st.sampled_from(sorted(partitions)), min_size=1, unique=True))
        subs[m] = Subscription(tuple(sorted(topics)))
    return partitions, subs


def check_complete(partitions, subs, out):
    seen = [tp for tps in out.values() for tp in tps]
    assert len(seen) == len(set(seen))
    wanted = {(t, p) for s in subs.values() for t in s.topics for p in range(partitions[t])}
    assert set(seen) == wanted
    for member, tps in out.items():
        assert all(t in subs[member].topics for t, _ in tps)


@given(groups())
@settings(max_examples=150)
def test_every_assignor_gives_every_partition_to_exactly_one_subscriber(group):
    partitions, subs = group
    for assignor in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor()):
        check_complete(partitions, subs, assignor.assign(partitions, subs))


@given(st.dictionaries(st.sampled_from(["a", "b"]), st.integers(1, 20), min_size=1), MEMBERS)
@settings(max_examples=150)
def test_sticky_is_balanced_for_equal_subscriptions(partitions, members):
    subs = {m: Subscription(tuple(sorted(partitions))) for m in members}
    out = StickyAssignor().assign(partitions, subs)
    loads = [len(tps) for tps in out.values()]
    assert max(loads) - min(loads) <= 1


@given(st.integers(2, 24), MEMBERS, st.data())
@settings(max_examples=150)
def test_sticky_moves_only_what_balance_needs(count, members, data):
    partitions = {"t": count}
    before = StickyAssignor().assign(partitions, {m: Subscription(("t",)) for m in members})
    # One member leaves or one joins; the others report what they owned.
    if len(members) > 1 and data.draw(st.booleans()):
        gone = data.draw(st.sampled_from(members))
        now_members = [m for m in members if m != gone]
    else:
        now_members = [*members, "newcomer"]
    subs = {m: Subscription(("t",), tuple(before.get(m, [])), generation=1) for m in now_members}
    after = StickyAssignor().assign(partitions, subs)
    loads = [len(tps) for tps in after.values()]
    assert max(loads) - min(loads) <= 1
    kept = sum(len(set(before.get(m, [])) & set(after[m])) for m in now_members)
    # The most a balanced result can keep: each survivor keeps min(what it had, its share).
    share = sorted(loads, reverse=True)
    best = 0
    owned = sorted((len(before.get(m, [])) for m in now_members), reverse=True)
    for had, gets in zip(owned, share, strict=True):
        best += min(had, gets)
    assert kept >= best - 1


@given(st.integers(2, 24), MEMBERS)
@settings(max_examples=100)
def test_cooperative_sticky_never_assigns_a_partition_its_owner_still_holds(count, members):
    partitions = {"t": count}
    first = CooperativeStickyAssignor().assign(
        partitions, {m: Subscription(("t",)) for m in members}
    )
    newcomers = [*members, "zz-new"]
    subs = {m: Subscription(("t",), tuple(first.get(m, [])), 1) for m in newcomers}
    second = CooperativeStickyAssignor().assign(partitions, subs)
    for member, tps in second.items():
        for tp in tps:
            owner = next((m for m in members if tp in first.get(m, [])), member)
            assert owner == member  # moved partitions wait for the next round
    # The round after the owners gave them up, everything is assigned and balanced.
    subs = {m: Subscription(("t",), tuple(second[m]), 2) for m in newcomers}
    third = CooperativeStickyAssignor().assign(partitions, subs)
    check_complete(partitions, subs, third)
    loads = [len(tps) for tps in third.values()]
    assert max(loads) - min(loads) <= 1


def test_protocol_bytes_round_trip_and_names():
    s = Subscription(("a", "b"), (("a", 0), ("b", 3)), 7, b"ud")
    assert decode_subscription(encode_subscription(s)) == s
    a = Assignment((("a", 1), ("a", 2), ("b", 0)), b"x")
    assert decode_assignment(encode_assignment(a)) == a
    assert (
        by_name("org.apache.kafka.clients.consumer.CooperativeStickyAssignor").protocol
        == "cooperative"
    )
    assert by_name("range").name == "range"
