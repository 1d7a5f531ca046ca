"""Consumer groups end to end on a real 3-node cluster: members share partitions, a killed
member's partitions move within the session timeout, committed offsets survive a
coordinator failover, manual commits give at-least-once across a crash, two groups each see
everything, cooperative-sticky keeps unaffected partitions consumed, static members come
back to their assignment without a rebalance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from strom.consumer import Consumer, TopicPartition
from strom.errors import StromError
from strom.producer import Producer
from tests.client.cluster_helpers import (
    FAST,
    GROUP_SETTINGS,
    bootstrap,
    create_topic,
    grow_topic,
)
from tests.node_integration.node_cluster import ROOT, NodeCluster
from tests.raft_integration.process_cluster import wait_until


def produce(cluster, topic, count, prefix="v"):
    with Producer(bootstrap(cluster)) as producer:
        for i in range(count):
            producer.send(topic, f"{prefix}{i}".encode(), key=b"%d" % i)


class Member:
    """A group member in a thread, collecting what it reads."""

    def __init__(self, cluster, group, topic, **config):
        self.consumer = Consumer(
            bootstrap_servers=bootstrap(cluster), group_id=group, **{**FAST, **config}
        )
        self.consumer.subscribe([topic])
        self.records = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            for records in self.consumer.poll(timeout_ms=100).values():
                self.records += records

    def assignment(self):
        return self.consumer.assignment()

    def close(self):
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def spawn_member(cluster, group, topic, *flags):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.client.group_member",
            bootstrap(cluster),
            group,
            topic,
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
        text=True,
    )


def events(proc):
    proc.wait(timeout=30)
    return [json.loads(line) for line in proc.stdout.read().splitlines() if line.strip()]


def test_three_members_share_six_partitions_and_a_killed_ones_move(cluster):
    create_topic(cluster, "shared", partitions=6)
    produce(cluster, "shared", 300)
    members = [Member(cluster, "sharing", "shared") for _ in range(2)]
    victim = spawn_member(cluster, "sharing", "shared")
    try:
        wait_until(
            lambda: [len(m.assignment()) for m in members] == [2, 2], 30, "two partitions each"
        )
        wait_until(lambda: all(m.records for m in members), 30, "records for both")
        victim.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        wait_until(lambda: sorted(len(m.assignment()) for m in members) == [3, 3], 30, "three each")
        # The killed member's 3 s session, not its 300 s max.poll.interval.ms, moved its
        # partitions: 15 s for the rebalance is far from the second and from a loaded
        # machine's speed alike.
        assert time.monotonic() - killed_at < 3 + 15
        everything = {tp for m in members for tp in m.assignment()}
        assert everything == {TopicPartition("shared", p) for p in range(6)}
        wait_until(
            lambda: (
                {r.value for m in members for r in m.records} >= {b"v%d" % i for i in range(300)}
            ),
            30,
            "every record read by the survivors",
        )
    finally:
        victim.kill()
        for m in members:
            m.close()


def test_committed_offsets_survive_a_coordinator_failover(tmp_path):
    cluster = NodeCluster(str(tmp_path), 3, extra=GROUP_SETTINGS)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        create_topic(cluster, "kept", partitions=2)
        produce(cluster, "kept", 40)
        tp0, tp1 = TopicPartition("kept", 0), TopicPartition("kept", 1)
        with Consumer(bootstrap_servers=bootstrap(cluster), group_id="durable", **FAST) as consumer:
            consumer.assign([tp0, tp1])
            consumer.commit({tp0: 7, tp1: 11})
            assert consumer.committed(tp0) == 7
            coordinator = consumer._group.coordinator
        cluster.stop(coordinator, signal.SIGKILL)
        with Consumer(bootstrap_servers=bootstrap(cluster), group_id="durable", **FAST) as again:
            found = wait_until(
                lambda: _try(lambda: (again.committed(tp0), again.committed(tp1))),
                40,
                "the new coordinator to answer",
            )
            assert found == (7, 11)
            assert again._group.coordinator != coordinator
    finally:
        cluster.stop_all()


def _try(fn):
    try:
        return fn()
    except StromError:
        return None


def test_manual_commits_lose_nothing_across_a_consumer_crash(cluster):
    create_topic(cluster, "ledger", partitions=3)
    produce(cluster, "ledger", 600, prefix="l")
    first = spawn_member(cluster, "bookkeeping", "ledger", "--manual-commit")
    lines = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = first.stdout.readline()
        lines.append(line)
        if sum('"committed"' in x for x in lines) >= 3:
            break
    first.send_signal(signal.SIGKILL)
    done_before = {json.loads(x)["record"][2] for x in lines if '"record"' in x}
    second = Member(cluster, "bookkeeping", "ledger", enable_auto_commit=False)
    try:
        wait_until(
            lambda: (
                done_before | {r.value.decode() for r in second.records}
                >= {f"l{i}" for i in range(600)}
            ),
            40,
            "every record processed by one or the other",
        )
        # It resumed from the commits, not from the beginning (at-least-once, not all-twice).
        assert len(second.records) < 600 or not done_before
    finally:
        second.close()
        first.kill()


def test_two_groups_each_see_every_record(cluster):
    create_topic(cluster, "broadcast", partitions=3)
    produce(cluster, "broadcast", 150, prefix="b")
    a, b = Member(cluster, "group-a", "broadcast"), Member(cluster, "group-b", "broadcast")
    try:
        want = {f"b{i}".encode() for i in range(150)}
        wait_until(lambda: {r.value for r in a.records} == want, 30, "group a")
        wait_until(lambda: {r.value for r in b.records} == want, 30, "group b")
    finally:
        a.close()
        b.close()


def test_cooperative_sticky_keeps_unmoved_partitions_consumed(cluster):
    create_topic(cluster, "gentle", partitions=4)
    first = Member(cluster, "coop", "gentle", partition_assignment_strategy=["cooperative-sticky"])
    try:
        wait_until(lambda: len(first.assignment()) == 4, 30, "all four to the first member")
        revoked = []

        class Watch:
            def on_partitions_revoked(self, partitions):
                revoked.extend(partitions)

            def on_partitions_assigned(self, partitions):
                pass

        first.consumer._listener = Watch()
        second = Member(
            cluster, "coop", "gentle", partition_assignment_strategy=["cooperative-sticky"]
        )
        try:
            wait_until(
                lambda: (len(first.assignment()), len(second.assignment())) == (2, 2),
                30,
                "two each",
            )
            # Only the two partitions that moved were revoked from the first member.
            assert len(revoked) == 2 and set(revoked) <= {
                TopicPartition("gentle", p) for p in range(4)
            }
            assert not set(revoked) & first.assignment()
        finally:
            second.close()
    finally:
        first.close()


def test_a_static_member_returns_to_its_assignment_without_a_rebalance(cluster):
    create_topic(cluster, "steady", partitions=4)
    other = Member(cluster, "statics", "steady", group_instance_id="other")
    proc = spawn_member(cluster, "statics", "steady", "--instance", "fixed")
    try:
        wait_until(lambda: len(other.assignment()) == 2, 30, "an even split")
        before = other.consumer._group.generation
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        back = spawn_member(cluster, "statics", "steady", "--instance", "fixed")
        try:
            time.sleep(2)
            assert other.consumer._group.generation == before  # nobody rebalanced
            assert len(other.assignment()) == 2
        finally:
            back.kill()
        # The returning instance got the two partitions the other member does not hold.
        assigned = [e["assigned"] for e in events(back) if "assigned" in e]
        theirs = {TopicPartition(t, p) for t, p in assigned[-1]}
        assert len(theirs) == 2 and not theirs & other.assignment()
    finally:
        proc.kill()
        other.close()


def test_commit_without_a_group_and_bad_settings_are_clear_errors(cluster):
    with Consumer(bootstrap_servers=bootstrap(cluster)) as consumer:
        with pytest.raises(StromError, match="group_id"):
            consumer.commit()
    with pytest.raises(StromError, match="partition assignment strategy"):
        Consumer(
            bootstrap_servers=bootstrap(cluster),
            group_id="g",
            partition_assignment_strategy=["fair"],
        )
    with pytest.raises(StromError, match="heartbeat_interval_ms"):
        Consumer(bootstrap_servers=bootstrap(cluster), group_id="g", heartbeat_interval_ms=50_000)


def test_a_commit_the_coordinator_refused_is_an_error_not_a_success(cluster):
    """Per-partition commit errors were dropped: a commit of a partition the coordinator
    did not know (a topic just created, not yet in its metadata) returned as if done, and
    committed() then said None. Retriable ones are retried until request_timeout_ms, as
    Kafka's commitSync does; others are raised at once."""
    create_topic(cluster, "committing", partitions=1)
    tp = TopicPartition("committing", 0)
    with Consumer(
        bootstrap_servers=bootstrap(cluster), group_id="strict-commits", request_timeout_ms=1500
    ) as consumer:
        consumer.commit({tp: 3})  # retried until the coordinator knows the new topic
        assert consumer.committed(tp) == 3
        started = time.monotonic()
        with pytest.raises(StromError, match="UNKNOWN_TOPIC_OR_PARTITION") as unknown:
            consumer.commit({TopicPartition("no-such-topic", 0): 1})
        assert "Offset commit failed on partition no-such-topic-0" in str(unknown.value)
        assert time.monotonic() - started >= 1.0  # retried, as it is retriable
        with pytest.raises(StromError, match="OFFSET_METADATA_TOO_LARGE"):
            consumer.commit({tp: (4, "m" * 5000)})  # (offset, metadata), as OffsetAndMetadata
        assert consumer.committed(tp) == 3


