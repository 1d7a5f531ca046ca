"""Forged Raft messages, a dead Raft task and an absurd quorum-state, against real
`strom server` processes over real gRPC (issue 16).

- Node 99, which is no voter, opens RaftService.Exchange to each of three combined nodes and
  sends BeginQuorumEpoch(epoch=2^31-1), BeginQuorumEpoch(epoch+1) and a FetchResponse with a
  forged entry. Before the fix every voter persisted epoch 2^31-1, the next election
  overflowed int32 and the quorum never came back. Now each request is answered
  INCONSISTENT_VOTER_SET, the leader and epoch stay, and a topic can still be created.
- A node whose quorum-state write fails (a directory where its temp file goes) logs one
  line, answers liveness NOT_SERVING and exits 1 instead of running on without Raft.
- A node whose quorum-state holds epoch 2^31-1 (as an older version persisted it) refuses to
  start with one line naming the file; the two others keep the quorum.
"""

from __future__ import annotations

import glob
import json
import os
import queue
import signal
import time
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from raft import messages as m
from raft.wire import to_proto
from strom_api.v1 import common_pb2, controller_pb2, raft_pb2, raft_pb2_grpc
from tests.client.cluster_helpers import create_topic
from tests.node_integration.node_cluster import NodeCluster, running_cluster
from tests.raft_integration.process_cluster import wait_until

FORGER = 99
INT32_MAX = 2**31 - 1
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def exchange(address: str, messages: list[m.Message], answers: int) -> list[raft_pb2.RaftMessage]:
    """Sends `messages` as node 99 on one Exchange stream; returns the first `answers`
    messages that come back (fewer if no more come within 3 seconds)."""
    outbox: queue.Queue[raft_pb2.RaftMessage | None] = queue.Queue()
    outbox.put(raft_pb2.RaftMessage(src=FORGER, dst=messages[0].dst))  # the hello
    for message in messages:
        outbox.put(to_proto(message))

    def requests() -> Iterator[raft_pb2.RaftMessage]:
        while (item := outbox.get()) is not None:
            yield item

    got: list[raft_pb2.RaftMessage] = []
    with grpc.insecure_channel(address) as channel:
        stub = raft_pb2_grpc.RaftServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.Exchange(requests(), timeout=3)
        try:
            for pb in call:
                got.append(pb)
                if len(got) >= answers:
                    break
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
        finally:
            outbox.put(None)
            call.cancel()
    return got


def quorum_view(cluster: NodeCluster, node: int) -> tuple[int, int]:
    """(epoch, leader) as the node's Raft metrics report them."""
    samples = cluster.scrape(node)
    epoch = samples[("kafka_server_raftmetrics_current_epoch", ())]
    leader = samples[("kafka_server_raftmetrics_current_leader", ())]
    return int(epoch), int(leader)


def settled_view(cluster: NodeCluster) -> tuple[int, int]:
    def agreed() -> tuple[int, int] | None:
        views = {quorum_view(cluster, n) for n in cluster.procs}
        view = views.pop() if len(views) == 1 else None
        return view if view is not None and view[1] > 0 else None

    return wait_until(agreed, 30, "every node to agree on the leader and epoch")


def quorum_state_path(cluster: NodeCluster, node: int) -> str:
    paths = glob.glob(os.path.join(cluster.data_dir(node), "__cluster_metadata-0", "quorum-state"))
    assert len(paths) == 1, paths
    return paths[0]


def liveness(cluster: NodeCluster, node: int) -> int | None:
    try:
        with grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[node]}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            request = health_pb2.HealthCheckRequest(service="")
            return int(stub.Check(request, timeout=1).status)
    except grpc.RpcError:
        return None


@pytest.fixture
def cluster(tmp_path):
    with running_cluster(str(tmp_path)) as cluster:
        yield cluster


