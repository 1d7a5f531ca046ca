"""Partition reassignment (KIP-455): starting one adds the target's new replicas beside the
old ones, it completes once they are in the ISR (re-electing the leader if it was being
removed), a cancel goes back, and a property test drives random reassignments to the end."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.alter_partition import IsrProposal, alter_partition_completing_reassignments
from metadata.broker_lifecycle import may_lead
from metadata.image import MetadataImage, PartitionRegistration
from metadata.reassignment import (
    OngoingReassignment,
    alter_partition_reassignments,
    complete_reassignments,
    list_partition_reassignments,
)
from metadata.records import NO_LEADER
from strom_api.v1 import metadata_pb2 as pb
from tests.metadata.image_builder import build as build_image
from tests.metadata.image_builder import commit, topic_id

P = PartitionRegistration


def build(partitions, brokers=range(1, 8), **kwargs) -> MetadataImage:
    return build_image(partitions, brokers, **kwargs)


def reassign(image: MetadataImage, requests) -> MetadataImage:
    records, results = alter_partition_reassignments(image, requests)
    assert all(e is None for e in results.values()), results
    return commit(image, records)


def expand_isr(image: MetadataImage, name: str, pid: int, *brokers: int) -> MetadataImage:
    """The ISR change the leader's AlterPartition makes once `brokers` caught up."""
    p = image.topics.partition(name, pid)
    assert p is not None
    record = pb.PartitionChangeRecord(topic_id=topic_id(name), partition_id=pid)
    record.isr.SetInParent()
    record.isr.ids.extend([*p.isr, *(b for b in brokers if b not in p.isr)])
    return commit(image, [record])


def state(p: PartitionRegistration | None) -> tuple:
    assert p is not None
    return p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas


# --- starting and completing -------------------------------------------------------------------


def test_the_isr_expansion_that_completes_a_reassignment_is_one_batch_with_it():
    """The controller's AlterPartition: the leader's ISR change and the record finishing
    the reassignment it allows come back together, so one append commits both (never an
    image where the ISR grew but the reassignment, though complete, is still open)."""
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=5)})
    image = reassign(image, {("t", 0): [2, 3, 4]})
    p = image.topics.partition("t", 0)
    assert p is not None
    expand = IsrProposal(topic_id("t"), 0, p.leader_epoch, p.partition_epoch, (1, 2, 3, 4))
    records, [result] = alter_partition_completing_reassignments(image, 1, 1, [expand])
    assert result.error is None and result.registration is not None
    assert result.registration.isr == (1, 2, 3, 4)
    assert len(records) == 2, records  # the ISR change, then the completion
    done = commit(image, records)
    assert state(done.topics.partition("t", 0))[:2] == ((2, 3, 4), (2, 3, 4))
    # A shrink completes nothing and adds nothing.
    p = done.topics.partition("t", 0)
    assert p is not None
    shrink = IsrProposal(topic_id("t"), 0, p.leader_epoch, p.partition_epoch, (p.leader,))
    records, _ = alter_partition_completing_reassignments(done, p.leader, p.leader, [shrink])
    assert len(records) == 1


def test_a_reassignment_adds_first_and_removes_once_the_new_replicas_are_in_sync():
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=5)})
    image = reassign(image, {("t", 0): [2, 3, 4]})
    p = image.topics.partition("t", 0)
    assert state(p) == ((2, 3, 4, 1), (1, 2, 3), 1, (4,), (1,))
    assert (p.leader_epoch, p.partition_epoch) == (5, 1)  # the leader stays, for now
    assert list_partition_reassignments(image) == {
        ("t", 0): OngoingReassignment((2, 3, 4, 1), (4,), (1,))
    }
    assert complete_reassignments(image) == []  # 4 is not in the ISR yet
    image = expand_isr(image, "t", 0, 4)
    image = commit(image, complete_reassignments(image))
    p = image.topics.partition("t", 0)
    # The leader was being removed: the first target replica in the ISR takes over.
    assert state(p) == ((2, 3, 4), (2, 3, 4), 2, (), ())
    assert p.leader_epoch == 6
    assert list_partition_reassignments(image) == {}
    assert complete_reassignments(image) == []