def test_a_pattern_subscribed_group_rebalances_onto_a_new_matching_topic(cluster):
    create_topic(cluster, "logs-a", partitions=2)
    with Consumer(
        bootstrap_servers=bootstrap(cluster),
        group_id="pattern-group",
        metadata_max_age_ms=300,
        **FAST,
    ) as consumer:
        consumer.subscribe(pattern="logs-.*")
        wait_until(
            lambda: (
                consumer.poll(timeout_ms=100) is not None
                and consumer.assignment() == {TopicPartition("logs-a", p) for p in range(2)}
            ),
            20,
            "first assignment",
        )
        create_topic(cluster, "logs-b", partitions=1)
        produce(cluster, "logs-b", 10, prefix="lb")
        got: list[bytes] = []

        def read_new() -> bool:
            got.extend(r.value for rs in consumer.poll(timeout_ms=100).values() for r in rs)
            return len(got) >= 10

        wait_until(read_new, 30, "records of the new topic")
        assert TopicPartition("logs-b", 0) in consumer.assignment()
        assert sorted(got) == sorted(f"lb{i}".encode() for i in range(10))


def produce_to(cluster, topic, partition, count, prefix):
    with Producer(bootstrap(cluster)) as producer:
        futures = [
            producer.send(topic, f"{prefix}{i}".encode(), partition=partition) for i in range(count)
        ]
        producer.flush()
        return [(f.get(timeout=10).partition, f.get(timeout=10).offset) for f in futures]


