"""Kafka's clients run their whole consumer-group flow against Strom's Kafka listener (issue
20): produce, subscribe with a group, consume, commit, and Strom's own tools see the group.
kcat (`-G`), confluent-kafka (an idempotent acks=all producer; two cooperative-sticky
members sharing a topic, then one leaving), kafka-python and aiokafka (asyncio). Every
client call is bounded by a timeout."""

from __future__ import annotations

import datetime
import json
import shutil
import struct
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_request_schema

from strom.admin import AdminClient, NewTopic
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.conftest import topics_known
from tests.kafka_listener.data_helpers import kafka_topic
from tests.kafka_listener.kafka_cluster import TOPICS, KafkaCluster
from tests.node_integration.node_cluster import wait_until

TIMEOUT = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KafkaCluster]:
    """The cluster of conftest.py, with groups that rebalance without the initial delay,
    short sessions allowed and a small __consumer_offsets."""
    cluster = KafkaCluster(
        str(tmp_path_factory.mktemp("group_flows")),
        3,
        extra={
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
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


def committed(cluster: KafkaCluster, group: str) -> dict[tuple[str, int], int]:
    with AdminClient(bootstrap(cluster)) as admin:
        return admin.list_consumer_group_offsets(group)


def strom_describe(cluster: KafkaCluster, group: str) -> Any:
    with AdminClient(bootstrap(cluster)) as admin:
        (described,) = admin.describe_consumer_groups([group])
    return described


# --- kcat -----------------------------------------------------------------------------------


def test_kcat_group_reads_keys_and_headers_and_commits(cluster):
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (Debian package kcat; .ci/run installs it)")
    topic, group = "kcat-group", f"kcat-{uuid.uuid4().hex[:8]}"
    kafka_topic(cluster, topic, partitions=2)
    produced = subprocess.run(
        [kcat, "-P", "-b", cluster.kafka_bootstrap(), "-t", topic, "-K", ":"]
        + ["-H", "trace=t-1", "-H", "source=kcat", "-p", "0"],
        input="k1:first\nk2:second\nk3:third\n",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert produced.returncode == 0, produced.stderr
    # A balanced consumer: joins the group, owns both partitions, stops at their ends (-e)
    # and commits what it read as it closes (librdkafka's auto commit).
    consumed = subprocess.run(
        [kcat, "-b", cluster.kafka_bootstrap(), "-G", group, topic, "-e", "-J"]
        + ["-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert consumed.returncode == 0, consumed.stderr
    messages = [json.loads(line) for line in consumed.stdout.splitlines() if line.strip()]
    assert [(m["partition"], m["offset"], m["key"], m["payload"]) for m in messages] == [
        (0, 0, "k1", "first"),
        (0, 1, "k2", "second"),
        (0, 2, "k3", "third"),
    ]
    assert all(m["headers"] == ["trace", "t-1", "source", "kcat"] for m in messages)
    # Strom's AdminClient (gRPC) sees the offsets kcat committed through the Kafka listener.
    assert committed(cluster, group) == {(topic, 0): 3}
    assert strom_describe(cluster, group).state == "Empty"


# --- the lowest versions, that librdkafka's feature detection asks to overlap ---------------


def test_the_oldest_served_group_versions_join_sync_commit_fetch_and_leave(cluster):
    """FindCoordinator v0, JoinGroup v0 (no KIP-394: joined at once, the session timeout as
    the rebalance timeout), SyncGroup v0, Heartbeat v0, OffsetCommit v2, OffsetFetch v1 (a
    group's error on each partition: v1 has no other place) and LeaveGroup v0, by raw
    frames, as Kafka 4 serves them."""
    from kio.schema.errors import ErrorCode
    from kio.static.primitive import i32

    from server.kafka.versioned import nested
    from tests.kafka_listener.test_group_apis import (
        call,
        commit,
        consumer_subscription,
        coordinator,
        request,
    )

    # ConsumerProtocolAssignment v0: orders-1, no user data (Strom's client decodes it).
    mine = struct.pack(">hih6sii", 0, 1, 6, b"orders", 1, 1) + struct.pack(">i", -1)

    group = f"oldest-{uuid.uuid4().hex[:8]}"
    coordinator(cluster, group)  # __consumer_offsets is led
    found = call(cluster.kafka_bootstrap().split(",")[0], request(10, 0, key=group))
    assert found.error_code == ErrorCode.none
    address = f"{found.host}:{found.port}"
    protocol = nested(load_request_schema(11, 0), "JoinGroupRequestProtocol")
    joined = call(
        address,
        request(
            11,
            0,
            group_id=group,
            session_timeout=datetime.timedelta(seconds=10),
            member_id="",
            protocol_type="consumer",
            protocols=(protocol(name="range", metadata=consumer_subscription("orders")),),
        ),
    )
    assert joined.error_code == ErrorCode.none, joined
    assert joined.generation_id == 1 and joined.leader == joined.member_id
    assert [m.metadata for m in joined.members] == [consumer_subscription("orders")]
    member = joined.member_id
    assignment = nested(load_request_schema(14, 0), "SyncGroupRequestAssignment")
    synced = call(
        address,
        request(
            14,
            0,
            group_id=group,
            generation_id=i32(1),
            member_id=member,
            assignments=(assignment(member_id=member, assignment=mine),),
        ),
    )
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, mine)
    beat = call(address, request(12, 0, group_id=group, generation_id=i32(1), member_id=member))
    assert beat.error_code == ErrorCode.none
    committed_v2 = commit(address, group, {("orders", 1): 17}, 1, member, version=2)
    assert [p.error_code for t in committed_v2.topics for p in t.partitions] == [ErrorCode.none]
    assert strom_describe(cluster, group).state == "Stable"

    def fetch_v1(group_id: str) -> dict[tuple[str, int], tuple[int, Any]]:
        topic = nested(load_request_schema(9, 1), "OffsetFetchRequestTopic")
        answer = call(
            address,
            request(
                9,
                1,
                group_id=group_id,
                topics=(topic(name="orders", partition_indexes=(i32(1), i32(0))),),
            ),
        )
        return {
            (t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in answer.topics
            for p in t.partitions
        }

    assert fetch_v1(group) == {
        ("orders", 1): (17, ErrorCode.none),
        ("orders", 0): (-1, ErrorCode.none),
    }
    # The empty group id is invalid: v1 says so on each partition asked.
    assert fetch_v1("") == {
        ("orders", 1): (-1, ErrorCode.invalid_group_id),
        ("orders", 0): (-1, ErrorCode.invalid_group_id),
    }
    left = call(address, request(13, 0, group_id=group, member_id=member))
    assert left.error_code == ErrorCode.none
    assert strom_describe(cluster, group).state == "Empty"
    assert committed(cluster, group) == {("orders", 1): 17}