def test_a_leader_that_stays_keeps_leading():
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=2, leader_epoch=5)})
    image = reassign(image, {("t", 0): [4, 2, 3]})
    image = commit(image, complete_reassignments(expand_isr(image, "t", 0, 4)))
    p = image.topics.partition("t", 0)
    assert state(p) == ((4, 2, 3), (2, 3, 4), 2, (), ()) and p.leader_epoch == 5


def test_a_reassignment_adding_nothing_completes_at_once():
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=1)})
    records, results = alter_partition_reassignments(image, {("t", 0): [3, 2, 1]})
    assert results == {("t", 0): None} and len(records) == 1
    after = commit(image, records)
    assert state(after.topics.partition("t", 0)) == ((3, 2, 1), (1, 2, 3), 1, (), ())
    after = reassign(image, {("t", 0): [3, 2]})
    assert state(after.topics.partition("t", 0)) == ((3, 2), (2, 3), 3, (), ())


def test_the_same_replicas_again_is_no_change():
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=1)})
    assert alter_partition_reassignments(image, {("t", 0): [1, 2, 3]}) == ([], {("t", 0): None})


def test_shrinking_waits_for_every_target_replica_to_be_in_sync():
    # Finishing now would leave ISR [2] where [1, 2] is in sync today.
    image = build({("t", 0): P((1, 2, 3), (1, 2), leader=1)})
    image = reassign(image, {("t", 0): [2, 3]})
    assert state(image.topics.partition("t", 0)) == ((2, 3, 1), (1, 2), 1, (), (1,))
    assert complete_reassignments(image) == []
    image = commit(image, complete_reassignments(expand_isr(image, "t", 0, 3)))
    assert state(image.topics.partition("t", 0)) == ((2, 3), (2, 3), 2, (), ())


def test_a_lagging_replica_that_stays_does_not_hold_up_a_move():
    # KAFKA-19975: 3 is out of the ISR before and after; only the added 4 must catch up.
    image = build({("t", 0): P((1, 2, 3), (1, 2), leader=1)})
    image = reassign(image, {("t", 0): [2, 3, 4]})
    image = commit(image, complete_reassignments(expand_isr(image, "t", 0, 4)))
    assert state(image.topics.partition("t", 0)) == ((2, 3, 4), (2, 4), 2, (), ())


def test_completion_with_no_target_replica_able_to_lead_leaves_the_partition_offline():
    # Kafka completes anyway: the old leader must not go on leading outside the replicas.
    # (The new replicas joined the ISR, then were fenced before the completion ran.)
    moving = P((2, 4, 1), (1, 2, 4), leader=1, adding_replicas=(2, 4), removing_replicas=(1,))
    image = build({("t", 0): moving}, fenced=(2, 4))
    after = commit(image, complete_reassignments(image))
    assert state(after.topics.partition("t", 0)) == ((2, 4), (2, 4), NO_LEADER, (), ())


# --- replacing and cancelling ------------------------------------------------------------------


def test_a_cancel_goes_back_and_moves_a_leader_that_was_being_added():
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=1)})
    image = reassign(image, {("t", 0): [4, 5, 6]})
    image = expand_isr(image, "t", 0, 4)  # 4 caught up; 5 and 6 have not
    image = commit(
        image,  # a preferred election made 4 the leader meanwhile
        [pb.PartitionChangeRecord(topic_id=topic_id("t"), partition_id=0, leader=4)],
    )
    image = reassign(image, {("t", 0): None})
    p = image.topics.partition("t", 0)
    assert state(p) == ((1, 2, 3), (1, 2, 3), 1, (), ())
    assert list_partition_reassignments(image) == {}


def test_cancelling_nothing_is_refused():
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=1)})
    records, results = alter_partition_reassignments(image, {("t", 0): None})
    assert records == [] and results["t", 0].error_name == "NO_REASSIGNMENT_IN_PROGRESS"


def test_a_cancel_needing_an_unclean_election_needs_the_topic_to_allow_it():
    stuck = P((2, 1), (2,), leader=2, adding_replicas=(2,), removing_replicas=(1,))
    image = build({("t", 0): stuck})
    records, results = alter_partition_reassignments(image, {("t", 0): None})
    assert records == [] and results["t", 0].error_name == "INVALID_REPLICA_ASSIGNMENT"
    assert "unclean leader election" in results["t", 0].message
    image = build({("t", 0): stuck}, configs={"t": {"unclean.leader.election.enable": "true"}})
    image = reassign(image, {("t", 0): None})
    p = image.topics.partition("t", 0)
    assert state(p) == ((1,), (1,), 1, (), ()) and p.leader_recovery_state == pb.RECOVERING


