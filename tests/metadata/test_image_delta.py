"""The metadata image and its deltas: replay is the only way state changes, images never
change, a delta shares what it did not touch, and an image's records (a snapshot) rebuild
it exactly, alone or followed by the rest of the log."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.delta import MetadataDelta, MetadataReplayError
from metadata.image import EMPTY_IMAGE, MetadataImage, PartitionRegistration
from metadata.records import (
    NO_LEADER,
    MetadataRecordError,
    decode,
    encode,
    new_acl_id,
    new_topic_id,
    topic_id_str,
)
from strom_api.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from strom_api.v1 import metadata_pb2 as pb


def register(broker_id: int, epoch: int, rack: str = "", fenced: bool = True):
    return pb.RegisterBrokerRecord(
        broker_id=broker_id,
        broker_epoch=epoch,
        incarnation_id=bytes(16),
        endpoints=[pb.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id)],
        rack=rack,
        fenced=fenced,
    )


def replay(image: MetadataImage, *records, offset: int | None = None) -> MetadataImage:
    delta = MetadataDelta(image).replay_all(records)
    return delta.apply(image.offset + len(records) if offset is None else offset, 1)


def ids(*values: int) -> pb.BrokerIdList:
    return pb.BrokerIdList(ids=values)


# --- brokers ---------------------------------------------------------------------------------


def test_broker_lifecycle():
    image = replay(EMPTY_IMAGE, register(1, 10, rack="a"), register(2, 11))
    one = image.cluster.brokers[1]
    assert (one.epoch, one.rack, one.fenced) == (10, "a", True)
    assert image.cluster.brokers[2].rack is None
    image = replay(image, pb.UnfenceBrokerRecord(broker_id=1, broker_epoch=10))
    assert image.cluster.unfenced() == [1]
    image = replay(
        image,
        pb.BrokerRegistrationChangeRecord(
            broker_id=1, broker_epoch=10, fencing=pb.FENCING_NONE, in_controlled_shutdown=True
        ),
    )
    assert image.cluster.brokers[1].in_controlled_shutdown and not image.cluster.brokers[1].fenced
    image = replay(
        image, pb.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fencing=pb.FENCE)
    )
    assert image.cluster.brokers[1].fenced
    # A new registration (a restart) replaces the old one, with its new epoch.
    image = replay(image, register(1, 40))
    assert image.cluster.brokers[1].epoch == 40 and image.cluster.brokers[1].fenced
    image = replay(image, pb.UnregisterBrokerRecord(broker_id=2, broker_epoch=11))
    assert list(image.cluster.brokers) == [1]


@pytest.mark.parametrize(
    "record",
    [
        pb.FenceBrokerRecord(broker_id=1, broker_epoch=9),  # stale epoch
        pb.UnfenceBrokerRecord(broker_id=7, broker_epoch=10),  # unknown broker
        pb.UnregisterBrokerRecord(broker_id=1, broker_epoch=11),
    ],
)
def test_broker_records_for_another_registration_do_not_apply(record):
    image = replay(EMPTY_IMAGE, register(1, 10))
    with pytest.raises(MetadataReplayError, match="broker"):
        replay(image, record)


# --- topics and partitions -------------------------------------------------------------------


def create(name: str, partitions: int, replicas=(1, 2, 3)):
    topic_id = new_topic_id()
    records = [pb.TopicRecord(name=name, topic_id=topic_id)]
    for p in range(partitions):
        rotated = replicas[p % len(replicas) :] + replicas[: p % len(replicas)]
        records.append(
            pb.PartitionRecord(
                partition_id=p,
                topic_id=topic_id,
                replicas=rotated,
                isr=rotated,
                leader=rotated[0],
            )
        )
    return topic_id, records


def test_partition_changes_bump_epochs_as_kafka_does():
    topic_id, records = create("orders", 2)
    image = replay(EMPTY_IMAGE, *records)
    p0 = image.topics.partition("orders", 0)
    assert p0 == PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 0, 0)
    # An ISR change: the partition epoch moves, the leader epoch does not.
    image = replay(
        image, pb.PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=ids(1, 2))
    )
    p0 = image.topics.partition("orders", 0)
    assert (p0.isr, p0.leader, p0.leader_epoch, p0.partition_epoch) == ((1, 2), 1, 0, 1)
    # A leader change moves both.
    image = replay(
        image,
        pb.PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=2, isr=ids(2)),
    )
    p0 = image.topics.partition("orders", 0)
    assert (p0.isr, p0.leader, p0.leader_epoch, p0.partition_epoch) == ((2,), 2, 1, 2)
    image = replay(
        image,
        pb.PartitionChangeRecord(
            partition_id=0,
            topic_id=topic_id,
            leader=NO_LEADER,
            leader_recovery_state=pb.RECOVERING,
        ),
    )
    p0 = image.topics.partition("orders", 0)
    assert not p0.has_leader and p0.leader_recovery_state == pb.RECOVERING
    assert image.topics.partition("orders", 1).partition_epoch == 0


def test_removing_a_topic_removes_its_configs_and_frees_its_name():
    topic_id, records = create("orders", 1)
    image = replay(
        EMPTY_IMAGE,
        *records,
        pb.ConfigRecord(
            resource_type=pb.TOPIC, resource_name="orders", name="retention.ms", value="1000"
        ),
        pb.ConfigRecord(
            resource_type=pb.BROKER, resource_name="", name="log.retention.ms", value="5"
        ),
    )
    assert image.configs.of(pb.TOPIC, "orders") == {"retention.ms": "1000"}
    new_id, again = create("orders", 3)
    image = replay(image, pb.RemoveTopicRecord(topic_id=topic_id), *again)
    assert image.configs.of(pb.TOPIC, "orders") == {}
    assert image.configs.of(pb.BROKER, "") == {"log.retention.ms": "5"}
    assert image.topics.by_name["orders"].topic_id == new_id and topic_id not in image.topics.by_id
    assert len(image.topics.by_name["orders"].partitions) == 3


@pytest.mark.parametrize(
    "bad",
    [
        lambda tid: pb.TopicRecord(name="orders", topic_id=new_topic_id()),  # name taken
        lambda tid: pb.TopicRecord(name="other", topic_id=tid),  # id taken
        lambda tid: pb.PartitionRecord(partition_id=0, topic_id=new_topic_id()),
        lambda tid: pb.PartitionChangeRecord(partition_id=5, topic_id=tid, leader=1),
        lambda tid: pb.RemoveTopicRecord(topic_id=new_topic_id()),
    ],
)
def test_topic_records_that_do_not_fit_the_image_are_refused(bad):
    topic_id, records = create("orders", 1)
    image = replay(EMPTY_IMAGE, *records)
    with pytest.raises(MetadataReplayError):
        replay(image, bad(topic_id))


def test_producer_ids_only_move_forward():
    image = replay(EMPTY_IMAGE, pb.ProducerIdsRecord(broker_id=1, next_producer_id=1000))
    assert image.producer_ids.next_producer_id == 1000
    with pytest.raises(MetadataReplayError, match="back"):
        replay(image, pb.ProducerIdsRecord(broker_id=1, next_producer_id=999))


def test_features_and_no_ops():
    image = replay(
        EMPTY_IMAGE,
        pb.FeatureLevelRecord(name="metadata.version", feature_level=3),
        pb.NoOpRecord(),
    )
    assert image.features.levels == {"metadata.version": 3}
    image = replay(image, pb.FeatureLevelRecord(name="metadata.version", feature_level=0))
    assert image.features.levels == {}


# --- images are immutable and shared ---------------------------------------------------------


def test_a_delta_copies_only_what_it_touched():
    a_id, a = create("a", 3)
    _, b = create("b", 3)
    before = replay(EMPTY_IMAGE, register(1, 1), *a, *b)
    after = replay(before, pb.PartitionChangeRecord(partition_id=1, topic_id=a_id, isr=ids(2, 3)))
    assert after.topics.by_name["b"] is before.topics.by_name["b"]
    assert after.cluster is before.cluster and after.configs is before.configs
    assert after.topics.by_name["a"].partitions[0] is before.topics.by_name["a"].partitions[0]
    assert before.topics.partition("a", 1).isr == (2, 3, 1)  # the old image is unchanged
    with pytest.raises(TypeError):
        after.topics.by_name["c"] = after.topics.by_name["a"]  # type: ignore[index]


# --- the log's bytes -------------------------------------------------------------------------


def test_records_round_trip_through_raft_entries():
    topic_id, records = create("orders", 2)
    for record in [register(3, 7), *records, pb.NoOpRecord()]:
        assert decode(encode(record)) == record
    with pytest.raises(MetadataRecordError):
        decode(b"\xff\xff\xff")
    with pytest.raises(MetadataRecordError):
        decode(b"")
    assert len(topic_id_str(topic_id)) == 22


# --- snapshots: an image's records rebuild it ------------------------------------------------


class RandomController:
    """Emits valid records at random, keeping just enough state to stay valid."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.offset = 0
        self.brokers: dict[int, int] = {}  # id -> epoch
        self.topics: dict[str, tuple[bytes, int]] = {}  # name -> (id, partitions)
        self.next_pid = 0
        self.acl_ids: list[bytes] = []

    def step(self) -> list:
        rng = self.rng
        self.offset += 1
        kind = rng.randrange(12)
        if kind == 10 or (kind == 11 and not self.acl_ids):
            self.acl_ids.append(new_acl_id())
            return [random_acl_record(rng, self.acl_ids[-1])]
        if kind == 11:
            acl_id = self.acl_ids.pop(rng.randrange(len(self.acl_ids)))
            return [pb.RemoveAccessControlEntryRecord(id=acl_id)]
        if kind == 0 or not self.brokers:
            broker = rng.randrange(1, 6)
            self.brokers[broker] = self.offset
            return [register(broker, self.offset, rack=rng.choice(["", "a", "b"]))]
        broker = rng.choice(sorted(self.brokers))
        epoch = self.brokers[broker]
        if kind == 1:
            record = rng.choice([pb.FenceBrokerRecord, pb.UnfenceBrokerRecord])
            return [record(broker_id=broker, broker_epoch=epoch)]
        if kind == 2:
            return [
                pb.BrokerRegistrationChangeRecord(
                    broker_id=broker,
                    broker_epoch=epoch,
                    fencing=rng.choice([pb.FENCING_NONE, pb.FENCE, pb.UNFENCE]),
                    in_controlled_shutdown=rng.random() < 0.3,
                )
            ]
        if kind == 3 and len(self.brokers) > 1:
            del self.brokers[broker]
            return [pb.UnregisterBrokerRecord(broker_id=broker, broker_epoch=epoch)]
        if kind == 4 or not self.topics:
            name = rng.choice(["t1", "t2", "t3", "t4"])
            out = []
            if name in self.topics:
                out.append(pb.RemoveTopicRecord(topic_id=self.topics.pop(name)[0]))
            topic_id, records = create(name, rng.randrange(1, 4), tuple(sorted(self.brokers)))
            self.topics[name] = (topic_id, len(records) - 1)
            return out + records
        name = rng.choice(sorted(self.topics))
        topic_id, partitions = self.topics[name]
        if kind in (5, 6):
            change = pb.PartitionChangeRecord(
                partition_id=rng.randrange(partitions), topic_id=topic_id
            )
            if rng.random() < 0.5:
                change.leader = rng.choice([NO_LEADER, *self.brokers])
            if rng.random() < 0.7:
                change.isr.ids.extend(rng.sample(sorted(self.brokers), rng.randrange(1, 2)))
            return [change]
        if kind == 7:
            resource = rng.choice([(pb.TOPIC, name), (pb.BROKER, ""), (pb.BROKER, str(broker))])
            record = pb.ConfigRecord(
                resource_type=resource[0], resource_name=resource[1], name=rng.choice("xyz")
            )
            if rng.random() < 0.7:
                record.value = str(rng.randrange(100))
            return [record]
        if kind == 8:
            self.next_pid += rng.randrange(1, 1000)
            return [pb.ProducerIdsRecord(broker_id=broker, next_producer_id=self.next_pid)]
        return [pb.FeatureLevelRecord(name="metadata.version", feature_level=rng.randrange(4))]


