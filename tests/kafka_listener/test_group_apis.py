"""The consumer-group APIs on the Kafka listener against a 3-node cluster: raw kio requests
for the membership flow and Kafka's error codes, confluent-kafka's and kafka-python's admin
clients for the listings and offsets, and Strom's own gRPC client seeing the same groups
(one coordinator behind both front ends)."""

from __future__ import annotations

import datetime
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i64

from server.kafka.versioned import build, nested
from strom.admin import AdminClient, NewTopic
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.conftest import topics_known
from tests.kafka_listener.kafka_cluster import (
    TOPICS,
    KafkaCluster,
    connect,
    decode_response,
    read_frame,
    request_frame,
)
from tests.node_integration.node_cluster import wait_until

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 8, 9, 15, 16, 42

MS = datetime.timedelta(milliseconds=1)
# Opaque to the broker: passed through to the leader and back untouched.
SUBSCRIPTION = b"\x00\x03opaque subscription \xff\x00"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KafkaCluster]:
    """The cluster of conftest.py, with groups that rebalance without the initial delay
    and a small __consumer_offsets."""
    cluster = KafkaCluster(
        str(tmp_path_factory.mktemp("group_apis")),
        3,
        extra={
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "3",
        },
    )
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        with AdminClient(bootstrap(cluster)) as admin:
            admin.create_topics(
                NewTopic(name, partitions, replication_factor=3)
                for name, partitions in TOPICS.items()
            )
        for node in cluster.ids:
            wait_until(lambda n=node: topics_known(cluster, n), 20, f"node {node} topics")
        yield cluster
    finally:
        cluster.stop_all()


def call(address: str, body: Any, correlation_id: int = 1, client_id: str = "raw") -> Any:
    """One request to the broker at `address`, its response decoded."""
    with connect(address) as sock:
        sock.settimeout(30)
        sock.sendall(request_frame(body, correlation_id, client_id))
        frame = read_frame(sock)
    assert frame is not None, "the broker closed the connection"
    got, response = decode_response(frame, body.__api_key__, body.__version__)
    assert got == correlation_id
    return response


def request(api_key: int, version: int, **fields: Any) -> Any:
    return load_request_schema(api_key, version)(**fields)


def any_broker(cluster: KafkaCluster) -> str:
    node = cluster.ids[0]
    return f"{cluster.host[node]}:{cluster.kafka_port[node]}"


def coordinator(cluster: KafkaCluster, group: str) -> str:
    """The group's coordinator's Kafka endpoint, asked until __consumer_offsets is led."""
    found: list[str] = []

    def ready() -> bool:
        response = call(
            any_broker(cluster),
            request(FIND_COORDINATOR, 6, key_type=i8(0), coordinator_keys=(group,)),
        )
        (answer,) = response.coordinators
        if answer.error_code != ErrorCode.none:
            assert answer.error_code == ErrorCode.coordinator_not_available, answer
            return False
        found.append(f"{answer.host}:{answer.port}")
        return True

    wait_until(ready, 60, f"a coordinator for {group}")
    return found[0]


def join(address: str, group: str, member_id: str = "", version: int = 7, **extra: Any) -> Any:
    body = request(
        JOIN_GROUP,
        version,
        group_id=group,
        session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=20),
        member_id=member_id,
        group_instance_id=extra.pop("group_instance_id", None),
        protocol_type="consumer",
        protocols=_protocols(version),
        **extra,
    )
    return call(address, body, client_id="raw-member")


def _protocols(version: int) -> tuple[Any, ...]:
    protocol = nested(load_request_schema(JOIN_GROUP, version), "JoinGroupRequestProtocol")
    return (protocol(name="range", metadata=SUBSCRIPTION),)


def join_new_member(address: str, group: str) -> str:
    """KIP-394's first step: the id the member must join with."""
    first = join(address, group)
    assert first.error_code == ErrorCode.member_id_required
    assert first.member_id
    return str(first.member_id)