def test_a_replacement_drops_replicas_still_catching_up_that_it_no_longer_wants():
    image = build({("t", 0): P((1, 2), (1, 2), leader=1)})
    image = reassign(image, {("t", 0): [3, 4]})
    image = reassign(image, {("t", 0): [3, 5]})
    # 4 never caught up and is gone at once; 3 still has to catch up.
    assert state(image.topics.partition("t", 0)) == ((3, 5, 1, 2), (1, 2), 1, (3, 5), (1, 2))
    image = reassign(image, {("t", 0): None})
    assert state(image.topics.partition("t", 0)) == ((1, 2), (1, 2), 1, (), ())


def test_a_replacement_keeps_a_replica_that_caught_up_as_a_settled_one():
    image = build({("t", 0): P((1, 2), (1, 2), leader=1)})
    image = reassign(image, {("t", 0): [3, 4]})
    image = expand_isr(image, "t", 0, 3)
    image = reassign(image, {("t", 0): [3, 5]})
    assert state(image.topics.partition("t", 0)) == ((3, 5, 1, 2), (1, 2, 3), 1, (5,), (1, 2))
    image = commit(image, complete_reassignments(expand_isr(image, "t", 0, 5)))
    assert state(image.topics.partition("t", 0)) == ((3, 5), (3, 5), 3, (), ())


# --- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ([], "The manual partition assignment includes an empty replica list."),
        ([1, 2, 1], "The manual partition assignment includes the broker 1 more than once."),
        (
            [1, 9],
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
    ],
)
def test_invalid_targets_are_refused(target, message):
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=1)})
    records, results = alter_partition_reassignments(image, {("t", 0): target})
    assert records == []
    assert results["t", 0].error_name == "INVALID_REPLICA_ASSIGNMENT"
    assert results["t", 0].message == message


def test_a_fenced_broker_may_be_a_target():
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=1)}, fenced=(4,))
    image = reassign(image, {("t", 0): [1, 2, 4]})
    assert image.topics.partition("t", 0).adding_replicas == (4,)


def test_each_partition_of_a_request_stands_alone():
    image = build({("t", 0): P((1, 2), (1, 2), 1), ("t", 1): P((2, 3), (2, 3), 2)})
    records, results = alter_partition_reassignments(
        image, {("x", 0): [1], ("t", 7): [1], ("t", 0): [1, 1], ("t", 1): [3, 4]}
    )
    assert {tp: e and e.error_name for tp, e in results.items()} == {
        ("x", 0): "UNKNOWN_TOPIC_OR_PARTITION",
        ("t", 7): "UNKNOWN_TOPIC_OR_PARTITION",
        ("t", 0): "INVALID_REPLICA_ASSIGNMENT",
        ("t", 1): None,
    }
    assert results["x", 0].message == "Unable to find a topic named x."
    assert results["t", 7].message == "Unable to find partition t:7."
    assert len(records) == 1


def test_listing_given_partitions_skips_unknown_and_settled_ones():
    image = build({("t", 0): P((1, 2), (1, 2), 1), ("t", 1): P((2, 3), (2, 3), 2)})
    image = reassign(image, {("t", 1): [3, 4]})
    assert list_partition_reassignments(image, [("t", 0), ("t", 1), ("u", 0)]) == {
        ("t", 1): OngoingReassignment((3, 4, 2), (4,), (2,))
    }


# --- property ----------------------------------------------------------------------------------

BROKERS = range(6)


def check_invariants(p: PartitionRegistration) -> None:
    assert p.isr and set(p.isr) <= set(p.replicas)
    assert len(set(p.replicas)) == len(p.replicas)
    assert set(p.adding_replicas) <= set(p.replicas)
    assert set(p.removing_replicas) <= set(p.replicas)
    assert not set(p.adding_replicas) & set(p.removing_replicas)
    assert p.leader == NO_LEADER or p.leader in p.isr


