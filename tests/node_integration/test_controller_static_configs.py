"""A min.insync.replicas set only in server.properties reaches the controller (issue 17):
the brokers enforced it, but the controller's eligible-leader-replica logic used 1, so
deploy/k8s's `min.insync.replicas=2` protected nothing after an unclean shutdown. Three
real combined nodes whose files say 3: when one stops, the ISR falls below 3 and the
controller keeps the leaver eligible to lead (KIP-966's ELR), as a topic config would."""

from __future__ import annotations

from node_cluster import running_cluster

from strom_api.v1 import controller_pb2
from tests.raft_integration.process_cluster import wait_until


def describe(cluster, topic: str):
    response = cluster.call("DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[topic]))
    return response.topics[0].partitions[0]


def test_a_static_min_insync_replicas_feeds_the_controllers_elr(tmp_path):
    with running_cluster(str(tmp_path), 3, extra={"min.insync.replicas": "3"}) as cluster:
        response = cluster.call(
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(name="t", num_partitions=1, replication_factor=3)
                ]
            ),
        )
        assert not response.topics[0].HasField("error"), response
        active = cluster.active_controller()
        leaver = next(n for n in cluster.ids if n != active)
        assert cluster.stop(leaver) == 0  # a controlled shutdown: it leaves the ISR

        def shrunk():
            p = describe(cluster, "t")
            return p if leaver not in p.isr else None

        p = wait_until(shrunk, 20, "the ISR without the stopped node")
        assert list(p.eligible_leader_replicas) == [leaver], p
