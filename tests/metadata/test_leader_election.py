"""ElectLeaders (preferred and unclean) with Kafka's per-partition errors, and the automatic
leader rebalance driven by leader.imbalance.per.broker.percentage."""

from __future__ import annotations

import pytest

from metadata.errors import ApiError
from metadata.image import PartitionRegistration
from metadata.leader_election import elect_leaders, imbalanced_brokers, rebalance_leaders
from metadata.partition_change import Election
from metadata.records import NO_LEADER
from strom_api.v1 import metadata_pb2 as pb
from tests.metadata.image_builder import build, commit

P = PartitionRegistration


def errors(results) -> dict:
    return {tp: None if e is None else e.error_name for tp, e in results.items()}


# --- preferred ---------------------------------------------------------------------------------


def test_a_preferred_election_moves_leadership_back_to_the_first_replica():
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=2, leader_epoch=3)})
    records, results = elect_leaders(image, [("t", 0)], Election.PREFERRED)
    assert errors(results) == {("t", 0): None}
    after = commit(image, records).topics.partition("t", 0)
    assert (after.leader, after.leader_epoch, after.isr) == (1, 4, (1, 2, 3))


def test_a_preferred_election_is_not_needed_when_the_preferred_replica_leads():
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=1)})
    records, results = elect_leaders(image, [("t", 0)], Election.PREFERRED)
    assert records == [] and errors(results) == {("t", 0): "ELECTION_NOT_NEEDED"}
    assert results["t", 0].message == "Leader election not needed for topic partition."


@pytest.mark.parametrize(
    ("isr", "fenced", "shutting_down"),
    [((2, 3), (), ()), ((1, 2, 3), (1,), ()), ((1, 2, 3), (), (1,))],
    ids=["out-of-isr", "fenced", "shutting-down"],
)
def test_the_preferred_leader_must_be_in_the_isr_and_able_to_lead(isr, fenced, shutting_down):
    image = build(
        {("t", 0): P((1, 2, 3), isr, leader=2)}, fenced=fenced, shutting_down=shutting_down
    )
    records, results = elect_leaders(image, [("t", 0)], Election.PREFERRED)
    assert records == [] and errors(results) == {("t", 0): "PREFERRED_LEADER_NOT_AVAILABLE"}


def test_a_leaderless_partition_gets_its_preferred_leader_when_it_can_lead():
    image = build({("t", 0): P((1, 2), (1,), leader=NO_LEADER)})
    records, results = elect_leaders(image, [("t", 0)], Election.PREFERRED)
    assert errors(results) == {("t", 0): None}
    assert commit(image, records).topics.partition("t", 0).leader == 1


def test_unknown_topics_and_partitions_are_refused_the_others_go_ahead():
    image = build({("t", 0): P((1, 2), (1, 2), leader=2)})
    records, results = elect_leaders(image, [("nope", 0), ("t", 5), ("t", 0)], Election.PREFERRED)
    assert errors(results) == {
        ("nope", 0): "UNKNOWN_TOPIC_OR_PARTITION",
        ("t", 5): "UNKNOWN_TOPIC_OR_PARTITION",
        ("t", 0): None,
    }
    assert results["nope", 0].message == "No such topic as nope"
    assert results["t", 5].message == "No such partition as t-5"
    assert len(records) == 1


def test_a_partition_named_twice_is_elected_once():
    image = build({("t", 0): P((1, 2), (1, 2), leader=2)})
    records, results = elect_leaders(image, [("t", 0), ("t", 0)], Election.PREFERRED)
    assert len(records) == 1 and errors(results) == {("t", 0): None}


def test_all_partitions_lists_only_those_that_needed_an_election():
    image = build(
        {
            ("a", 0): P((1, 2), (1, 2), leader=1),  # balanced: left out, as Kafka does
            ("a", 1): P((2, 1), (2, 1), leader=1),  # elected
            ("b", 0): P((3, 1), (1,), leader=1),  # preferred out of the ISR: listed
        }
    )
    records, results = elect_leaders(image, None, Election.PREFERRED)
    assert errors(results) == {("a", 1): None, ("b", 0): "PREFERRED_LEADER_NOT_AVAILABLE"}
    after = commit(image, records)
    assert after.topics.partition("a", 1).leader == 2
    assert after.topics.partition("b", 0).leader == 1


# --- unclean -----------------------------------------------------------------------------------