def sync(
    address: str,
    group: str,
    member: str,
    generation: int,
    assignments: dict[str, bytes],
    protocol_name: str = "range",
):
    body_type = load_request_schema(SYNC_GROUP, 5)
    assignment = nested(body_type, "SyncGroupRequestAssignment")
    return call(
        address,
        body_type(
            group_id=group,
            generation_id=i32(generation),
            member_id=member,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name=protocol_name,
            assignments=tuple(
                assignment(member_id=m, assignment=a) for m, a in assignments.items()
            ),
        ),
    )


def heartbeat(address: str, group: str, member: str, generation: int, version: int = 4) -> Any:
    fields: dict[str, Any] = dict(group_id=group, generation_id=i32(generation), member_id=member)
    if version >= 3:
        fields["group_instance_id"] = None
    return call(address, request(HEARTBEAT, version, **fields)).error_code


def in_thread(fn, *args) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    thread.start()
    return thread, out


def test_find_coordinator_answers_the_kafka_listener_of_the_partitions_leader(cluster):
    group = f"find-{uuid.uuid4().hex[:8]}"
    address = coordinator(cluster, group)
    kafka_addresses = {f"{cluster.host[n]}:{cluster.kafka_port[n]}": n for n in cluster.ids}
    assert address in kafka_addresses  # the KAFKA listener's port, not gRPC's
    # v1-3 name one key; the same answer.
    for version in (1, 2, 3):
        single = call(
            any_broker(cluster), request(FIND_COORDINATOR, version, key=group, key_type=i8(0))
        )
        assert single.error_code == ErrorCode.none
        assert f"{single.host}:{single.port}" == address
        assert single.node_id == kafka_addresses[address]
    # v4+ batches keys, each answered on its own.
    batched = call(
        any_broker(cluster),
        request(FIND_COORDINATOR, 4, key_type=i8(0), coordinator_keys=(group, "")),
    )
    by_key = {c.key: c for c in batched.coordinators}
    assert by_key[group].error_code == ErrorCode.none
    assert by_key[""].error_code == ErrorCode.invalid_group_id
    assert by_key[""].node_id == -1


def test_find_coordinator_of_a_transaction_is_refused_as_strom_has_none(cluster):
    response = call(
        any_broker(cluster),
        request(FIND_COORDINATOR, 6, key_type=i8(1), coordinator_keys=("my-txn",)),
    )
    (answer,) = response.coordinators
    assert answer.error_code == ErrorCode.invalid_request
    assert "transaction coordinator" in answer.error_message


