"""Partition changes: leader election in Kafka's order, unclean election only when allowed,
no record when nothing changes, and records that replay to what was asked."""

from __future__ import annotations

import pytest

from metadata.image import PartitionRegistration
from metadata.partition_change import (
    Election,
    build_partition_change,
    elect_leader,
    isr_without,
    next_elr,
)
from metadata.records import NO_LEADER
from strom_api.v1 import metadata_pb2 as pb

TID = bytes(range(16))
P = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=4)


def alive(*brokers):
    return lambda b: b in brokers


def test_the_leader_stays_while_it_is_in_the_isr_and_may_lead():
    assert elect_leader((1, 2, 3), (1, 2, 3), 2, alive(1, 2, 3)).leader == 2


def test_a_new_leader_is_the_first_replica_in_the_isr_that_may_lead():
    assert elect_leader((3, 1, 2), (1, 2), 3, alive(1, 2, 3)).leader == 1
    assert elect_leader((3, 1, 2), (1, 2), 3, alive(2, 3)).leader == 2


def test_no_isr_member_alive_means_offline_unless_unclean_election_is_enabled():
    assert elect_leader((1, 2, 3), (1,), 1, alive(2, 3)).leader == NO_LEADER
    choice = elect_leader((1, 2, 3), (1,), 1, alive(3, 2), unclean_enabled=True)
    assert (choice.leader, choice.unclean) == (2, True)
    choice = elect_leader((1, 2, 3), (1,), 1, alive(3), election=Election.UNCLEAN)
    assert (choice.leader, choice.unclean) == (3, True)


def test_preferred_election_moves_leadership_back_to_the_first_replica():
    assert elect_leader((1, 2, 3), (1, 2, 3), 2, alive(1, 2, 3), Election.PREFERRED).leader == 1
    # Not in the ISR: the current leader stays.
    assert elect_leader((1, 2, 3), (2, 3), 2, alive(1, 2, 3), Election.PREFERRED).leader == 2


def test_isr_without_keeps_the_last_member():
    assert isr_without((1, 2, 3), 2) == (1, 3)
    assert isr_without((2,), 2) == (2,)


def test_nothing_to_change_is_no_record():
    assert build_partition_change(TID, 0, P, alive(1, 2, 3)) is None
    assert build_partition_change(TID, 0, P, alive(1, 2, 3), target_isr=(1, 2, 3)) is None


def test_a_fenced_leader_is_replaced_and_removed_from_the_isr():
    record = build_partition_change(TID, 0, P, alive(2, 3), target_isr=isr_without(P.isr, 1))
    assert record is not None
    assert record.leader == 2 and list(record.isr.ids) == [2, 3]
    after = P.merge(record)
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (2, (2, 3), 5, 1)


def test_an_isr_shrink_keeps_the_leader_and_its_epoch():
    record = build_partition_change(TID, 0, P, alive(1, 2, 3), target_isr=(1, 2))
    assert record is not None and not record.HasField("leader")
    after = P.merge(record)
    assert (after.leader, after.isr, after.leader_epoch) == (1, (1, 2), 4)


def test_an_unclean_election_makes_the_new_leader_the_whole_isr_and_recovering():
    offline = PartitionRegistration((1, 2, 3), (1,), NO_LEADER, leader_epoch=6)
    assert build_partition_change(TID, 0, offline, alive(2, 3)) is None  # stays offline
    record = build_partition_change(TID, 0, offline, alive(2, 3), unclean_enabled=True)
    assert record is not None
    after = offline.merge(record)
    assert (after.leader, after.isr, after.leader_recovery_state) == (2, (2,), pb.RECOVERING)


def test_reassignment_fields_are_set_even_when_emptied():
    moving = PartitionRegistration(
        (1, 2, 3, 4), (1, 2, 3, 4), 1, adding_replicas=(4,), removing_replicas=(3,)
    )
    record = build_partition_change(
        TID,
        0,
        moving,
        alive(1, 2, 3, 4),
        target_replicas=(1, 2, 4),
        target_isr=(1, 2, 4),
        target_adding=(),
        target_removing=(),
    )
    assert record is not None
    after = moving.merge(record)
    assert after.replicas == (1, 2, 4) and after.adding_replicas == () == after.removing_replicas


@pytest.mark.parametrize("leader", [1, 2, 3])
def test_the_isr_never_holds_a_broker_outside_the_replicas(leader):
    current = PartitionRegistration((1, 2, 3), (1, 2, 3), leader)
    record = build_partition_change(
        TID, 0, current, alive(1, 2, 3, 4), target_replicas=(1, 2, 4), target_isr=(1, 2, 3, 4)
    )
    assert record is not None
    after = current.merge(record)
    assert set(after.isr) <= set(after.replicas)
    assert after.leader in after.isr


# --- eligible leader replicas (KIP-966) -------------------------------------------------------


def test_the_elr_gains_who_leaves_the_isr_below_min_insync_replicas():
    assert next_elr((1, 2, 3), (1, 2, 3), (1, 2), (), min_isr=2) == ()  # still at min
    assert next_elr((1, 2, 3), (1, 2), (1,), (), min_isr=2) == (2,)
    assert next_elr((1, 2, 3), (1,), (3,), (2,), min_isr=2) == (2, 1)
    assert next_elr((1, 2, 3), (1,), (1, 2), (2, 3), min_isr=2) == ()  # back at min: empty
    assert next_elr((1, 2, 3), (1,), (1,), (2, 3), min_isr=3) == (2, 3)


def test_the_elr_drops_isr_members_non_replicas_and_those_that_lost_data():
    assert next_elr((1, 2, 3), (1,), (1, 2), (2, 3), min_isr=3) == (3,)
    assert next_elr((1, 2), (1,), (1,), (2, 3), min_isr=2) == (2,)
    assert next_elr((1, 2, 3), (1, 2), (1,), (3,), min_isr=2, lost_data=(2,)) == (3,)


def test_an_elr_member_leads_cleanly_when_no_isr_member_may():
    choice = elect_leader((1, 2, 3), (1,), 1, alive(2, 3), elr=(3,))
    assert (choice.leader, choice.unclean, choice.from_elr) == (3, False, True)
    # the ISR comes first, and unclean election comes after the ELR
    assert elect_leader((1, 2, 3), (2,), 1, alive(2, 3), elr=(3,)).leader == 2
    assert elect_leader((1, 2, 3), (1,), 1, alive(2, 3), unclean_enabled=True, elr=(3,)).leader == 3


def test_an_election_from_the_elr_makes_it_the_isr_and_moves_the_old_isr_to_the_elr():
    current = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=NO_LEADER, elr=(3,))
    record = build_partition_change(TID, 0, current, alive(2, 3), min_isr=2)
    after = current.merge(record)
    assert (after.leader, after.isr, after.elr) == (3, (3,), (1,))
    assert after.leader_recovery_state == pb.RECOVERED


def test_an_unclean_election_empties_the_elr():
    current = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=NO_LEADER, elr=(3,))
    record = build_partition_change(TID, 0, current, alive(2), min_isr=2, unclean_enabled=True)
    after = current.merge(record)
    assert (after.leader, after.isr, after.elr) == (2, (2,), ())
    assert after.leader_recovery_state == pb.RECOVERING
