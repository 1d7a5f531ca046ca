"""Broker lifecycle: registration, unfencing once caught up, fencing after the session
timeout (also under a newly active controller), controlled shutdown moving leaderships
away first, and the partition changes each brings."""

from __future__ import annotations

import pytest

from metadata.broker_lifecycle import (
    BrokerRegistrationRequest,
    HeartbeatRequest,
    HeartbeatTracker,
    fence_broker,
    heartbeat,
    register_broker,
    unfence_broker,
    unregister_broker,
)
from metadata.delta import MetadataDelta
from metadata.errors import ApiError
from metadata.image import EMPTY_IMAGE, Endpoint, MetadataImage
from metadata.records import NO_LEADER
from metadata.topic_control import NewTopic, create_topics
from strom_api.v1 import metadata_pb2 as pb


class Controller:
    """Just enough of an active controller: it commits records at once."""

    def __init__(self) -> None:
        self.image = EMPTY_IMAGE
        self.tracker = HeartbeatTracker(session_timeout_ms=9000)
        self.now = 0

    def commit(self, records) -> MetadataImage:
        end = self.image.offset + len(records)
        self.image = MetadataDelta(self.image).replay_all(records).apply(end, 1)
        return self.image

    def register(
        self,
        broker_id: int,
        incarnation: int = 0,
        rack: str | None = None,
        previous_epoch: int = -1,
    ) -> int:
        request = BrokerRegistrationRequest(
            broker_id,
            bytes([incarnation]) * 16,
            [Endpoint("PLAINTEXT", "h", 9000 + broker_id)],
            rack,
            previous_epoch,
        )
        records, epoch = register_broker(
            self.image, self.tracker, request, self.image.offset, self.now
        )
        self.commit(records)
        return epoch

    def beat(self, broker_id: int, epoch: int, **kw):
        request = HeartbeatRequest(broker_id, epoch, kw.pop("offset", self.image.offset), **kw)
        records, response = heartbeat(self.image, self.tracker, request, self.now)
        self.commit(records)
        return response


def started(brokers=3) -> tuple[Controller, dict[int, int]]:
    c = Controller()
    epochs = {b: c.register(b) for b in range(1, brokers + 1)}
    for b, e in epochs.items():
        c.beat(b, e)
    return c, epochs


def test_a_registered_broker_is_fenced_until_it_has_replayed_its_registration():
    c = Controller()
    epoch = c.register(1)
    assert epoch == 0 and c.image.cluster.brokers[1].fenced
    response = c.beat(1, epoch, offset=0)  # not yet replayed its own record
    assert not response.is_caught_up and response.is_fenced
    response = c.beat(1, epoch, offset=1)
    assert response.is_caught_up and not response.is_fenced
    assert not c.image.cluster.brokers[1].fenced


def test_heartbeats_with_a_stale_epoch_or_from_strangers_are_refused():
    c, epochs = started(1)
    with pytest.raises(ApiError) as caught:
        c.beat(1, epochs[1] + 5)
    assert caught.value.error_name == "STALE_BROKER_EPOCH"
    with pytest.raises(ApiError) as caught:
        c.beat(7, 0)
    assert caught.value.error_name == "BROKER_ID_NOT_REGISTERED"


def test_a_restarted_broker_replaces_its_live_registration_at_once():
    """KIP-631: a new incarnation is a restart. It used to be refused
    (DUPLICATE_BROKER_REGISTRATION) until the old session ran out, which kept a restarted
    broker, or a whole restarted cluster, out for broker.session.timeout.ms (issue 17)."""
    c, epochs = started(3)
    records, _ = create_topics(c.image, [NewTopic("t", 3, 3)])
    c.commit(records)
    assert any(p.leader == 1 for p in c.image.topics.by_name["t"].partitions.values())
    c.now += 100  # well inside the old incarnation's session
    epoch = c.register(1, incarnation=9, previous_epoch=epochs[1])
    broker = c.image.cluster.brokers[1]
    assert epoch != epochs[1] and (broker.epoch, broker.fenced) == (epoch, True)
    assert broker.incarnation_id == bytes([9]) * 16
    for p in c.image.topics.by_name["t"].partitions.values():
        assert p.leader != 1  # the old incarnation's leaderships moved with its fencing
    with pytest.raises(ApiError) as caught:
        c.beat(1, epochs[1])  # the old incarnation is gone
    assert caught.value.error_name == "STALE_BROKER_EPOCH"
    assert not c.beat(1, epoch).is_fenced  # the new one caught up: unfenced