def test_an_unclean_election_takes_a_replica_outside_the_isr_even_if_the_topic_forbids_it():
    image = build(
        {("t", 0): P((1, 2, 3), (1,), leader=NO_LEADER)},
        fenced=(1,),
        configs={"t": {"unclean.leader.election.enable": "false"}},
    )
    records, results = elect_leaders(image, [("t", 0)], Election.UNCLEAN)
    assert errors(results) == {("t", 0): None}
    after = commit(image, records).topics.partition("t", 0)
    assert (after.leader, after.isr, after.leader_recovery_state) == (2, (2,), pb.RECOVERING)


def test_an_unclean_election_still_prefers_the_isr():
    image = build({("t", 0): P((1, 2, 3), (3,), leader=NO_LEADER)})
    records, _ = elect_leaders(image, [("t", 0)], Election.UNCLEAN)
    after = commit(image, records).topics.partition("t", 0)
    assert (after.leader, after.isr, after.leader_recovery_state) == (3, (3,), pb.RECOVERED)


def test_an_unclean_election_is_not_needed_with_a_leader_and_impossible_with_no_candidate():
    image = build(
        {
            ("t", 0): P((1, 2), (1, 2), leader=1),
            ("t", 1): P((2, 3), (2,), leader=NO_LEADER),
        },
        fenced=(2, 3),
    )
    records, results = elect_leaders(image, [("t", 0), ("t", 1)], Election.UNCLEAN)
    assert records == []
    assert errors(results) == {
        ("t", 0): "ELECTION_NOT_NEEDED",
        ("t", 1): "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    }


def test_online_is_not_an_election_type_of_the_api():
    with pytest.raises(ApiError) as caught:
        elect_leaders(build({}), None, Election.ONLINE)
    assert caught.value.error_name == "INVALID_REQUEST"


# --- the automatic rebalance -------------------------------------------------------------------


def led_by_preferred_of_one(not_led: int, total: int = 10) -> dict:
    """`total` partitions whose preferred replica is broker 1, the first `not_led` led by 2."""
    return {
        ("t", i): P((1, 2), (1, 2), leader=2 if i < not_led else 1, leader_epoch=1)
        for i in range(total)
    }


def test_an_imbalance_at_the_percentage_is_tolerated_above_it_is_not():
    assert imbalanced_brokers(build(led_by_preferred_of_one(1)), 10) == {}
    assert rebalance_leaders(build(led_by_preferred_of_one(1)), 10) == []
    image = build(led_by_preferred_of_one(2))
    assert imbalanced_brokers(image, 10) == {1: pytest.approx(0.2)}
    after = commit(image, rebalance_leaders(image, 10))
    assert all(p.leader == 1 for p in after.topics.by_name["t"].partitions.values())
    assert imbalanced_brokers(after, 0) == {}


def test_percentage_zero_rebalances_any_imbalance():
    image = build(led_by_preferred_of_one(1))
    assert imbalanced_brokers(image, 0) == {1: pytest.approx(0.1)}
    assert len(rebalance_leaders(image, 0)) == 1


def test_a_leaderless_partition_counts_as_imbalanced():
    image = build({("t", 0): P((1, 2), (1,), leader=NO_LEADER), ("t", 1): P((1, 2), (1, 2), 1)})
    assert imbalanced_brokers(image, 10) == {1: pytest.approx(0.5)}


def test_the_rebalance_skips_partitions_the_preferred_replica_cannot_take():
    parts = led_by_preferred_of_one(5)
    parts["t", 0] = P((1, 2), (2,), leader=2)  # the preferred replica is out of the ISR
    image = build(parts)
    records = rebalance_leaders(image, 10)
    assert sorted(r.partition_id for r in records) == [1, 2, 3, 4]
    # A broker that may not lead gets nothing, however imbalanced.
    assert rebalance_leaders(build(parts, shutting_down=(1,)), 10) == []


def test_every_imbalanced_broker_is_rebalanced_on_its_own_ratio():
    parts = {
        ("a", 0): P((1, 2, 3), (1, 2, 3), leader=2),
        ("a", 1): P((2, 3, 1), (1, 2, 3), leader=3),
        ("a", 2): P((3, 1, 2), (1, 2, 3), leader=3),
        ("a", 3): P((3, 1, 2), (1, 2, 3), leader=3),
    }
    image = build(parts)
    assert imbalanced_brokers(image, 10) == {1: 1.0, 2: 1.0}
    after = commit(image, rebalance_leaders(image, 10))
    leaders = {pid: p.leader for pid, p in after.topics.by_name["a"].partitions.items()}
    assert leaders == {0: 1, 1: 2, 2: 3, 3: 3}