def test_a_group_rebalances_onto_partitions_added_to_its_topic(cluster):
    create_topic(cluster, "expanding", partitions=1)
    sent = produce_to(cluster, "expanding", 0, 5, "old")
    members = [Member(cluster, "expanders", "expanding", metadata_max_age_ms=500) for _ in range(2)]
    try:
        wait_until(lambda: sum(len(m.records) for m in members) == 5, 30, "the first records")
        grow_topic(cluster, "expanding", 3)
        for partition in (0, 1, 2):  # before the group can have rebalanced
            sent += produce_to(cluster, "expanding", partition, 4, f"new{partition}-")
        wait_until(
            lambda: {(r.partition, r.offset) for m in members for r in m.records} == set(sent),
            30,
            "every record, the new partitions' included",
        )
        owned = [m.assignment() for m in members]
        assert owned[0] | owned[1] == {TopicPartition("expanding", p) for p in range(3)}
        assert not owned[0] & owned[1]
    finally:
        for m in members:
            m.close()


def test_a_group_on_latest_reads_what_is_written_after_it_rebalanced(cluster):
    create_topic(cluster, "expanding-later", partitions=1)
    everything = {TopicPartition("expanding-later", p) for p in range(3)}
    with Consumer(
        "expanding-later",
        bootstrap_servers=bootstrap(cluster),
        group_id="later-expanders",
        **{**FAST, "auto_offset_reset": "latest"},
        metadata_max_age_ms=500,
    ) as consumer:
        wait_until(
            lambda: consumer.poll(timeout_ms=100) == {} and consumer.assignment(),
            20,
            "the first assignment",
        )
        grow_topic(cluster, "expanding-later", 3)
        wait_until(
            lambda: consumer.poll(timeout_ms=100) == {} and consumer.assignment() == everything,
            20,
            "the rebalance onto three partitions",
        )
        sent = [pair for p in range(3) for pair in produce_to(cluster, "expanding-later", p, 5, "")]
        got: set[tuple[int, int]] = set()

        def read() -> bool:
            got.update((r.partition, r.offset) for rs in consumer.poll(100).values() for r in rs)
            return got == set(sent)

        wait_until(read, 20, "every record written after the rebalance")