def test_the_same_incarnation_registering_again_is_the_same_registration():
    c, epochs = started(1)
    offset = c.image.offset
    assert c.register(1) == epochs[1]  # a retry whose answer was lost
    assert c.image.offset == offset and not c.image.cluster.brokers[1].fenced


def test_a_replaced_incarnation_cannot_take_the_registration_back():
    """Two processes with one node.id: the older one's re-registration is refused, so they
    do not replace each other in turn."""
    c, _ = started(1)
    c.beat(1, c.register(1, incarnation=9))  # the newer process, unfenced
    with pytest.raises(ApiError) as caught:
        c.register(1, incarnation=0)
    assert caught.value.error_name == "DUPLICATE_BROKER_REGISTRATION"
    assert "configured on two nodes" in caught.value.message
    assert c.image.cluster.brokers[1].incarnation_id == bytes([9]) * 16


def test_a_replaced_incarnation_returns_once_the_one_that_replaced_it_is_fenced_or_silent():
    """A dead process's late registration can replace the live one (tests/replication_sim
    seed 91): it stays fenced, so the live one registers again at once. One that did get
    unfenced and then died is waited out, for its session."""
    c, epochs = started(1)
    c.register(1, incarnation=9)  # a late request of a process that has died since
    epoch = c.register(1, incarnation=0)
    assert c.image.cluster.brokers[1].epoch == epoch != epochs[1]
    c.beat(1, epoch)
    c.beat(1, c.register(1, incarnation=8))  # a second process, unfenced, then gone
    c.now += 8999
    with pytest.raises(ApiError):
        c.register(1, incarnation=0)
    c.now += 1
    epoch = c.register(1, incarnation=0)
    assert c.image.cluster.brokers[1].incarnation_id == bytes([0]) * 16


def test_a_silent_broker_is_fenced_and_its_partitions_move():
    c, epochs = started(3)
    records, _ = create_topics(c.image, [NewTopic("t", 3, 3)])
    c.commit(records)
    c.now = 5000
    for b in (1, 2):
        c.beat(b, epochs[b])
    c.now = 9500
    assert c.tracker.expired(c.image, c.now) == [3]
    c.commit(fence_broker(c.image, 3))
    for p in c.image.topics.by_name["t"].partitions.values():
        assert 3 not in p.isr and p.leader in (1, 2)


def test_a_new_active_controller_still_fences_a_broker_that_died_before_it():
    c, epochs = started(2)
    c.tracker = HeartbeatTracker(session_timeout_ms=9000)  # failover: nothing remembered
    c.now = 100_000
    c.tracker.reseed(c.image, c.now)
    assert c.tracker.expired(c.image, c.now + 8999) == []
    c.tracker.touch(1, c.now + 8000)  # broker 1 heartbeats to the new controller
    assert c.tracker.expired(c.image, c.now + 9000) == [2]


def test_the_last_isr_member_going_away_leaves_the_partition_offline_until_it_returns():
    c, epochs = started(2)
    records, _ = create_topics(c.image, [NewTopic("t", assignments={0: [1, 2]})])
    c.commit(records)
    c.commit(fence_broker(c.image, 2))
    c.commit(fence_broker(c.image, 1))
    p = c.image.topics.partition("t", 0)
    assert p.leader == NO_LEADER and p.isr == (1,)
    c.commit(unfence_broker(c.image, 2))  # not in the ISR: no clean leader
    assert c.image.topics.partition("t", 0).leader == NO_LEADER
    c.commit(unfence_broker(c.image, 1))
    assert c.image.topics.partition("t", 0).leader == 1


def test_unclean_election_when_the_topic_allows_it():
    c, epochs = started(2)
    records, _ = create_topics(
        c.image,
        [
            NewTopic(
                "t", assignments={0: [1, 2]}, configs={"unclean.leader.election.enable": "true"}
            )
        ],
    )
    c.commit(records)
    c.commit(fence_broker(c.image, 2))
    c.commit(fence_broker(c.image, 1))
    c.commit(unfence_broker(c.image, 2))
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), pb.RECOVERING)


