"""Replication under broker failures, on real processes (RF 3, min.insync.replicas=2):
acknowledged records survive kill -9 of the leader, two brokers down refuse acks=all but
still serve reads, and a restarted replica that holds records the new leader never had
truncates them (diverging epoch) and rejoins the ISR with a log equal to the leader's."""

from __future__ import annotations

import os
import signal
import time

import grpc

from strom_api.records import decode_batches
from strom_api.v1 import controller_pb2
from tests.data_plane.data_client import DataClient, batch, error_name
from tests.node_integration.node_cluster import NodeCluster
from tests.raft_integration.process_cluster import wait_until


def create_topic(cluster, name, rf=3, min_isr="2"):
    response = cluster.call(
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(
                    name=name,
                    num_partitions=1,
                    replication_factor=rf,
                    configs={"min.insync.replicas": min_isr},
                )
            ]
        ),
    )
    assert response.topics[0].error.code == 0, response


def client_of(cluster):
    brokers = cluster.ids if not cluster.split else cluster.ids[len(cluster.controller_ids) :]
    return DataClient({i: f"127.0.0.1:{cluster.broker_port[i]}" for i in brokers})


def isr_of(client, topic, live):
    def check():
        try:
            meta = client.metadata([topic], broker=live)
        except AssertionError:
            return None
        return list(meta.topics[0].partitions[0].isr)

    return check


def replica_log(cluster, node, topic):
    directory = os.path.join(cluster.data_dir(node), f"{topic}-0")
    data = b""
    for name in sorted(os.listdir(directory)):
        if name.endswith(".log"):
            with open(os.path.join(directory, name), "rb") as f:
                data += f.read()
    return data


def produce_acked(client, topic, value, leader_hint, deadline):
    """Sends one record with acks=all until some leader acknowledges it; returns (offset,
    leader). Retries may write a record twice (no idempotence here): the check is for loss."""
    leader = leader_hint
    while time.monotonic() < deadline:
        try:
            answer = client.produce_raw(leader, topic, 0, batch([value]), timeout_ms=3000)
            if answer.error.code == 0:
                return answer.base_offset, leader
        except grpc.RpcError:
            pass
        time.sleep(0.05)
        try:
            leader = client.leader(topic, 0, timeout_s=2)
        except AssertionError:
            pass
    raise AssertionError(f"{value!r} was never acknowledged")


def test_kill_9_of_the_leader_loses_no_acknowledged_record(tmp_path):
    cluster = NodeCluster(str(tmp_path), 3)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        create_topic(cluster, "durable")
        client = client_of(cluster)
        leader = client.leader("durable", 0)
        acked: list[tuple[bytes, int]] = []
        deadline = time.monotonic() + 90
        killed = None
        for i in range(90):
            if i == 30:
                killed = leader
                cluster.stop(leader, signal.SIGKILL)
                leader = next(b for b in cluster.ids if b != killed)
            value = b"v%03d" % i
            offset, leader = produce_acked(client, "durable", value, leader, deadline)
            acked.append((value, offset))
        assert killed is not None
        cluster.start(killed)
        survivor = leader
        wait_until(
            lambda: (isr := isr_of(client, "durable", survivor)()) and len(isr) == 3,
            40,
            "the restarted broker back in the ISR",
        )
        records = client.read_all("durable", 0)
        by_offset = {r.offset: r.value for r in records}
        lost = [v for v, off in acked if by_offset.get(off) != v]
        assert not lost, f"acknowledged records lost or moved: {lost}"
        offsets = [off for _, off in acked]
        assert offsets == sorted(offsets)  # acknowledged order is log order
        # Below the high watermark every replica holds the same bytes.
        wait_until(
            lambda: len({replica_log(cluster, n, "durable") for n in cluster.ids}) == 1,
            20,
            "the replicas' logs to be equal",
        )
    finally:
        cluster.stop_all()