def test_two_members_join_sync_heartbeat_rebalance_and_leave(cluster):
    group = f"flow-{uuid.uuid4().hex[:8]}"
    address = coordinator(cluster, group)

    # A joins alone: MEMBER_ID_REQUIRED, then generation 1 with A the leader.
    a = join_new_member(address, group)
    joined = join(address, group, a)
    assert joined.error_code == ErrorCode.none
    assert (joined.generation_id, joined.leader, joined.member_id) == (1, a, a)
    assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
    assert [(m.member_id, m.metadata) for m in joined.members] == [(a, SUBSCRIPTION)]
    synced = sync(address, group, a, 1, {a: b"all of it"})
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"all of it")
    assert heartbeat(address, group, a, 1) == ErrorCode.none

    # B joins: the group rebalances; A hears it on its heartbeat and rejoins.
    b = join_new_member(address, group)
    b_thread, b_joined = in_thread(join, address, group, b)
    wait_until(
        lambda: heartbeat(address, group, a, 1) == ErrorCode.rebalance_in_progress,
        10,
        "A to hear of the rebalance",
    )
    a_joined = join(address, group, a)
    b_thread.join(30)
    assert a_joined.error_code == ErrorCode.none and b_joined[0].error_code == ErrorCode.none
    assert a_joined.generation_id == b_joined[0].generation_id == 2
    assert a_joined.leader == a
    assert {m.member_id for m in a_joined.members} == {a, b}  # the leader sees everyone
    assert b_joined[0].members == ()

    # B's SyncGroup waits for the leader's assignment.
    b_thread, b_synced = in_thread(sync, address, group, b, 2, {})
    a_synced = sync(address, group, a, 2, {a: b"first half", b: b"second half"})
    b_thread.join(30)
    assert a_synced.assignment == b"first half"
    assert b_synced[0].error_code == ErrorCode.none
    assert b_synced[0].assignment == b"second half"
    assert heartbeat(address, group, b, 2) == ErrorCode.none
    assert heartbeat(address, group, a, 2, version=1) == ErrorCode.none

    # The group as DescribeGroups (v5 and v6) shows it.
    for version in (3, 5, 6):
        body = request(
            DESCRIBE_GROUPS, version, groups=(group,), include_authorized_operations=True
        )
        (described,) = call(address, body).groups
        assert described.error_code == ErrorCode.none
        assert (described.group_state, described.protocol_type, described.protocol_data) == (
            "Stable",
            "consumer",
            "range",
        )
        members = {m.member_id: m for m in described.members}
        assert set(members) == {a, b}
        assert members[b].member_assignment == b"second half"
        assert members[b].client_id == "raw-member"
        assert members[b].member_metadata == SUBSCRIPTION
        # READ, DESCRIBE and DELETE (no authorizer: everything allowed)
        assert described.authorized_operations == (1 << 3) | (1 << 8) | (1 << 6)

    # B leaves (v5, a batch of one); A hears of the rebalance, rejoins alone.
    leave_type = load_request_schema(LEAVE_GROUP, 5)
    identity = nested(leave_type, "MemberIdentity")
    left = call(
        address,
        leave_type(
            group_id=group,
            members=(identity(member_id=b, group_instance_id=None, reason="done"),),
        ),
    )
    assert left.error_code == ErrorCode.none
    assert [(m.member_id, m.error_code) for m in left.members] == [(b, ErrorCode.none)]
    assert heartbeat(address, group, a, 2) == ErrorCode.rebalance_in_progress
    rejoined = join(address, group, a)
    assert (rejoined.generation_id, rejoined.leader) == (3, a)

    # A leaves with v1 (one member named at the top); the group is Empty.
    assert call(address, request(LEAVE_GROUP, 1, group_id=group, member_id=a)).error_code == (
        ErrorCode.none
    )
    (described,) = call(
        address, request(DESCRIBE_GROUPS, 5, groups=(group,), include_authorized_operations=False)
    ).groups
    assert described.group_state == "Empty"
    assert described.authorized_operations == -(2**31)


def test_bad_membership_requests_get_kafkas_error_codes(cluster):
    group = f"bad-{uuid.uuid4().hex[:8]}"
    address = coordinator(cluster, group)
    a = join_new_member(address, group)
    assert join(address, group, a).generation_id == 1
    assert sync(address, group, a, 1, {a: b"x"}).error_code == ErrorCode.none

    assert join(address, "", "").error_code == ErrorCode.invalid_group_id
    assert join(address, group, "made-up").error_code == ErrorCode.unknown_member_id
    assert heartbeat(address, group, "made-up", 1) == ErrorCode.unknown_member_id
    assert heartbeat(address, group, a, 7) == ErrorCode.illegal_generation
    assert sync(address, group, a, 7, {}).error_code == ErrorCode.illegal_generation
    assert sync(address, group, "made-up", 1, {}).error_code == ErrorCode.unknown_member_id
    assert sync(address, group, a, 1, {}, "roundrobin").error_code == (
        ErrorCode.inconsistent_group_protocol
    )
    too_short = request(
        JOIN_GROUP,
        5,
        group_id=group,
        session_timeout=datetime.timedelta(milliseconds=10),
        rebalance_timeout=datetime.timedelta(seconds=1),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=_protocols(5),
    )
    assert call(address, too_short).error_code == ErrorCode.invalid_session_timeout
    # Another broker is not the group's coordinator.
    other = next(
        f"{cluster.host[n]}:{cluster.kafka_port[n]}"
        for n in cluster.ids
        if f"{cluster.host[n]}:{cluster.kafka_port[n]}" != address
    )
    assert heartbeat(other, group, a, 1) == ErrorCode.not_coordinator

    # Commits: a stale generation or an unknown member is refused on every partition.
    for generation, member, expected in (
        (7, a, ErrorCode.illegal_generation),
        (1, "made-up", ErrorCode.unknown_member_id),
        (-1, "", ErrorCode.unknown_member_id),  # an admin commit while members are active
    ):
        response = commit(address, group, {("orders", 0): 5, ("orders", 1): 6}, generation, member)
        assert {p.error_code for t in response.topics for p in t.partitions} == {expected}
    response = commit(address, group, {("orders", 0): 5, ("nosuch", 0): 1}, 1, a)
    codes = {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }
    assert codes == {
        ("orders", 0): ErrorCode.none,
        ("nosuch", 0): ErrorCode.unknown_topic_or_partition,
    }


