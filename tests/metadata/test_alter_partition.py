"""AlterPartition: a leader's ISR proposal is accepted only against the current
registration, from the current leader, with eligible members; producer id blocks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from metadata.alter_partition import IsrProposal, allocate_producer_ids, alter_partition
from metadata.broker_lifecycle import fence_broker
from metadata.delta import MetadataDelta
from metadata.errors import ApiError
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.topic_control import NewTopic, create_topics
from strom_api.v1 import metadata_pb2 as pb


def commit(image: MetadataImage, records) -> MetadataImage:
    return MetadataDelta(image).replay_all(records).apply(image.offset + len(records), 1)


def setup() -> tuple[MetadataImage, bytes]:
    records = []
    for b in (1, 2, 3):
        records += [
            pb.RegisterBrokerRecord(broker_id=b, broker_epoch=b * 10, fenced=True),
            pb.UnfenceBrokerRecord(broker_id=b, broker_epoch=b * 10),
        ]
    image = commit(EMPTY_IMAGE, records)
    records, [result] = create_topics(image, [NewTopic("t", assignments={0: [1, 2, 3]})])
    return commit(image, records), result.topic_id


def proposal(topic_id, isr, leader_epoch=0, partition_epoch=0, **kw):
    return IsrProposal(topic_id, 0, leader_epoch, partition_epoch, tuple(isr), **kw)


def test_a_shrink_then_an_expand_from_the_leader():
    image, tid = setup()
    records, [result] = alter_partition(image, 1, 10, [proposal(tid, [1, 2])])
    assert result.error is None and result.registration.isr == (1, 2)
    image = commit(image, records)
    p = image.topics.partition("t", 0)
    assert (p.isr, p.partition_epoch, p.leader_epoch) == ((1, 2), 1, 0)
    records, [result] = alter_partition(image, 1, 10, [proposal(tid, [1, 2, 3], 0, 1)])
    assert result.error is None
    assert commit(image, records).topics.partition("t", 0).isr == (1, 2, 3)


@pytest.mark.parametrize(
    ("broker", "prop", "error"),
    [
        (2, proposal(b"", [1, 2]), "NOT_LEADER_OR_FOLLOWER"),
        (1, proposal(b"", [1, 2], leader_epoch=1), "FENCED_LEADER_EPOCH"),
        (1, proposal(b"", [1, 2], partition_epoch=3), "INVALID_UPDATE_VERSION"),
        (1, proposal(b"", [2, 3]), "INELIGIBLE_REPLICA"),  # the leader left out
        (1, proposal(b"", [1, 4]), "INELIGIBLE_REPLICA"),  # not a replica
        (1, proposal(b"", [1, 1]), "INELIGIBLE_REPLICA"),
        (1, proposal(b"", [1], leader_recovery_state=pb.RECOVERING), "INVALID_REQUEST"),
    ],
)
def test_stale_or_bad_proposals_are_refused(broker, prop, error):
    image, tid = setup()
    prop = replace(prop, topic_id=tid)
    records, [result] = alter_partition(image, broker, broker * 10, [prop])
    assert records == [] and result.error is not None and result.error.error_name == error


def test_a_fenced_follower_cannot_come_back_into_the_isr():
    image, tid = setup()
    image = commit(image, fence_broker(image, 3))
    p = image.topics.partition("t", 0)
    _, [result] = alter_partition(
        image, 1, 10, [proposal(tid, [1, 2, 3], p.leader_epoch, p.partition_epoch)]
    )
    assert result.error is not None and result.error.error_name == "INELIGIBLE_REPLICA"


def test_unknown_partitions_and_stale_senders():
    image, tid = setup()
    _, [result] = alter_partition(image, 1, 10, [IsrProposal(tid, 9, 0, 0, (1,))])
    assert result.error.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
    with pytest.raises(ApiError) as caught:
        alter_partition(image, 1, 11, [proposal(tid, [1])])
    assert caught.value.error_name == "STALE_BROKER_EPOCH"


def test_producer_id_blocks_never_overlap():
    image, _ = setup()
    record, first = allocate_producer_ids(image, 2, 20)
    image = commit(image, [record])
    record, second = allocate_producer_ids(image, 3, 30)
    assert (first, second) == (0, 1000)
    with pytest.raises(ApiError):
        allocate_producer_ids(image, 3, 31)