def test_two_brokers_down_refuses_acks_all_and_still_serves_reads(tmp_path):
    cluster = NodeCluster(str(tmp_path), 3, brokers=3)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        create_topic(cluster, "strict")
        client = client_of(cluster)
        leader = client.leader("strict", 0)
        for i in range(5):
            assert client.produce_raw(leader, "strict", 0, batch([b"s%d" % i])).error.code == 0
        followers = [b for b in client.addresses if b != leader]
        for follower in followers:
            cluster.stop(follower, signal.SIGKILL)

        timed_out = []

        def refused():
            answer = client.produce_raw(leader, "strict", 0, batch([b"nope"]), timeout_ms=1000)
            if error_name(answer.error) != "NOT_ENOUGH_REPLICAS":
                # Until the controller fences them the ISR still names the dead brokers:
                # the record is written, never acknowledged (Kafka's behaviour too).
                assert error_name(answer.error) in (
                    "REQUEST_TIMED_OUT",
                    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                ), answer
                timed_out.append(answer)
            return answer if error_name(answer.error) == "NOT_ENOUGH_REPLICAS" else None

        answer = wait_until(refused, 30, "acks=all refused with NOT_ENOUGH_REPLICAS")
        assert answer.error.retriable and "min.insync.replicas=2" in answer.error.message
        # The high watermark stood still below min.insync.replicas: only s0-s4 are visible.
        assert [r.value for r in client.read_all("strict", 0)] == [b"s%d" % i for i in range(5)]
        one = client.produce_raw(leader, "strict", 0, batch([b"acks1"]), acks=1)
        assert one.error.code == 0
        for follower in followers:
            cluster.start(follower)
        wait_until(
            lambda: (isr := isr_of(client, "strict", leader)()) and len(isr) == 3,
            40,
            "both brokers back in the ISR",
        )
        assert client.produce_raw(leader, "strict", 0, batch([b"again"])).error.code == 0
        values = [r.value for r in client.read_all("strict", 0)]
        assert values[-2:] == [b"acks1", b"again"]
        assert values.count(b"nope") == len(timed_out)  # a refused produce wrote nothing
    finally:
        cluster.stop_all()


def test_a_replica_with_records_the_new_leader_lacks_truncates_and_rejoins(tmp_path):
    cluster = NodeCluster(str(tmp_path), 3, brokers=3)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        create_topic(cluster, "diverge", min_isr="1")
        client = client_of(cluster)
        old = client.leader("diverge", 0)
        for i in range(5):
            assert client.produce_raw(old, "diverge", 0, batch([b"c%d" % i])).error.code == 0
        wait_until(
            lambda: len({replica_log(cluster, n, "diverge") for n in client.addresses}) == 1,
            10,
            "the followers to copy the first records",
        )
        followers = [b for b in client.addresses if b != old]
        # Freeze the followers briefly (well within the session and lag timeouts), so only
        # the leader gets the next records, then kill it.
        for f in followers:
            cluster.procs[f].send_signal(signal.SIGSTOP)
        for i in range(5):
            answer = client.produce_raw(old, "diverge", 0, batch([b"lost%d" % i]), acks=1)
            assert answer.error.code == 0
        cluster.stop(old, signal.SIGKILL)
        for f in followers:
            cluster.procs[f].send_signal(signal.SIGCONT)
        new = client.leader("diverge", 0, timeout_s=30, not_=old)
        assert client.produce_raw(new, "diverge", 0, batch([b"after"])).error.code == 0
        cluster.start(old)
        wait_until(
            lambda: (isr := isr_of(client, "diverge", new)()) and len(isr) == 3,
            40,
            "the old leader back in the ISR",
        )
        wait_until(
            lambda: replica_log(cluster, old, "diverge") == replica_log(cluster, new, "diverge"),
            20,
            "the old leader's log to equal the new leader's",
        )
        values = [
            r.value for _, rs in decode_batches(replica_log(cluster, old, "diverge")) for r in rs
        ]
        # A fetch answer already on its way when the followers froze may have carried lost0
        # to them; nothing after it could have left the old leader.
        assert values in (
            [b"c0", b"c1", b"c2", b"c3", b"c4", b"after"],
            [b"c0", b"c1", b"c2", b"c3", b"c4", b"lost0", b"after"],
        )
        assert "diverged from leader" in cluster.log_text(old)
    finally:
        cluster.stop_all()