def partition_codes(response: Any) -> dict[tuple[str, int], Any]:
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def commit(
    address: str,
    group: str,
    offsets: dict[tuple[str, int], int],
    generation: int = -1,
    member: str = "",
    version: int = 9,
) -> Any:
    body_type = load_request_schema(OFFSET_COMMIT, version)
    topic_type = nested(body_type, "OffsetCommitRequestTopic")
    partition_type = nested(body_type, "OffsetCommitRequestPartition")
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            build(
                partition_type,
                partition_index=i32(partition),
                committed_offset=i64(offset),
                committed_leader_epoch=i32(-1),
                committed_metadata="raw",
            )
        )
    return call(
        address,
        build(
            body_type,
            group_id=group,
            generation_id_or_member_epoch=i32(generation),
            member_id=member,
            group_instance_id=None,
            retention_time=datetime.timedelta(milliseconds=-1),
            topics=tuple(build(topic_type, name=t, partitions=tuple(p)) for t, p in topics.items()),
        ),
    )


def test_offsets_committed_in_every_version_are_fetched_in_every_version(cluster):
    group = f"offsets-{uuid.uuid4().hex[:8]}"
    address = coordinator(cluster, group)
    for version in range(3, 10):
        response = commit(address, group, {("orders", 2): 100 + version}, version=version)
        assert [p.error_code for t in response.topics for p in t.partitions] == [ErrorCode.none]
        for fetch_version in (3, 7):
            body_type = load_request_schema(OFFSET_FETCH, fetch_version)
            topic_type = nested(body_type, "OffsetFetchRequestTopic")
            named = call(
                address,
                build(
                    body_type,
                    group_id=group,
                    topics=(topic_type(name="orders", partition_indexes=(i32(2), i32(0))),),
                    require_stable=True,
                ),
            )
            assert named.error_code == ErrorCode.none
            got = {
                (t.name, p.partition_index): p.committed_offset
                for t in named.topics
                for p in t.partitions
            }
            assert got == {("orders", 2): 100 + version, ("orders", 0): -1}
    # v8 batches groups; null topics asks for every offset of a group.
    body_type = load_request_schema(OFFSET_FETCH, 8)
    group_type = nested(body_type, "OffsetFetchRequestGroup")
    response = call(
        address,
        body_type(
            groups=(group_type(group_id=group, topics=None), group_type(group_id="", topics=None)),
            require_stable=False,
        ),
    )
    by_group = {g.group_id: g for g in response.groups}
    assert by_group[group].error_code == ErrorCode.none
    assert [
        (t.name, p.partition_index, p.committed_offset, p.metadata)
        for t in by_group[group].topics
        for p in t.partitions
    ] == [("orders", 2, 109, "raw")]
    assert by_group[""].error_code == ErrorCode.invalid_group_id


# --- real clients -------------------------------------------------------------------------

TIMEOUT = 30


def confluent_admin(cluster: KafkaCluster) -> Any:
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    return ConfluentAdmin({"bootstrap.servers": cluster.kafka_bootstrap()})


