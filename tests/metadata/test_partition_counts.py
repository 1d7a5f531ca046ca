"""metadata/partition_counts.py: the controller's partition gauges, moved by each delta,
always equal to a count over every partition of the newest image, whatever the deltas did
(create, leader changes, elections off the preferred replica, deletions, a snapshot)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage, PartitionRegistration
from metadata.partition_counts import PartitionCounts
from strom_api.v1 import metadata_pb2 as pb
from tests.metadata.image_builder import build, topic_id


def counted_by_hand(image: MetadataImage) -> tuple[int, int, int]:
    regs = [r for t in image.topics.by_id.values() for r in t.partitions.values()]
    return (
        len(regs),
        sum(not r.has_leader for r in regs),
        sum(r.has_leader and r.leader != r.replicas[0] for r in regs),
    )


def as_tuple(counts: PartitionCounts) -> tuple[int, int, int]:
    return counts.partitions, counts.offline, counts.imbalanced


def publish(counts: PartitionCounts, image: MetadataImage, *records) -> MetadataImage:
    delta = MetadataDelta(image).replay_all(records)
    new = delta.apply(image.offset + len(records), 1)
    counts.publish(delta, new)
    return new


def create(name: str, partitions: int) -> list:
    records: list = [pb.TopicRecord(name=name, topic_id=topic_id(name))]
    for index in range(partitions):
        registration = PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 0, 0)
        records.append(registration.record(topic_id(name), index))
    return records


def test_the_counts_follow_each_delta_and_a_snapshot():
    image = build({})
    counts = PartitionCounts.of(image)
    image = publish(counts, image, *create("orders", 4), *create("audit", 2))
    assert as_tuple(counts) == counted_by_hand(image) == (6, 0, 0)
    orders = topic_id("orders")
    image = publish(
        counts,
        image,
        pb.PartitionChangeRecord(partition_id=0, topic_id=orders, leader=2),
        pb.PartitionChangeRecord(partition_id=1, topic_id=orders, leader=-1, isr=pb.BrokerIdList()),
    )
    assert as_tuple(counts) == counted_by_hand(image) == (6, 1, 1)
    image = publish(counts, image, pb.RemoveTopicRecord(topic_id=orders))
    assert as_tuple(counts) == counted_by_hand(image) == (2, 0, 0)
    # A snapshot replaces the image: its delta starts from nothing, the counts from scratch.
    snapshot = MetadataDelta(EMPTY_IMAGE).replay_all(build({}).records())
    snapshot.replay_all(create("fresh", 3))
    fresh = snapshot.apply(100, 2)
    counts.publish(snapshot, fresh)
    assert as_tuple(counts) == counted_by_hand(fresh) == (3, 0, 0)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_any_sequence_of_deltas_keeps_the_counts_exact(seed):
    rng = random.Random(seed)
    image = build({})
    counts = PartitionCounts.of(image)
    alive: dict[str, int] = {}
    for step in range(30):
        records: list = []
        for _ in range(rng.randrange(1, 4)):
            action = rng.random()
            if action < 0.3 or not alive:
                name = f"t{step}-{len(records)}"
                n = rng.randrange(1, 5)
                records += create(name, n)
                alive[name] = n
            elif action < 0.85:
                name = rng.choice(sorted(alive))
                leader = rng.choice([1, 2, 3, -1])
                isr = (1, 2, 3) if leader >= 0 else ()
                records.append(
                    pb.PartitionChangeRecord(
                        partition_id=rng.randrange(alive[name]),
                        topic_id=topic_id(name),
                        leader=leader,
                        isr=pb.BrokerIdList(ids=isr),
                    )
                )
            else:
                name = rng.choice(sorted(alive))
                records.append(pb.RemoveTopicRecord(topic_id=topic_id(name)))
                del alive[name]
        image = publish(counts, image, *records)
        assert as_tuple(counts) == counted_by_hand(image)