def test_controlled_shutdown_moves_leaderships_then_lets_the_broker_stop():
    c, epochs = started(3)
    records, _ = create_topics(c.image, [NewTopic("t", 6, 2)])
    c.commit(records)
    assert any(p.leader == 1 for p in c.image.topics.by_name["t"].partitions.values())
    response = c.beat(1, epochs[1], want_shutdown=True)
    assert response.should_shut_down
    assert c.image.cluster.brokers[1].in_controlled_shutdown
    for p in c.image.topics.by_name["t"].partitions.values():
        assert p.leader != 1 and 1 not in p.isr
    # While shutting down it takes no new replicas.
    records, [result] = create_topics(c.image, [NewTopic("u", 1, 3)])
    assert result.error is not None


def test_unregistering_moves_partitions_and_removes_the_broker():
    c, epochs = started(3)
    records, _ = create_topics(c.image, [NewTopic("t", 3, 3)])
    c.commit(records)
    c.commit(unregister_broker(c.image, 2))
    assert 2 not in c.image.cluster.brokers
    assert all(p.leader != 2 for p in c.image.topics.by_name["t"].partitions.values())


# --- KIP-966: eligible leader replicas and unclean-shutdown detection -------------------------


def min_isr_two_topic(c: Controller, replicas=(3, 1, 2)) -> None:
    records, _ = create_topics(
        c.image,
        [NewTopic("t", assignments={0: list(replicas)}, configs={"min.insync.replicas": "2"})],
    )
    c.commit(records)


def test_a_broker_that_lost_its_tail_does_not_lead_over_one_that_kept_it():
    """Found by tests/chaos (seed 4, crash-unflushed): ISR {3, 1} with 2 catching up; 1 is
    fenced (a controller failover), 3 crashes and loses unflushed records that 1 holds, is
    fenced, restarts. Before KIP-966, 3 stayed the last ISR member and led again on its
    shorter log; the others truncated to it and acknowledged records were gone."""
    c, epochs = started(3)
    min_isr_two_topic(c)
    c.commit(fence_broker(c.image, 2))  # restarted earlier, not yet back in the ISR
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.elr) == (3, (3, 1), ())
    c.commit(fence_broker(c.image, 1))
    p = c.image.topics.partition("t", 0)
    # below min.insync.replicas the high watermark stands still: 1 holds every committed record
    assert (p.leader, p.isr, p.elr) == (3, (3,), (1,))
    c.commit(fence_broker(c.image, 3))
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.elr) == (NO_LEADER, (3,), (1,))
    c.now += 9000
    epoch3 = c.register(3, incarnation=1)  # no clean-shutdown marker: previous epoch -1
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.elr) == (NO_LEADER, (), (1,))
    c.beat(3, epoch3)  # caught up and unfenced: still not eligible
    assert c.image.topics.partition("t", 0).leader == NO_LEADER
    c.beat(1, epochs[1])  # 1 heartbeats again: unfenced, the ELR member leads
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.elr, p.leader_recovery_state) == (1, (1,), (), pb.RECOVERED)


def test_a_clean_restart_keeps_the_last_isr_member_eligible():
    c, epochs = started(3)
    min_isr_two_topic(c)
    for b in (2, 1, 3):
        c.commit(fence_broker(c.image, b))
    c.now += 9000
    epoch3 = c.register(3, incarnation=1, previous_epoch=epochs[3])  # its marker's epoch
    p = c.image.topics.partition("t", 0)
    assert (p.isr, p.elr) == ((3,), (1,))
    c.beat(3, epoch3)
    assert c.image.topics.partition("t", 0).leader == 3


def test_an_eligible_leader_replica_leads_when_the_last_isr_member_is_fenced():
    c, epochs = started(3)
    min_isr_two_topic(c)
    c.commit(fence_broker(c.image, 2))
    c.commit(fence_broker(c.image, 1))
    c.beat(1, epochs[1])  # back, but not yet in the ISR
    c.commit(fence_broker(c.image, 3))
    p = c.image.topics.partition("t", 0)
    # 3 keeps every committed record too (fenced, not known to have lost anything)
    assert (p.leader, p.isr, p.elr) == (1, (1,), (3,))