def test_a_poll_returns_within_its_timeout_while_a_rebalance_waits_for_another_member(cluster):
    """Kafka's poll counts a rebalance against its timeout. Here the second member's join
    waits for the first to rejoin, which it does only in its own poll, on the same thread:
    a poll that blocked until the rebalance ended would wait out the first member's
    rebalance timeout (max_poll_interval_ms) and then find it gone."""
    create_topic(cluster, "polled", partitions=2)
    settings = {**FAST, "max_poll_interval_ms": 60_000}
    first = Consumer("polled", bootstrap_servers=bootstrap(cluster), group_id="patient", **settings)
    second = Consumer(
        "polled", bootstrap_servers=bootstrap(cluster), group_id="patient", **settings
    )
    try:
        wait_until(lambda: first.poll(timeout_ms=100) is not None and first.assignment(), 30, "a")
        started = time.monotonic()
        assert second.poll(timeout_ms=500) == {}
        assert time.monotonic() - started < 20, "the poll waited for the other member"
        assert not second.assignment()

        def split() -> bool:
            first.poll(timeout_ms=100)
            second.poll(timeout_ms=100)
            return len(first.assignment()) == 1 and len(second.assignment()) == 1

        wait_until(split, 30, "one partition each, the first member never timed out")
    finally:
        first.close()
        second.close()


def test_a_member_busy_past_its_session_timeout_keeps_its_place_in_a_rebalance(cluster):
    """KIP-62: while a member works on its records (no poll) a newcomer starts a rebalance;
    the busy member's heartbeats go on, so the rebalance waits for its next poll (up to
    max_poll_interval_ms) instead of expelling it after session_timeout_ms and handing the
    newcomer every partition meanwhile."""
    create_topic(cluster, "busy", partitions=2)
    settings = {**FAST, "max_poll_interval_ms": 60_000}
    busy = Consumer("busy", bootstrap_servers=bootstrap(cluster), group_id="busy", **settings)
    newcomer = Consumer("busy", bootstrap_servers=bootstrap(cluster), group_id="busy", **settings)
    try:
        wait_until(lambda: busy.poll(timeout_ms=100) is not None and busy.assignment(), 30, "a")
        member_id = busy._group.member_id
        busy_until = time.monotonic() + 2.5 * FAST["session_timeout_ms"] / 1000
        while time.monotonic() < busy_until:  # `busy` does not poll meanwhile
            newcomer.poll(timeout_ms=200)
            assert not newcomer.assignment(), "the busy member was expelled"

        def split() -> bool:
            busy.poll(timeout_ms=100)
            newcomer.poll(timeout_ms=100)
            return len(busy.assignment()) == 1 and len(newcomer.assignment()) == 1

        wait_until(split, 30, "one partition each")
        assert busy._group.member_id == member_id  # the same membership, never reset
    finally:
        busy.close()
        newcomer.close()