class Run:
    """Commits records for partition t-0, checking each step's epochs and invariants."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    @property
    def p(self) -> PartitionRegistration:
        p = self.image.topics.partition("t", 0)
        assert p is not None
        return p

    def commit(self, records) -> None:
        before = self.p
        self.image = commit(self.image, records)
        after = self.p
        if records:
            assert after.partition_epoch > before.partition_epoch
        else:
            assert after == before
        assert after.leader_epoch >= before.leader_epoch
        check_invariants(after)

    def expand(self, wanted) -> None:
        """The leader's AlterPartition adding the wanted replicas that caught up: only
        brokers that may join an ISR (unfenced, not shutting down, KIP-841), and only
        while there is a leader to ask."""
        ok = may_lead(self.image)
        joining = [b for b in wanted if b not in self.p.isr and ok(b)]
        if self.p.leader == NO_LEADER or not joining:
            return
        record = pb.PartitionChangeRecord(topic_id=topic_id("t"), partition_id=0)
        record.isr.SetInParent()
        record.isr.ids.extend([*self.p.isr, *joining])
        self.commit([record])

    def reassign(self, target) -> None:
        records, results = alter_partition_reassignments(self.image, {("t", 0): target})
        assert results == {("t", 0): None}
        self.commit(records)

    def complete(self) -> None:
        self.commit(complete_reassignments(self.image))


@st.composite
def scenarios(draw):
    status = {b: draw(st.sampled_from(["up"] * 6 + ["fenced", "shutdown"])) for b in BROKERS}
    replicas = draw(st.permutations(list(BROKERS)))[: draw(st.integers(1, 4))]
    isr = [b for b in replicas if draw(st.booleans())] or [replicas[0]]
    can_lead = [b for b in isr if status[b] == "up"]
    leader = draw(st.sampled_from(can_lead)) if can_lead else NO_LEADER
    earlier = draw(st.none() | st.permutations(list(BROKERS)).map(lambda x: x[:3]))
    earlier_caught_up = draw(st.lists(st.sampled_from(list(BROKERS)), max_size=3))
    target = draw(st.permutations(list(BROKERS)))[: draw(st.integers(1, 5))]
    return status, P(tuple(replicas), tuple(isr), leader), earlier, earlier_caught_up, target


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_a_reassignment_ends_on_its_target_with_a_sound_isr_and_leader(scenario):
    status, start, earlier, earlier_caught_up, target = scenario
    run = Run(
        build(
            {("t", 0): start},
            brokers=BROKERS,
            fenced=[b for b, s in status.items() if s == "fenced"],
            shutting_down=[b for b, s in status.items() if s == "shutdown"],
        )
    )
    check_invariants(run.p)
    if earlier is not None:  # a reassignment in progress, partly caught up, to be replaced
        run.reassign(earlier)
        run.expand([b for b in earlier_caught_up if b in run.p.adding_replicas])
        run.complete()

    run.reassign(target)
    run.expand(run.p.adding_replicas)
    run.complete()
    if run.p.adding_replicas or run.p.removing_replicas:
        # Shrinking the replica count also waits for the target replicas already there.
        run.expand(target)
        run.complete()

    p = run.p
    ok = may_lead(run.image)
    if p.adding_replicas or p.removing_replicas:
        # Still waiting: only because a replica it needs cannot join the ISR, having no
        # leader to add it or being unable to (fenced, shutting down).
        assert p.leader == NO_LEADER or any(b not in p.isr and not ok(b) for b in target)
        return
    assert p.replicas == tuple(target)
    assert p.isr and set(p.isr) <= set(target)
    if any(ok(b) for b in p.isr):
        assert p.leader in p.isr
    else:
        assert p.leader == NO_LEADER


def test_keeping_the_replication_factor_refuses_a_target_of_another_size():
    """KIP-860's allowReplicationFactorChange=false; a reassignment in progress counts by
    its target, not by the replicas it still has."""
    image = build({("t", 0): P((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=5)})
    _, results = alter_partition_reassignments(
        image, {("t", 0): [1, 2]}, keep_replication_factor=True
    )
    error = results["t", 0]
    assert error is not None and error.error_name == "INVALID_REPLICATION_FACTOR"
    assert "from 3 to 2" in error.message
    moving = reassign(image, {("t", 0): [2, 3, 4]})  # replicas (2, 3, 4, 1) meanwhile
    _, results = alter_partition_reassignments(
        moving, {("t", 0): [3, 4, 5]}, keep_replication_factor=True
    )
    assert results == {("t", 0): None}
    _, results = alter_partition_reassignments(image, {("t", 0): [1, 2]})
    assert results == {("t", 0): None}  # allowed by default, as in Kafka