def test_an_unclean_shutdown_takes_a_broker_out_of_every_isr_and_elr():
    c, epochs = started(3)
    min_isr_two_topic(c, replicas=(1, 2, 3))
    c.commit(fence_broker(c.image, 3))
    c.commit(fence_broker(c.image, 2))
    p = c.image.topics.partition("t", 0)
    # 3 left while the ISR was still at min.insync.replicas: the high watermark moved on
    assert (p.isr, p.elr) == ((1,), (2,))
    c.now += 9000
    c.register(2, incarnation=1)  # unclean
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.elr) == (1, (1,), ())


def test_the_only_copy_stays_in_the_isr_after_an_unclean_shutdown():
    """With no ELR member to lead instead, taking it out would only leave the partition
    offline: its recovered log is the best copy there is (single-replica topics above all)."""
    c, epochs = started(1)
    records, _ = create_topics(c.image, [NewTopic("single", assignments={0: [1]})])
    c.commit(records)
    c.commit(fence_broker(c.image, 1))
    c.now += 9000
    epoch = c.register(1, incarnation=1)
    c.beat(1, epoch)
    p = c.image.topics.partition("single", 0)
    assert (p.leader, p.isr) == (1, (1,))


def test_the_elr_empties_once_the_isr_is_back_at_min_insync_replicas():
    c, epochs = started(3)
    min_isr_two_topic(c)
    c.commit(fence_broker(c.image, 2))
    c.commit(fence_broker(c.image, 1))
    assert c.image.topics.partition("t", 0).elr == (1,)
    c.commit(unfence_broker(c.image, 1))
    p = c.image.topics.partition("t", 0)
    record = pb.PartitionChangeRecord(partition_id=0, topic_id=c.image.topics.by_name["t"].topic_id)
    record.isr.ids.extend([3, 1])
    from metadata.alter_partition import IsrProposal, alter_partition

    records, [result] = alter_partition(
        c.image,
        3,
        epochs[3],
        [IsrProposal(record.topic_id, 0, p.leader_epoch, p.partition_epoch, (3, 1))],
    )
    assert result.error is None
    c.commit(records)
    p = c.image.topics.partition("t", 0)
    assert (p.isr, p.elr) == ((3, 1), ())


def test_the_last_eligible_replica_stays_eligible_after_an_unclean_shutdown():
    """Found by the replication simulator: every replica restarted uncleanly, one by one. The
    first left the ISR for the ELR member; that one, back uncleanly too, is the only
    eligible replica left: it stays in the ELR and leads, rather than nobody ever again."""
    c, epochs = started(3)
    min_isr_two_topic(c)
    for b in (2, 1, 3):
        c.commit(fence_broker(c.image, b))
    c.now += 9000
    new = {b: c.register(b, incarnation=1) for b in (3, 1, 2)}  # all unclean
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.elr) == (NO_LEADER, (), (1,))
    c.beat(3, new[3])
    c.beat(1, new[1])
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.elr) == (1, (1,), ())


def test_replicas_in_a_failed_log_directory_lose_leadership_and_isr_membership():
    """A heartbeat naming offline replicas (their log directory failed, KIP-858): the broker
    leaves those partitions' ISRs and leaderships, keeps the others, and stays unfenced."""
    c, epochs = started(3)
    records, _ = create_topics(
        c.image, [NewTopic("t", assignments={0: [1, 2, 3], 1: [1, 2, 3], 2: [2, 1, 3]})]
    )
    c.commit(records)
    topic_id = c.image.topics.by_name["t"].topic_id
    response = c.beat(1, epochs[1], offline_replicas=frozenset({(topic_id, 0), (topic_id, 2)}))
    assert not response.is_fenced
    moved = c.image.topics.partition("t", 0)
    assert moved.leader in (2, 3) and 1 not in moved.isr
    kept = c.image.topics.partition("t", 1)
    assert kept.leader == 1 and 1 in kept.isr
    followed = c.image.topics.partition("t", 2)
    assert followed.leader == 2 and 1 not in followed.isr
    again = c.image.offset
    c.beat(1, epochs[1], offline_replicas=frozenset({(topic_id, 0), (topic_id, 2)}))
    assert c.image.offset == again, "a repeated report changed the metadata again"