def random_acl_record(rng: random.Random, acl_id: bytes) -> pb.AccessControlEntryRecord:
    return pb.AccessControlEntryRecord(
        id=acl_id,
        resource_type=rng.choice([ResourceType.TOPIC, ResourceType.GROUP]),
        resource_name=rng.choice(["t1", "t", "*"]),
        pattern_type=rng.choice([PatternType.LITERAL, PatternType.PREFIXED]),
        principal=rng.choice(["User:alice", "User:*"]),
        host="*",
        operation=rng.choice([AclOperation.READ, AclOperation.ALL]),
        permission_type=rng.choice([AclPermissionType.ALLOW, AclPermissionType.DENY]),
    )


def content(image: MetadataImage) -> list:
    return list(image.records())


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), cuts=st.lists(st.integers(1, 199), max_size=6))
def test_snapshot_and_tail_reach_the_image_the_whole_log_reaches(seed, cuts):
    controller = RandomController(random.Random(seed))
    log = [r for _ in range(200) for r in controller.step()]
    log = [decode(encode(r)) for r in log]  # as read back from the metadata log

    whole = MetadataDelta(EMPTY_IMAGE).replay_all(log).apply(len(log), 1)

    # The same log applied in several deltas (a broker applies as it fetches).
    image = EMPTY_IMAGE
    bounds = sorted({0, *(c for c in cuts if c < len(log)), len(log)})
    for start, end in zip(bounds, bounds[1:], strict=False):
        image = MetadataDelta(image).replay_all(log[start:end]).apply(end, 1)
    assert image == whole

    # A snapshot taken at a cut, loaded into an empty image, then the rest of the log.
    middle = bounds[len(bounds) // 2]
    at_cut = MetadataDelta(EMPTY_IMAGE).replay_all(log[:middle]).apply(middle, 1)
    snapshot = [decode(encode(r)) for r in at_cut.records()]
    loaded = MetadataDelta(EMPTY_IMAGE).replay_all(snapshot).apply(middle, 1)
    assert loaded == at_cut
    restarted = MetadataDelta(loaded).replay_all(log[middle:]).apply(len(log), 1)
    assert restarted == whole
    assert content(restarted) == content(whole)


# --- ACLs -------------------------------------------------------------------------------------


def acl_entry(acl_id: bytes, name: str = "orders", principal: str = "User:alice"):
    return pb.AccessControlEntryRecord(
        id=acl_id,
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        pattern_type=PatternType.LITERAL,
        principal=principal,
        host="*",
        operation=AclOperation.READ,
        permission_type=AclPermissionType.ALLOW,
    )


def test_acls_replay_into_the_image_and_its_index():
    first, second = new_acl_id(), new_acl_id()
    image = replay(EMPTY_IMAGE, acl_entry(first), acl_entry(second, principal="User:bob"))
    assert {a.principal for a in image.acls.by_id.values()} == {"User:alice", "User:bob"}
    assert len(list(image.acls.index.matching(ResourceType.TOPIC, "orders"))) == 2

    # A delta that does not touch the ACLs shares them, index included.
    later = replay(image, register(1, 3))
    assert later.acls is image.acls

    removed = replay(image, pb.RemoveAccessControlEntryRecord(id=first))
    assert list(removed.acls.by_id) == [second]
    assert [a.principal for a in removed.acls.index] == ["User:bob"]
    assert len(image.acls.by_id) == 2  # the older image is untouched


def test_acl_records_that_do_not_fit_are_refused():
    with pytest.raises(MetadataReplayError, match="unknown ACL id"):
        replay(EMPTY_IMAGE, pb.RemoveAccessControlEntryRecord(id=new_acl_id()))
    acl_id = new_acl_id()
    with pytest.raises(MetadataReplayError, match="unknown ACL id"):
        replay(
            EMPTY_IMAGE,
            acl_entry(acl_id),
            pb.RemoveAccessControlEntryRecord(id=acl_id),
            pb.RemoveAccessControlEntryRecord(id=acl_id),
        )
    bad = acl_entry(new_acl_id())
    bad.operation = 99
    with pytest.raises(MetadataReplayError, match="unknown code"):
        replay(EMPTY_IMAGE, bad)


def test_acls_survive_a_snapshot_with_their_ids():
    kept, dropped = new_acl_id(), new_acl_id()
    image = replay(
        EMPTY_IMAGE,
        acl_entry(kept),
        acl_entry(dropped, name="payments"),
        pb.RemoveAccessControlEntryRecord(id=dropped),
    )
    snapshot = [decode(encode(r)) for r in image.records()]
    assert [type(r) for r in snapshot] == [pb.AccessControlEntryRecord]
    loaded = replay(EMPTY_IMAGE, *snapshot, offset=image.offset)
    assert loaded == image
    # The id came through: the ACL can still be removed after the restart.
    assert replay(loaded, pb.RemoveAccessControlEntryRecord(id=kept)).acls.by_id == {}
