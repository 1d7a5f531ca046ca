"""broker/metadata_gate.py driven by hand, event by event: what reaches the replicas, when, as
what, and when the listeners serve. server/node.py and tests/replication_sim pump this class;
tests/node_integration (broker restarts, readiness) run it in real nodes."""

from __future__ import annotations

import pytest

from broker.metadata_gate import GateStep, MetadataGate, full_delta
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from strom_api.v1 import metadata_pb2 as pb

ORDERS_ID = b"orders".ljust(16, b"\0")
AUDIT_ID = b"audit".ljust(16, b"\0")


def load(gate: MetadataGate, image: MetadataImage, *records) -> tuple[MetadataDelta, MetadataImage]:
    """The loader replays `records` on `image` and publishes the delta and the image after it."""
    delta = MetadataDelta(image).replay_all(records)
    after = delta.apply(image.offset + len(records), 1)
    gate.delta_loaded(delta, after)
    return delta, after


def topic(name: str = "orders", topic_id: bytes = ORDERS_ID, leader: int = 1):
    return [
        pb.TopicRecord(name=name, topic_id=topic_id),
        pb.PartitionRecord(
            partition_id=0, topic_id=topic_id, replicas=[1, 2], isr=[1, 2], leader=leader
        ),
    ]


def new_leader(leader: int, topic_id: bytes = ORDERS_ID):
    return pb.PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=leader)


def test_nothing_reaches_the_replicas_before_the_broker_caught_up() -> None:
    gate = MetadataGate()
    _, image = load(gate, EMPTY_IMAGE, *topic())
    load(gate, image, new_leader(2))
    assert gate.poll() == GateStep()
    assert not gate.serving and not gate.idle


def test_deltas_queued_before_the_catch_up_apply_as_one_delta_of_the_newest_image() -> None:
    gate = MetadataGate()
    first, image = load(gate, EMPTY_IMAGE, *topic())
    second, image = load(gate, image, new_leader(2))
    third, newest = load(gate, image, *topic("audit", AUDIT_ID))
    gate.broker_caught_up()
    step = gate.poll()
    assert not step.start_serving  # not before the queued image is applied
    batch = step.batch
    assert batch is not None
    assert batch.detach == (first, second, third)  # every deletion they carry goes first
    assert batch.image is newest
    # The roles of the newest image, for every partition in it, whichever delta touched it.
    assert set(batch.delta.topics.changed) == {ORDERS_ID, AUDIT_ID}
    assert batch.delta.topics.changed[ORDERS_ID].partitions[0].leader == 2
    assert gate.poll() == GateStep()  # one batch at a time
    gate.batch_applied()
    assert gate.poll() == GateStep(start_serving=True)
    assert gate.serving and gate.idle
    assert gate.poll() == GateStep()  # said once


def test_queued_deltas_name_only_what_they_changed_with_the_newest_registrations() -> None:
    gate = MetadataGate()
    gate.broker_caught_up()
    gate.poll()
    _, image = load(gate, EMPTY_IMAGE, *topic(), *topic("audit", AUDIT_ID))
    assert gate.poll().batch is not None
    # While that applies: orders-0 changes leader twice, a topic comes and goes, a config.
    load_more = [
        [new_leader(2)],
        [*topic("brief", b"brief".ljust(16, b"\0"))],
        [pb.RemoveTopicRecord(topic_id=b"brief".ljust(16, b"\0"))],
        [
            new_leader(3),
            pb.ConfigRecord(
                resource_type=pb.TOPIC, resource_name="orders", name="retention.ms", value="1"
            ),
        ],
    ]
    for records in load_more:
        _, image = load(gate, image, *records)
    gate.batch_applied()
    batch = gate.poll().batch
    assert batch is not None and batch.image is image and len(batch.detach) == 4
    # audit-0, untouched, is not in it: applying the batch costs what changed.
    assert set(batch.delta.topics.changed) == {ORDERS_ID}
    assert batch.delta.topics.changed[ORDERS_ID].partitions == {
        0: image.topics.partition("orders", 0)
    }
    assert batch.delta.topics.changed[ORDERS_ID].partitions[0].leader == 3
    # Every config resource any of them changed (a deleted topic's configs go with it).
    assert set(batch.delta.configs.changed) == {(pb.TOPIC, "orders"), (pb.TOPIC, "brief")}


def test_one_queued_delta_is_applied_as_it_is() -> None:
    gate = MetadataGate()
    delta, image = load(gate, EMPTY_IMAGE, *topic())
    gate.broker_caught_up()
    batch = gate.poll().batch
    assert batch is not None and batch.delta is delta and batch.detach == (delta,)


def test_nothing_queued_at_the_catch_up_serves_at_once() -> None:
    gate = MetadataGate()
    gate.broker_caught_up()
    assert gate.poll() == GateStep(start_serving=True)
    # From then on each delta as it is loaded.
    delta, image = load(gate, EMPTY_IMAGE, *topic())
    batch = gate.poll().batch
    assert batch is not None and batch.delta is delta and batch.image is image
    gate.batch_applied()
    assert gate.poll() == GateStep()


def test_deltas_loaded_during_an_apply_are_coalesced_into_the_next_batch() -> None:
    gate = MetadataGate()
    gate.broker_caught_up()
    gate.poll()
    _, image = load(gate, EMPTY_IMAGE, *topic())
    assert gate.poll().batch is not None
    # Deleted and created again while the first batch is applied: the deletion must reach
    # the replicas though the newest image has the name again.
    removal, image = load(gate, image, pb.RemoveTopicRecord(topic_id=ORDERS_ID))
    again = b"orders-again".ljust(16, b"\0")
    _, newest = load(gate, image, *topic(topic_id=again))
    assert gate.poll().batch is None
    gate.batch_applied()
    assert not gate.idle  # what the node's stop() waits for: these two applied as well
    batch = gate.poll().batch
    assert batch is not None and batch.image is newest
    assert not gate.idle  # being applied
    gate.batch_applied()
    assert gate.idle and gate.poll() == GateStep()
    assert ORDERS_ID in batch.detach[0].topics.deleted
    assert again in batch.delta.topics.changed


def test_a_failed_batch_still_opens_the_listeners() -> None:
    """The node logs the failure and serves what it could apply (a log that could not be
    created is not served, the rest is), as it did before the gate was a class."""
    gate = MetadataGate()
    load(gate, EMPTY_IMAGE, *topic())
    gate.broker_caught_up()
    assert gate.poll().batch is not None
    gate.batch_applied()  # the pump calls it whether the apply succeeded or raised
    assert gate.poll().start_serving


def test_caught_up_again_changes_nothing() -> None:
    gate = MetadataGate()
    load(gate, EMPTY_IMAGE, *topic())
    gate.broker_caught_up()
    gate.poll()
    gate.broker_caught_up()
    assert gate.poll() == GateStep()


def test_batch_applied_without_a_batch_is_a_bug_of_the_pump() -> None:
    with pytest.raises(AssertionError, match="without a batch"):
        MetadataGate().batch_applied()


def test_full_delta_changes_every_partition_of_the_image() -> None:
    _, image = load(MetadataGate(), EMPTY_IMAGE, *topic(), *topic("audit", AUDIT_ID))
    delta = full_delta(image)
    assert set(delta.topics.changed) == {ORDERS_ID, AUDIT_ID}
    assert delta.apply(image.offset, 1).topics.partition("orders", 0) == image.topics.partition(
        "orders", 0
    )
