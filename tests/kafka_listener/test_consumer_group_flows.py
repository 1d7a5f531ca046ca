"""Kafka's clients run their whole consumer-group flow against Strom's Kafka listener (issue
20): produce, subscribe with a group, consume, commit, and Strom's own tools see the group.
kcat (`-G`), confluent-kafka (an idempotent acks=all producer; two cooperative-sticky
members sharing a topic, then one leaving), kafka-python and aiokafka (asyncio). Every
client call is bounded by a timeout."""

from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_request_schema

from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.client_flows import (
    as_written,
    committed,
    confluent_member,
    confluent_produce,
    strom_describe,
)
from tests.kafka_listener.conftest import QUICK_GROUPS, started
from tests.kafka_listener.data_helpers import kafka_topic
from tests.kafka_listener.kafka_cluster import KafkaCluster
from tests.node_integration.node_cluster import wait_until

TIMEOUT = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KafkaCluster]:
    yield from started(
        KafkaCluster(str(tmp_path_factory.mktemp("group_flows")), 3, dict(QUICK_GROUPS))
    )


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
        timeout=TIMEOUT,
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


# --- confluent-kafka: two cooperative-sticky members, then one ------------------------------


def test_confluent_kafka_two_members_share_commit_and_one_takes_over(cluster):
    topic, group, partitions = "shared", f"pair-{uuid.uuid4().hex[:8]}", 4
    kafka_topic(cluster, topic, partitions=partitions)
    members = {name: confluent_member(cluster, group, name) for name in ("one", "two")}
    owned: dict[str, set[int]] = {name: set() for name in members}
    read: dict[str, list[tuple[int, int, bytes, bytes, int, Any]]] = {n: [] for n in members}

    def subscribe(name: str) -> None:
        def on_assign(consumer, assigned, name=name):
            owned[name] |= {p.partition for p in assigned}

        def on_revoke(consumer, revoked, name=name):
            owned[name] -= {p.partition for p in revoked}

        members[name].subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

    def poll(name: str) -> None:
        message = members[name].poll(0.1)
        if message is None:
            return
        assert message.error() is None, message.error()
        assert message.partition() in owned[name]  # only what the member owns
        read[name].append(
            (
                message.partition(),
                message.offset(),
                message.key(),
                message.value(),
                message.timestamp()[1],
                message.headers(),
            )
        )

    for name in members:
        subscribe(name)
    open_members = dict(members)
    try:

        def shared() -> bool:
            for name in members:
                poll(name)
            return (
                owned["one"] | owned["two"] == set(range(partitions))
                and all(owned.values())
                and not owned["one"] & owned["two"]
            )

        wait_until(shared, 60, "the two members to share the partitions")
        delivered = confluent_produce(cluster, topic, 40, partitions)

        def read_by_both(count: int) -> bool:
            for name in members:
                poll(name)
            return len(read["one"]) + len(read["two"]) >= count

        wait_until(lambda: read_by_both(40), 60, "the 40 records to be read")
        for name in members:
            poll(name)  # nothing more comes
        assert read["one"] and read["two"]
        got = sorted(read["one"] + read["two"])
        assert got == sorted(as_written(delivered)), "every record read once, as written"
        for member in members.values():
            member.commit(asynchronous=False)
        assert committed(cluster, group) == {(topic, p): 10 for p in range(partitions)}
        described = strom_describe(cluster, group)
        assert (described.state, described.protocol) == ("Stable", "cooperative-sticky")
        assert {m.client_id: {tp.partition for tp in m.assignment} for m in described.members} == {
            name: owned[name] for name in members
        }
        tool = subprocess.run(
            [
                sys.executable,
                "-m",
                "strom_tools",
                "consumer-groups",
                "--bootstrap-server",
                bootstrap(cluster),
            ]
            + ["--describe", "--group", group],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert tool.returncode == 0, tool.stderr
        rows = [line.split() for line in tool.stdout.splitlines() if line.startswith(group)]
        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
        assert sorted((r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows) == [
            (topic, p, 10, 10, 0) for p in range(partitions)
        ]
        assert {r[-1] for r in rows} == {"one", "two"}

        # Both read 5 more records per partition; one commits, two leaves without
        # committing. One then owns every partition and goes on from the commits: it
        # reads again what two read after its last commit (Kafka's at-least-once), and
        # nothing else twice; nothing is lost.
        for name in members:
            read[name].clear()
        more = confluent_produce(cluster, topic, 20, partitions)
        wait_until(lambda: read_by_both(20), 60, "the 20 new records to be read")
        assert sorted(read["one"] + read["two"]) == sorted(as_written(more))
        members["one"].commit(asynchronous=False)
        left = set(owned["two"])
        open_members.pop("two").close()  # LeaveGroup, no commit
        read["one"].clear()
        again = 5 * len(left)

        def took_over() -> bool:
            poll("one")
            return owned["one"] == set(range(partitions)) and len(read["one"]) >= again

        wait_until(took_over, 60, "member one to own every partition and read on")
        poll("one")
        assert sorted(r[:2] for r in read["one"]) == sorted(
            (p, o) for p in left for o in range(10, 15)
        ), "two's records after its last commit read again, nothing else"
        members["one"].commit(asynchronous=False)
        assert committed(cluster, group) == {(topic, p): 15 for p in range(partitions)}
        described = strom_describe(cluster, group)
        assert [m.client_id for m in described.members] == ["one"]
    finally:
        for member in open_members.values():
            member.close()


# --- kafka-python and aiokafka: subscribe with a group, consume, commit, resume -------------


def test_kafka_python_group_consumes_commits_and_a_successor_resumes(cluster):
    from kafka import KafkaConsumer

    topic, group = "kafka-python-group", f"kp-{uuid.uuid4().hex[:8]}"
    kafka_topic(cluster, topic, partitions=2)
    first = as_written(confluent_produce(cluster, topic, 10, 2))

    def consume(count: int) -> list[tuple[int, int, bytes, bytes, int, Any]]:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=cluster.kafka_bootstrap(),
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=TIMEOUT * 1000,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        try:
            read: list[tuple[int, int, bytes, bytes, int, Any]] = []
            deadline = time.monotonic() + TIMEOUT
            while len(read) < count and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    read.extend(
                        (r.partition, r.offset, r.key, r.value, r.timestamp, r.headers)
                        for r in records
                    )
            consumer.commit()  # OffsetCommit of the positions reached
            return read
        finally:
            consumer.close()

    assert sorted(consume(10)) == sorted(first)
    assert committed(cluster, group) == {(topic, 0): 5, (topic, 1): 5}
    second = as_written(confluent_produce(cluster, topic, 6, 2))
    # A new member of the group starts from the commits: only the new records.
    assert sorted(consume(6)) == sorted(second)
    assert committed(cluster, group) == {(topic, 0): 8, (topic, 1): 8}


def test_aiokafka_group_consumes_commits_and_a_successor_resumes(cluster):
    from aiokafka import AIOKafkaConsumer

    topic, group = "aiokafka-group", f"aio-{uuid.uuid4().hex[:8]}"
    kafka_topic(cluster, topic, partitions=2)
    first = as_written(confluent_produce(cluster, topic, 10, 2))

    async def consume(count: int) -> list[tuple[int, int, bytes, bytes, int, Any]]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=cluster.kafka_bootstrap(),
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        await asyncio.wait_for(consumer.start(), TIMEOUT)
        try:
            read = []
            while len(read) < count:
                r = await asyncio.wait_for(consumer.getone(), TIMEOUT)
                read.append((r.partition, r.offset, r.key, r.value, r.timestamp, list(r.headers)))
            await asyncio.wait_for(consumer.commit(), TIMEOUT)
            return read
        finally:
            await asyncio.wait_for(consumer.stop(), TIMEOUT)

    assert sorted(asyncio.run(consume(10))) == sorted(first)
    assert committed(cluster, group) == {(topic, 0): 5, (topic, 1): 5}
    second = as_written(confluent_produce(cluster, topic, 6, 2))
    assert sorted(asyncio.run(consume(6))) == sorted(second)
    assert committed(cluster, group) == {(topic, 0): 8, (topic, 1): 8}


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