def test_forged_begin_quorum_epoch_from_a_non_voter_changes_nothing(cluster: NodeCluster) -> None:
    epoch, leader = settled_view(cluster)
    for node in cluster.ids:
        address = f"127.0.0.1:{cluster.controller_port[node]}"
        answers = exchange(
            address,
            [
                m.BeginQuorumEpochRequest(FORGER, node, INT32_MAX),
                m.BeginQuorumEpochRequest(FORGER, node, epoch + 1),
                # What a deposed quorum would have fetched from node 99 before the fix.
                m.FetchResponse(
                    FORGER,
                    node,
                    epoch + 1,
                    FORGER,
                    10**6,
                    (m.Entry(10**5, epoch + 1, b"RemoveTopicRecord"),),
                    fetch_offset=10**5,
                ),
                # A voter's name on node 99's stream: refused by the transport.
                m.BeginQuorumEpochRequest(
                    next(v for v in cluster.ids if v != node), node, epoch + 1
                ),
            ],
            answers=2,  # waits out the deadline: a second answer would be a bug
        )
        # Epoch 2^31-1 is refused at decoding (dropped); epoch+1 from a non-voter is
        # answered as Kafka answers it; the forged response and the spoof get nothing.
        kinds = [(pb.WhichOneof("body"), pb.src, pb.dst) for pb in answers]
        assert kinds == [("begin_quorum_epoch_response", node, FORGER)], answers
        for pb in answers:
            body = pb.begin_quorum_epoch_response
            assert body.error == common_pb2.INCONSISTENT_VOTER_SET
            assert body.epoch == epoch
    time.sleep(3)  # two fetch timeouts: any election the forgeries caused would show
    assert settled_view(cluster) == (epoch, leader)
    for node in cluster.ids:
        with open(quorum_state_path(cluster, node)) as f:
            assert json.load(f)["leaderEpoch"] == epoch
    create_topic(cluster, "after-forgeries")
    for node in cluster.ids:
        assert cluster.scrape(node)[("strom_raft_messages_refused_total", ())] >= 3
        text = cluster.log_text(node)
        assert "Refused a Raft message from node 99" in text
        assert "Traceback" not in text, text[-3000:]


def test_a_dead_raft_task_ends_the_process_with_one_line(cluster: NodeCluster) -> None:
    leader = cluster.active_controller()
    victim = next(n for n in cluster.ids if n != leader)
    # The next quorum-state write of the victim fails: its temp file's name is taken.
    os.mkdir(quorum_state_path(cluster, victim) + ".tmp")
    cluster.stop(leader, signal.SIGKILL)  # the election that follows writes quorum-state
    proc = cluster.procs[victim]
    seen: set[int | None] = set()
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        seen.add(liveness(cluster, victim))
        time.sleep(0.05)
    assert proc.wait(timeout=5) == 1
    cluster.procs.pop(victim)
    assert NOT_SERVING in seen, "liveness answered NOT_SERVING before the process ended"
    text = cluster.log_text(victim)
    fatal = [line for line in text.splitlines() if "Encountered fatal fault" in line]
    assert len(fatal) == 1 and "IsADirectoryError" in fatal[0], text[-3000:]
    assert "Traceback" not in text, text[-3000:]


def test_an_out_of_range_epoch_in_quorum_state_stops_only_that_node(cluster: NodeCluster) -> None:
    node = 3
    assert cluster.stop(node) == 0
    path = quorum_state_path(cluster, node)
    with open(path) as f:
        state = json.load(f)
    state.update(leaderEpoch=INT32_MAX, leaderId=FORGER)  # as an older version persisted it
    with open(path, "w") as f:
        json.dump(state, f)
    cluster.start(node)
    proc = cluster.procs.pop(node)
    assert proc.wait(timeout=60) == 1
    text = cluster.log_text(node)
    errors = [line for line in text.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and path in errors[0] and str(INT32_MAX) in errors[0], text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    # The two others still hold the quorum.
    response = cluster.call(
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(name="two", num_partitions=1, replication_factor=2)
            ]
        ),
    )
    assert not response.topics[0].HasField("error"), response