def test_confluent_kafka_admin_alters_lists_describes_and_deletes_a_groups_offsets(cluster):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    group = f"confluent-{uuid.uuid4().hex[:8]}"
    coordinator(cluster, group)  # __consumer_offsets is led
    admin = confluent_admin(cluster)
    offsets = [TopicPartition("orders", 0, 11), TopicPartition("orders", 2, 13)]
    futures = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, offsets)], request_timeout=TIMEOUT
    )
    altered = futures[group].result(TIMEOUT)
    assert all(tp.error is None for tp in altered.topic_partitions)

    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT
    )[group].result(TIMEOUT)
    assert {(tp.topic, tp.partition, tp.offset) for tp in listed.topic_partitions} == {
        ("orders", 0, 11),
        ("orders", 2, 13),
    }
    # Strom's own client (gRPC) sees the offsets committed through Kafka's protocol.
    with AdminClient(bootstrap(cluster)) as strom_admin:
        committed = strom_admin.list_consumer_group_offsets(group)
        assert committed == {("orders", 0): 11, ("orders", 2): 13}
        names = {g.group_id for g in strom_admin.list_consumer_groups()}
        assert group in names

    groups = admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
    listing = {g.group_id: g for g in groups.valid}
    assert group in listing
    assert listing[group].is_simple_consumer_group  # offsets only, never a member
    assert str(listing[group].state.name) == "EMPTY"

    described = admin.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(
        TIMEOUT
    )
    assert described.group_id == group and described.members == []
    assert described.state.name == "EMPTY"
    assert described.coordinator.port in cluster.kafka_port.values()

    admin.delete_consumer_groups([group], request_timeout=TIMEOUT)[group].result(TIMEOUT)
    with AdminClient(bootstrap(cluster)) as strom_admin:
        assert group not in {g.group_id for g in strom_admin.list_consumer_groups()}


def test_offsets_committed_by_stroms_client_are_read_by_kafka_clients(cluster):
    from confluent_kafka import ConsumerGroupTopicPartitions
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata as KpOffset
    from kafka.structs import TopicPartition as KpPartition

    group = f"strom-{uuid.uuid4().hex[:8]}"
    coordinator(cluster, group)
    with AdminClient(bootstrap(cluster)) as strom_admin:
        strom_admin.alter_consumer_group_offsets(group, {("payments", 0): 42})
    confluent = confluent_admin(cluster)  # kept: futures of a collected client never end
    listed = confluent.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT
    )[group].result(TIMEOUT)
    assert [(tp.topic, tp.partition, tp.offset) for tp in listed.topic_partitions] == [
        ("payments", 0, 42)
    ]
    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(), request_timeout_ms=TIMEOUT * 1000
    )
    try:
        offsets = admin.list_group_offsets({group: None})[group]
        assert {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()} == {
            ("payments", 0): 42
        }
        listed_groups = {g["group_id"]: g for g in admin.list_groups()}
        assert listed_groups[group]["group_state"] == "Empty"
        assert listed_groups[group]["group_type"] == "classic"
        described = admin.describe_groups([group])[group]
        assert (described["error"], described["group_state"], described["members"]) == (
            None,
            "Empty",
            [],
        )
        new_offset = {KpPartition("payments", 0): KpOffset(43, "", -1)}
        altered = admin.alter_group_offsets(group, new_offset)
        assert [e.__name__ for e in altered.values()] == ["NoError"]
        with AdminClient(bootstrap(cluster)) as strom_admin:
            assert strom_admin.list_consumer_group_offsets(group) == {("payments", 0): 43}
        assert admin.delete_groups([group]) == {group: "OK"}
        again = admin.delete_groups([group])[group]
        assert "GroupIdNotFound" in str(again), again
    finally:
        admin.close()
    with AdminClient(bootstrap(cluster)) as strom_admin:
        assert group not in {g.group_id for g in strom_admin.list_consumer_groups()}


