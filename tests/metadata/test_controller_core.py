"""The controller's pipelining rules (metadata/controller_core.py), value in, value out: an
operation computes against the committed image plus the pending writes, completes when the
committed image passes its last record, and leadership loss reverts everything pending."""

from __future__ import annotations

import pytest

from metadata.controller_core import ControllerCore, ControllerCoreError
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.topic_control import NewTopic, create_topics
from strom_api.v1 import metadata_pb2 as pb

EPOCH = 3


def committed_log(records, epoch: int = EPOCH) -> list[MetadataImage]:
    """images[n]: the committed image at offset n, the epoch's LeaderChange at offset 0 and
    `records` from offset 1 (images[0] is the empty image)."""
    image = MetadataDelta(EMPTY_IMAGE).apply(1, epoch)
    images = [EMPTY_IMAGE, image]
    for record in records:
        image = MetadataDelta(image).replay_all([record]).apply(image.offset + 1, epoch)
        images.append(image)
    return images


def active_core() -> tuple[ControllerCore, MetadataImage]:
    core = ControllerCore()
    start = MetadataDelta(EMPTY_IMAGE).apply(1, EPOCH)
    assert not core.update(True, EPOCH, MetadataDelta(EMPTY_IMAGE).apply(1, EPOCH - 1)).activated
    update = core.update(True, EPOCH, start)
    assert update.activated and core.active and core.next_offset == 1
    return core, start


def create(image: MetadataImage, name: str):
    records, [result] = create_topics(
        image, [NewTopic(name, 1, 1)], topic_id_factory=lambda: name.encode().ljust(16, b"-")
    )
    return records, result


def register(broker_id: int, epoch: int) -> pb.RegisterBrokerRecord:
    return pb.RegisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch, fenced=False)


def test_a_second_operation_sees_the_first_before_it_commits() -> None:
    core, start = active_core()
    core.update(True, EPOCH, start)
    first = core.write([register(1, 1)], "registered")
    assert (first.first, first.last) == (1, 1)
    records, result = create(core.image, "t")
    assert result.error is None  # broker 1, pending, can host it
    second = core.write(records, result)
    assert (second.first, second.last) == (2, 2 + len(records) - 1)
    again, result = create(core.image, "t")
    assert result.error is not None and result.error.error_name == "TOPIC_ALREADY_EXISTS"
    assert again == [] and core.committed is start
    assert core.pending == 2


def test_a_write_completes_when_the_committed_image_passes_its_last_record() -> None:
    core, start = active_core()
    a = core.write([register(1, 1), register(2, 2)], "a")
    b = core.write([register(3, 3)], "b")
    empty = core.write([], "after b")  # computed from b: waits for it
    assert empty.last == b.last and not core.is_complete(empty)
    log = committed_log([*a.records, *b.records])
    assert core.update(True, EPOCH, log[2]).completed == []  # a's last (2) not committed yet
    done = core.update(True, EPOCH, log[3]).completed
    assert [w.response for w in done] == ["a"]
    done = core.update(True, EPOCH, log[4]).completed
    assert [w.response for w in done] == ["b", "after b"]
    assert core.pending == 0 and core.image is log[4]
    # Nothing pending: a write of nothing is complete at once.
    assert core.is_complete(core.write([], "now"))


def test_losing_leadership_fails_every_pending_write_and_reverts_the_image() -> None:
    core, start = active_core()
    a = core.write([register(1, 1)], "a")
    core.write([register(2, 2)], "b")
    log = committed_log([*a.records])
    update = core.update(True, EPOCH, log[2])  # a committed
    assert [w.response for w in update.completed] == ["a"]
    update = core.update(False, EPOCH + 1, log[2])
    assert [w.response for w in update.failed] == ["b"]
    assert not core.active and core.pending == 0
    assert core.image is log[2]  # b's broker is gone from what the next operation sees
    assert 2 not in core.image.cluster.brokers
    with pytest.raises(ControllerCoreError):
        core.write([register(3, 3)], "refused")


def test_a_new_epoch_fails_pending_writes_even_when_the_offsets_commit() -> None:
    """Another leader may fill our pending offsets with its own records: a committed image
    past them says nothing about ours once the epoch moved on."""
    core, start = active_core()
    core.write([register(1, 1)], "ours")
    theirs = committed_log([register(9, 9)], EPOCH + 1)
    update = core.update(True, EPOCH + 2, theirs[2])
    assert [w.response for w in update.failed] == ["ours"] and update.completed == []
    # Active again in the new epoch once its image holds that epoch's LeaderChange.
    assert not update.activated
    ours = MetadataDelta(theirs[2]).apply(3, EPOCH + 2)
    assert core.update(True, EPOCH + 2, ours).activated and core.next_offset == 3


def test_no_second_activation_in_a_renounced_epoch() -> None:
    core, start = active_core()
    core.write([register(1, 1)], "a")
    assert len(core.renounce()) == 1  # a failed append
    assert not core.update(True, EPOCH, start).activated
    assert not core.active


def test_a_write_landing_elsewhere_is_a_bug() -> None:
    core, _ = active_core()
    w = core.write([register(1, 1), register(2, 2)], "a")
    core.appended(w, 2)
    with pytest.raises(ControllerCoreError, match="expected at 1..2"):
        core.appended(w, 3)