def test_two_confluent_kafka_consumers_share_a_topic_and_commit(cluster):
    """librdkafka's group protocol, cooperative-sticky: both members join, the three
    partitions of `orders` are split between them, and each commits for its own; Strom's
    client sees the group and the offsets. (Fetching is not served on this branch: the
    consumers only join and commit.)"""
    from confluent_kafka import Consumer, TopicPartition

    group = f"consumers-{uuid.uuid4().hex[:8]}"
    coordinator(cluster, group)
    assigned: dict[str, set[int]] = {"one": set(), "two": set()}
    consumers = {}
    for name in assigned:

        def on_assign(consumer, partitions, name=name):
            assigned[name] |= {p.partition for p in partitions}

        def on_revoke(consumer, partitions, name=name):
            assigned[name] -= {p.partition for p in partitions}

        consumer = Consumer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap(),
                "group.id": group,
                "client.id": f"consumer-{name}",
                "partition.assignment.strategy": "cooperative-sticky",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 500,
            }
        )
        consumer.subscribe(["orders"], on_assign=on_assign, on_revoke=on_revoke)
        consumers[name] = consumer
    try:

        def shared() -> bool:
            for consumer in consumers.values():
                consumer.poll(0.2)
            return assigned["one"] | assigned["two"] == {0, 1, 2} and all(assigned.values())

        wait_until(shared, 60, "both consumers to own partitions")
        assert not assigned["one"] & assigned["two"]
        for name, consumer in consumers.items():
            consumer.commit(
                offsets=[TopicPartition("orders", p, 7 + p) for p in assigned[name]],
                asynchronous=False,
            )
        with AdminClient(bootstrap(cluster)) as strom_admin:
            assert strom_admin.list_consumer_group_offsets(group) == {
                ("orders", p): 7 + p for p in range(3)
            }
            (described,) = strom_admin.describe_consumer_groups([group])
        assert (described.state, described.protocol) == ("Stable", "cooperative-sticky")
        # Strom's client decodes the assignments librdkafka's leader made.
        assert {m.client_id: {tp.partition for tp in m.assignment} for m in described.members} == {
            f"consumer-{name}": partitions for name, partitions in assigned.items()
        }
    finally:
        for consumer in consumers.values():
            consumer.close()  # LeaveGroup
    with AdminClient(bootstrap(cluster)) as strom_admin:
        (described,) = strom_admin.describe_consumer_groups([group])
    assert (described.state, described.members) == ("Empty", ())


def consumer_subscription(*topics: str) -> bytes:
    """Kafka's ConsumerProtocolSubscription v0: what a Kafka consumer joins with."""
    import struct

    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def test_offset_delete_spares_the_topics_a_member_subscribes_to(cluster):
    group = f"delete-{uuid.uuid4().hex[:8]}"
    address = coordinator(cluster, group)
    response = commit(address, group, {("orders", 0): 1, ("orders", 1): 2, ("payments", 0): 3})
    assert set(partition_codes(response).values()) == {ErrorCode.none}
    # A member subscribed to `orders` joins (its subscription as Kafka's consumer sends it).
    protocol = nested(load_request_schema(JOIN_GROUP, 7), "JoinGroupRequestProtocol")
    body = request(
        JOIN_GROUP,
        7,
        group_id=group,
        session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=20),
        member_id="",
        group_instance_id="instance-1",  # static: joins at once, no MEMBER_ID_REQUIRED
        protocol_type="consumer",
        protocols=(protocol(name="range", metadata=consumer_subscription("orders")),),
    )
    joined = call(address, body)
    assert joined.error_code == ErrorCode.none and joined.generation_id == 1
    assert sync(address, group, joined.member_id, 1, {joined.member_id: b""}).error_code == (
        ErrorCode.none
    )

    body_type = load_request_schema(47, 0)
    topic_type = nested(body_type, "OffsetDeleteRequestTopic")
    partition_type = nested(body_type, "OffsetDeleteRequestPartition")

    def delete(group_id: str, partitions: dict[str, tuple[int, ...]]) -> Any:
        address = coordinator(cluster, group_id)
        topics = tuple(
            topic_type(name=t, partitions=tuple(partition_type(partition_index=i32(p)) for p in ps))
            for t, ps in partitions.items()
        )
        return call(address, body_type(group_id=group_id, topics=topics))

    response = delete(group, {"orders": (0,), "payments": (0,), "nosuch": (0,)})
    assert response.error_code == ErrorCode.none
    assert partition_codes(response) == {
        ("orders", 0): ErrorCode.group_subscribed_to_topic,
        ("payments", 0): ErrorCode.none,
        ("nosuch", 0): ErrorCode.unknown_topic_or_partition,
    }
    with AdminClient(bootstrap(cluster)) as strom_admin:
        assert strom_admin.list_consumer_group_offsets(group) == {
            ("orders", 0): 1,
            ("orders", 1): 2,
        }
    missing = delete(f"no-such-{group}", {"orders": (0,)})
    assert (missing.error_code, missing.topics) == (ErrorCode.group_id_not_found, ())


def test_kafka_python_deletes_an_empty_groups_offsets(cluster):
    """confluent-kafka's Python AdminClient (2.16) has no delete_consumer_group_offsets;
    kafka-python's delete_group_offsets sends OffsetDelete v0."""
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KpPartition

    group = f"delete-clients-{uuid.uuid4().hex[:8]}"
    coordinator(cluster, group)
    with AdminClient(bootstrap(cluster)) as strom_admin:
        strom_admin.alter_consumer_group_offsets(
            group, {("orders", 0): 1, ("orders", 1): 2, ("payments", 0): 3}
        )
    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(), request_timeout_ms=TIMEOUT * 1000
    )
    try:
        result = admin.delete_group_offsets(
            group, [KpPartition("payments", 0), KpPartition("orders", 0)]
        )
        assert {(tp.topic, tp.partition): e.__name__ for tp, e in result.items()} == {
            ("payments", 0): "NoError",
            ("orders", 0): "NoError",
        }
    finally:
        admin.close()
    # Strom's client no longer sees them.
    with AdminClient(bootstrap(cluster)) as strom_admin:
        assert strom_admin.list_consumer_group_offsets(group) == {("orders", 1): 2}


def test_a_strom_consumer_and_a_confluent_kafka_consumer_share_one_group(cluster):
    """One group, one member on each protocol: a Strom consumer over gRPC and librdkafka
    over the Kafka listener join the same coordinator, and the leader's assignment (either
    client's cooperative-sticky, reading the other's subscription) splits the partitions."""
    from confluent_kafka import Consumer as ConfluentConsumer

    from strom.consumer import Consumer as StromConsumer

    group = f"mixed-{uuid.uuid4().hex[:8]}"
    coordinator(cluster, group)
    kafka_owned: set[int] = set()
    confluent = ConfluentConsumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "group.id": group,
            "client.id": "librdkafka-member",
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
        }
    )
    confluent.subscribe(
        ["orders"],
        on_assign=lambda c, ps: kafka_owned.update(p.partition for p in ps),
        on_revoke=lambda c, ps: kafka_owned.difference_update(p.partition for p in ps),
    )
    strom = StromConsumer(
        "orders",
        bootstrap_servers=bootstrap(cluster),
        group_id=group,
        client_id="strom-member",
        partition_assignment_strategy=("cooperative-sticky",),
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
        enable_auto_commit=False,
    )
    try:

        def split() -> bool:
            confluent.poll(0.1)
            strom.poll(timeout_ms=100)
            strom_owned = {tp.partition for tp in strom.assignment()}
            return (
                bool(strom_owned)
                and bool(kafka_owned)
                and strom_owned | kafka_owned == {0, 1, 2}
                and not strom_owned & kafka_owned
            )

        wait_until(split, 60, "the two members to split the partitions")
        with AdminClient(bootstrap(cluster)) as strom_admin:
            (described,) = strom_admin.describe_consumer_groups([group])
        assert described.state == "Stable"
        assert {m.client_id for m in described.members} == {"librdkafka-member", "strom-member"}
    finally:
        strom.close(autocommit=False)
        confluent.close()
